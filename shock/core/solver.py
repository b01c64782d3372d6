"""Solver selection and solving, in one place for every optimisation policy.

Policies write Pyomo models (readable, any solver) and, where it pays, a matrix form of the
same LP that is handed to HiGHS directly (no modelling overhead per round). Both are
verified to agree in the tests.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shock.core.errors import SolverError
from shock.core.policy import ProblemClass

# Which problem classes each solver takes, and the Python module it needs.
SOLVER_CLASSES: dict[str, frozenset[ProblemClass]] = {
    "highs": frozenset({ProblemClass.LP, ProblemClass.MILP}),
    "gurobi": frozenset({ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP}),
    "scip": frozenset({ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP}),
    "ipopt": frozenset({ProblemClass.LP, ProblemClass.NLP}),
    "cbc": frozenset({ProblemClass.LP, ProblemClass.MILP}),
    "glpk": frozenset({ProblemClass.LP, ProblemClass.MILP}),
}
_PYOMO_SOLVER = {
    "highs": "appsi_highs",
    "gurobi": "gurobi_direct",
    "scip": "scip_direct",
    "ipopt": "cyipopt",
    "cbc": "cbc",
    "glpk": "glpk",
}
_REQUIRED_MODULE = {"highs": "highspy", "gurobi": "gurobipy", "scip": "pyscipopt"}


@dataclass(frozen=True, slots=True)
class SolverSpec:
    """The run-time solver choice (`--solver`)."""

    name: str = "highs"
    time_limit_s: float | None = None
    mip_gap: float | None = None
    # Use a policy's direct matrix path for HiGHS where it has one (same problem, less overhead).
    fast_path: bool = True
    options: dict[str, Any] = field(default_factory=dict)

    def check(self, problem_class: ProblemClass, policy: str) -> None:
        if problem_class is ProblemClass.HEURISTIC:
            return
        classes = SOLVER_CLASSES.get(self.name)
        if classes is None:
            raise SolverError(
                f"unknown solver '{self.name}'; valid solvers: {', '.join(sorted(SOLVER_CLASSES))}"
            )
        if problem_class not in classes:
            accepted = "/".join(sorted(c.value for c in classes))
            raise SolverError(
                f"solver '{self.name}' cannot solve {problem_class.value} problems "
                f"(policy '{policy}'); it takes {accepted}"
            )
        if not is_installed(self.name):
            raise SolverError(f"solver '{self.name}' is not installed: {_INSTALL_HINT[self.name]}")

    @property
    def uses_fast_path(self) -> bool:
        return self.fast_path and self.name == "highs"


_INSTALL_HINT = {
    "highs": "pip install highspy",
    "gurobi": "pip install 'shock[gurobi]' (and a Gurobi licence for large models)",
    "scip": "pip install 'shock[scip]'",
    "ipopt": "pip install cyipopt (Pyomo's cyipopt interface)",
    "cbc": "install the cbc executable (apt-get install coinor-cbc)",
    "glpk": "install the glpsol executable (apt-get install glpk-utils)",
}
_EXECUTABLE = {"cbc": "cbc", "glpk": "glpsol"}


def is_installed(name: str) -> bool:
    """Whether a solver's Python interface (or, for cbc/glpk, its executable) is present."""
    import shutil

    if name in _EXECUTABLE:
        return shutil.which(_EXECUTABLE[name]) is not None
    module = _REQUIRED_MODULE.get(name, "cyipopt" if name == "ipopt" else None)
    return module is not None and importlib.util.find_spec(module) is not None


def available_solvers() -> list[str]:
    return [name for name in SOLVER_CLASSES if is_installed(name)]


def solve_pyomo(model: Any, spec: SolverSpec) -> None:
    """Solve a Pyomo model in place; raise SolverError unless it is optimal (or feasible at a
    time limit)."""
    import pyomo.environ as pyo
    from pyomo.opt import SolverStatus, TerminationCondition

    solver = pyo.SolverFactory(_PYOMO_SOLVER[spec.name])
    if solver is None or not solver.available(exception_flag=False):
        raise SolverError(f"solver '{spec.name}' is not available in this environment")
    options = dict(spec.options)
    if spec.time_limit_s is not None:
        options[_time_limit_option(spec.name)] = spec.time_limit_s
    if spec.mip_gap is not None:
        options[_mip_gap_option(spec.name)] = spec.mip_gap
    if spec.name == "highs":
        # An interior solution of a degenerate LP (the centre of the optimal face) is what
        # cvxpy/ECOS return in Gavel; simplex would pick an arbitrary vertex instead.
        options.setdefault("solver", "ipm")
        options.setdefault("run_crossover", "choose")
        options.setdefault("presolve", "off")
    for key, value in options.items():
        solver.options[key] = value
    try:
        result = solver.solve(model, load_solutions=False)
    except Exception as exc:  # solver back-ends raise many exception types
        raise SolverError(f"solver '{spec.name}' failed: {exc}") from exc
    condition = result.solver.termination_condition
    ok = condition in (TerminationCondition.optimal, TerminationCondition.locallyOptimal)
    timed_out = condition in (TerminationCondition.maxTimeLimit, TerminationCondition.maxIterations)
    if not ok and not (timed_out and len(result.solution) > 0):
        raise SolverError(
            f"solver '{spec.name}' ended with {condition} (status {result.solver.status})"
        )
    if result.solver.status not in (SolverStatus.ok, SolverStatus.warning, SolverStatus.aborted):
        raise SolverError(f"solver '{spec.name}' returned status {result.solver.status}")
    model.solutions.load_from(result)


def _time_limit_option(name: str) -> str:
    return {
        "highs": "time_limit",
        "gurobi": "TimeLimit",
        "scip": "limits/time",
        "ipopt": "max_cpu_time",
        "cbc": "sec",
        "glpk": "tmlim",
    }[name]


def _mip_gap_option(name: str) -> str:
    return {
        "highs": "mip_rel_gap",
        "gurobi": "MIPGap",
        "scip": "limits/gap",
        "ipopt": "tol",
        "cbc": "ratio",
        "glpk": "mipgap",
    }[name]


@dataclass(frozen=True, slots=True)
class MatrixLP:
    """min c.x  s.t.  row_lower <= A x <= row_upper,  col_lower <= x <= col_upper.

    `A` is given column-wise (CSC: start, index, value) as HiGHS takes it.
    """

    cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    a_start: np.ndarray
    a_index: np.ndarray
    a_value: np.ndarray


_HIGHS_INSTANCES: dict[tuple[object, ...], Any] = {}


def _highs_for(spec: SolverSpec) -> Any:
    """One HiGHS instance per option set, reused: creating one costs as much as a small solve."""
    import highspy

    key = (spec.time_limit_s, tuple(sorted(spec.options.items())))
    highs = _HIGHS_INSTANCES.get(key)
    if highs is None:
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        # The centre of the optimal face, like Gavel's cvxpy/ECOS, not an arbitrary vertex.
        highs.setOptionValue("solver", "ipm")
        highs.setOptionValue("run_crossover", "choose")
        # Presolve costs more than it saves on these small LPs (same solution without it).
        highs.setOptionValue("presolve", "off")
        if spec.time_limit_s is not None:
            highs.setOptionValue("time_limit", float(spec.time_limit_s))
        for option, value in spec.options.items():
            highs.setOptionValue(option, value)
        _HIGHS_INSTANCES[key] = highs
    return highs


def solve_matrix_lp(lp: MatrixLP, spec: SolverSpec) -> np.ndarray:
    """Solve an LP with HiGHS' interior-point method and return x (crossover runs only when
    the interior point is imprecise, so the solution stays inside the optimal face)."""
    import highspy

    highs = _highs_for(spec)
    model = highspy.HighsLp()
    model.num_col_ = len(lp.cost)
    model.num_row_ = len(lp.row_lower)
    model.col_cost_ = lp.cost
    model.col_lower_ = lp.col_lower
    model.col_upper_ = lp.col_upper
    model.row_lower_ = lp.row_lower
    model.row_upper_ = lp.row_upper
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = lp.a_start
    model.a_matrix_.index_ = lp.a_index
    model.a_matrix_.value_ = lp.a_value
    highs.passModel(model)
    highs.run()
    status = highs.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS ended with {highs.modelStatusToString(status)}")
    return np.asarray(highs.getSolution().col_value)
