"""Solver selection and solving, in one place for every optimisation policy.

Policies write Pyomo models (readable, any solver) and, where it pays, a matrix form of the
same LP that is handed to HiGHS directly (no modelling overhead per round). Both are
verified to agree in the tests.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import sys
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import numpy as np

from shock.core.errors import SolverError
from shock.core.policy import ProblemClass

# Which problem classes each solver takes.
SOLVER_CLASSES: dict[str, frozenset[ProblemClass]] = {
    "highs": frozenset({ProblemClass.LP, ProblemClass.MILP}),
    "gurobi": frozenset({ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP}),
    "scip": frozenset({ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP}),
    "ipopt": frozenset({ProblemClass.LP, ProblemClass.NLP}),
    "cbc": frozenset({ProblemClass.LP, ProblemClass.MILP}),
    "glpk": frozenset({ProblemClass.LP, ProblemClass.MILP}),
}
# The Pyomo interface each solver is driven through (`pyomo help --solvers` lists them).
_PYOMO_SOLVER = {
    "highs": "appsi_highs",
    "gurobi": "gurobi_direct",
    "scip": "scip_direct",  # Pyomo's pyscipopt interface
    "ipopt": "cyipopt",  # Pyomo's PyNumero interface to cyipopt (needs pynumero_ASL)
    "cbc": "cbc",  # the cbc executable
    "glpk": "glpk",  # the glpsol executable
}
# The Python module (or, for cbc/glpk, the executable on PATH) each solver needs.
_REQUIRED_MODULE = {
    "highs": "highspy",
    "gurobi": "gurobipy",
    "scip": "pyscipopt",
    "ipopt": "cyipopt",
}
_EXECUTABLE = {"cbc": "cbc", "glpk": "glpsol"}

_PYNUMERO_BUILD = (
    "apt-get install cmake g++ libamplsolver-dev && python -m pyomo.contrib.pynumero.build "
    "-DASL_INCLUDE_DIR=/usr/include/ampl-netlib-solvers "
    "-DASL_LIBRARY=/usr/lib/x86_64-linux-gnu/libamplsolver.so -DBUILD_AMPLASL_IF_NEEDED=OFF"
)
_INSTALL_HINT = {
    "highs": "pip install highspy",
    "gurobi": (
        "pip install 'shock[gurobi]' (gurobipy; its bundled licence takes at most 2000 "
        "variables and 2000 constraints, a full Gurobi licence lifts the limit)"
    ),
    "scip": "pip install 'shock[scip]' (pyscipopt)",
    "ipopt": (
        "pip install 'shock[ipopt]' (cyipopt-wheels bundles Ipopt), then build Pyomo's "
        f"PyNumero ASL library: {_PYNUMERO_BUILD}"
    ),
    "cbc": "apt-get install coinor-cbc",
    "glpk": "apt-get install glpk-utils",
}
# Gurobi's pip licence (SIZE_LIMIT_EXCEEDED, error 10010 in gurobipy).
GUROBI_PIP_LIMITS = {"variables": 2000, "constraints": 2000, "nonlinear_variables": 200}


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
            raise SolverError(
                f"solver '{self.name}' cannot solve {problem_class.value} problems "
                f"(policy '{policy}'); it takes {_accepted(self.name)}"
            )
        reason = unavailable_reason(self.name)
        if reason is not None:
            state = "is not installed" if _absent(self.name) else "cannot run here"
            raise SolverError(f"solver '{self.name}' {state}: {reason}")

    @property
    def uses_fast_path(self) -> bool:
        return self.fast_path and self.name == "highs"


def _accepted(name: str) -> str:
    return "/".join(sorted(c.value for c in SOLVER_CLASSES[name]))


def unavailable_reason(name: str) -> str | None:
    """Why solver `name` cannot run here, with how to fix it; None when it can."""
    if name not in SOLVER_CLASSES:
        return f"unknown solver; valid solvers: {', '.join(sorted(SOLVER_CLASSES))}"
    if _absent(name):
        if name in _EXECUTABLE:
            return f"no '{_EXECUTABLE[name]}' executable on PATH; {_INSTALL_HINT[name]}"
        return f"Python module '{_REQUIRED_MODULE[name]}' not found; {_INSTALL_HINT[name]}"
    if name == "gurobi":
        return _gurobi_licence_problem()
    if name == "ipopt":
        return _pynumero_asl_problem()
    return None


def _absent(name: str) -> bool:
    """Whether a known solver's Python module (or, for cbc/glpk, its executable) is missing."""
    if name in _EXECUTABLE:
        return shutil.which(_EXECUTABLE[name]) is None
    return importlib.util.find_spec(_REQUIRED_MODULE[name]) is None


def is_installed(name: str) -> bool:
    """Whether a solver can run here: its Python interface (or, for cbc/glpk, its executable),
    plus Gurobi's licence and, for Ipopt, Pyomo's PyNumero ASL library."""
    return unavailable_reason(name) is None


def available_solvers() -> list[str]:
    return [name for name in SOLVER_CLASSES if is_installed(name)]


@cache
def _gurobi_licence_problem() -> str | None:
    try:
        import gurobipy

        env = gurobipy.Env(empty=True)  # silent: no licence banner on stdout
        env.setParam("OutputFlag", 0)
        env.start()
        env.dispose()
    except Exception as exc:  # GurobiError, or an import failure of the binary module
        return (
            f"gurobipy cannot start a Gurobi environment ({exc}); check the licence "
            "(GRB_LICENSE_FILE) or reinstall with pip install 'shock[gurobi]' for the bundled "
            "size-limited one"
        )
    return None


@cache
def _pynumero_asl_problem() -> str | None:
    try:
        from pyomo.contrib.pynumero.asl import AmplInterface

        available = bool(AmplInterface.available())
    except Exception as exc:  # a missing numpy/scipy/packaging, or a broken library
        return f"Pyomo's PyNumero interface cannot be loaded ({exc}); {_INSTALL_HINT['ipopt']}"
    if not available:
        return (
            "cyipopt is installed, but Pyomo's cyipopt interface also needs the PyNumero ASL "
            f"library (pynumero_ASL), which is not built; {_PYNUMERO_BUILD}"
        )
    return None


# Option names per solver: time limit (seconds) and relative MIP gap. Ipopt has no MIP gap
# (it takes no integer variables).
_TIME_LIMIT_OPTION = {
    "highs": "time_limit",
    "gurobi": "TimeLimit",
    "scip": "limits/time",
    # Pyomo's cyipopt interface cannot map Ipopt's max_wall_time stop (KeyError), only this.
    "ipopt": "max_cpu_time",
    "cbc": "seconds",
    "glpk": "tmlim",  # whole seconds
}
_MIP_GAP_OPTION = {
    "highs": "mip_rel_gap",
    "gurobi": "MIPGap",
    "scip": "limits/gap",
    "cbc": "ratioGap",
    "glpk": "mipgap",
}


def solver_options(spec: SolverSpec) -> dict[str, Any]:
    """The options `solve_pyomo` hands the solver, under its own option names."""
    options: dict[str, Any] = {}
    if spec.name == "highs":
        # An interior solution of a degenerate LP (the centre of the optimal face) is what
        # cvxpy/ECOS return in Gavel; simplex would pick an arbitrary vertex instead.
        options.update(solver="ipm", run_crossover="choose", presolve="off")
    if spec.name == "ipopt":
        # Ipopt's defaults (tol 1e-8, bounds relaxed by 1e-8) leave up to ~2e-6 relative error
        # on the time-fraction LPs; these agree with HiGHS to ~1e-7. A point that reaches only
        # Ipopt's acceptable tolerances (1e-6) is still accepted.
        options.update(tol=1e-10, bound_relax_factor=1e-10)
    if spec.time_limit_s is not None:
        limit: float | int = float(spec.time_limit_s)
        if spec.name == "glpk":
            limit = max(1, math.ceil(limit))  # glpsol takes whole seconds only
        options[_TIME_LIMIT_OPTION[spec.name]] = limit
        if spec.name == "cbc":
            options["timeMode"] = "elapsed"  # wall clock, like every other solver here
    if spec.mip_gap is not None and spec.name in _MIP_GAP_OPTION:
        options[_MIP_GAP_OPTION[spec.name]] = float(spec.mip_gap)
    options.update(spec.options)
    return options


def solve_pyomo(model: Any, spec: SolverSpec) -> None:
    """Solve a Pyomo model in place; raise SolverError unless it is optimal (or, for a model
    with integer variables, a feasible incumbent at a time or iteration limit)."""
    import pyomo.environ as pyo
    from pyomo.opt import SolverStatus, TerminationCondition

    name = spec.name
    if name not in SOLVER_CLASSES:
        raise SolverError(
            f"unknown solver '{name}'; valid solvers: {', '.join(sorted(SOLVER_CLASSES))}"
        )
    reason = unavailable_reason(name)
    if reason is not None:
        raise SolverError(f"solver '{name}' is not available in this environment: {reason}")
    if ProblemClass.MILP not in SOLVER_CLASSES[name] and _has_discrete_variables(model):
        # Ipopt would silently relax integrality.
        raise SolverError(
            f"solver '{name}' cannot solve MILP problems (the model has integer variables); "
            f"it takes {_accepted(name)}"
        )
    if name == "highs":
        quiet_highs_banner()
    solver = pyo.SolverFactory(_PYOMO_SOLVER[name])
    if solver is None or not solver.available(exception_flag=False):
        raise SolverError(
            f"solver '{name}' is not available in this environment: Pyomo's "
            f"'{_PYOMO_SOLVER[name]}' interface cannot run it; {_INSTALL_HINT[name]}"
        )
    options = solver_options(spec)
    try:
        if name == "ipopt":
            # Pyomo's cyipopt interface takes options per solve, not as `solver.options`.
            result = solver.solve(model, load_solutions=False, options=options)
        else:
            for key, value in options.items():
                solver.options[key] = value
            result = solver.solve(model, load_solutions=False)
    except Exception as exc:  # solver back-ends raise many exception types
        raise SolverError(_failure_message(name, model, exc)) from exc
    condition = result.solver.termination_condition
    status = result.solver.status
    optimal = condition in (
        TerminationCondition.optimal,
        TerminationCondition.locallyOptimal,
        TerminationCondition.globallyOptimal,
    ) or (name == "ipopt" and condition is TerminationCondition.feasible)  # acceptable level
    stopped_early = condition in (
        TerminationCondition.maxTimeLimit,
        TerminationCondition.maxIterations,
        TerminationCondition.maxEvaluations,
        TerminationCondition.feasible,  # glpsol at its time limit
    )
    if stopped_early and not optimal:
        # Only a MIP incumbent is feasible when a solver stops early; an LP or NLP iterate
        # (interior point, Ipopt) need not be, so it is an error like on the HiGHS fast path.
        if len(result.solution) == 0 or not _has_discrete_variables(model):
            limit = f", time limit {spec.time_limit_s} s" if spec.time_limit_s else ""
            raise SolverError(
                f"solver '{name}' stopped early ({condition}{limit}) without an optimal solution"
            )
    elif not optimal:
        raise SolverError(f"solver '{name}' ended with {condition} (status {status})")
    if status not in (SolverStatus.ok, SolverStatus.warning, SolverStatus.aborted):
        raise SolverError(f"solver '{name}' returned status {status} ({condition})")
    # Accepted: load without Pyomo's warning about a 'warning'/'aborted' status.
    result.solver.status = SolverStatus.ok
    model.solutions.load_from(result)


def model_size(model: Any) -> tuple[int, int]:
    """(variables, active constraints) of a Pyomo model, blocks included; an upper bound on
    what a solver sees (it leaves out variables no constraint or objective uses)."""
    import pyomo.environ as pyo

    variables = sum(1 for _ in model.component_data_objects(pyo.Var, descend_into=True))
    constraints = sum(
        1 for _ in model.component_data_objects(pyo.Constraint, active=True, descend_into=True)
    )
    return variables, constraints


def gurobi_pip_licence_excess(model: Any) -> str | None:
    """How a Pyomo model exceeds gurobipy's bundled (pip) licence, or None when it fits."""
    variables, constraints = model_size(model)
    limits = GUROBI_PIP_LIMITS
    if variables > limits["variables"] or constraints > limits["constraints"]:
        return (
            f"{variables} variables and {constraints} constraints (gurobipy's pip licence "
            f"takes at most {limits['variables']} variables and {limits['constraints']} "
            "constraints)"
        )
    if variables > limits["nonlinear_variables"] and _is_nonlinear(model):
        return (
            f"{variables} variables and non-linear terms (gurobipy's pip licence takes at "
            f"most {limits['nonlinear_variables']} variables when any term is non-linear)"
        )
    return None


def _has_discrete_variables(model: Any) -> bool:
    import pyomo.environ as pyo

    return any(
        not var.fixed and (var.is_integer() or var.is_binary())
        for var in model.component_data_objects(pyo.Var, descend_into=True)
    )


def _is_nonlinear(model: Any) -> bool:
    import pyomo.environ as pyo

    for constraint in model.component_data_objects(pyo.Constraint, active=True):
        if constraint.body.polynomial_degree() not in (0, 1):
            return True
    for objective in model.component_data_objects(pyo.Objective, active=True):
        if objective.expr.polynomial_degree() not in (0, 1):
            return True
    return False


def _failure_message(name: str, model: Any, exc: Exception) -> str:
    if ProblemClass.NLP not in SOLVER_CLASSES[name] and _is_nonlinear(model):
        return (
            f"solver '{name}' cannot solve NLP problems (the model has non-linear terms); "
            f"it takes {_accepted(name)}"
        )
    if name == "gurobi" and (
        getattr(exc, "errno", None) == 10010 or "size-limited" in str(exc).lower()
    ):
        excess = gurobi_pip_licence_excess(model) or "a model beyond the licence's size limits"
        return (
            f"solver 'gurobi' failed: {exc}. This model has {excess}. Use a full Gurobi "
            "licence or another solver (e.g. --solver highs)"
        )
    return f"solver '{name}' failed: {type(exc).__name__}: {exc}"


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


@cache
def quiet_highs_banner() -> None:
    """HiGHS prints a banner on stdout when a process makes its first instance, before any
    option can turn output off. Make that first instance with stdout pointed at /dev/null, so
    shock's own output (tables, piped documents) stays clean; later instances print nothing."""
    import highspy

    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to keep clean
        highspy.Highs()
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def new_highs() -> Any:
    """A silent HiGHS instance."""
    import highspy

    quiet_highs_banner()
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    return highs


def _highs_for(spec: SolverSpec, mip: bool = False) -> Any:
    """One HiGHS instance per option set, reused: creating one costs as much as a small solve.
    LPs get interior point without presolve; MILPs HiGHS' own defaults."""
    key = (mip, spec.time_limit_s, spec.mip_gap, tuple(sorted(spec.options.items())))
    highs = _HIGHS_INSTANCES.get(key)
    if highs is None:
        highs = new_highs()
        if not mip:
            # The centre of the optimal face, like Gavel's cvxpy/ECOS, not an arbitrary vertex.
            highs.setOptionValue("solver", "ipm")
            highs.setOptionValue("run_crossover", "choose")
            # Presolve costs more than it saves on these small LPs (same solution without it).
            highs.setOptionValue("presolve", "off")
        if spec.time_limit_s is not None:
            highs.setOptionValue("time_limit", float(spec.time_limit_s))
        if spec.mip_gap is not None:
            highs.setOptionValue("mip_rel_gap", float(spec.mip_gap))
        for option, value in spec.options.items():
            highs.setOptionValue(option, value)
        _HIGHS_INSTANCES[key] = highs
    return highs


def highs_lp(lp: MatrixLP) -> Any:
    """The LP as a highspy.HighsLp (for a HiGHS instance driven directly)."""
    import highspy

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
    return model


def solve_matrix_lp(lp: MatrixLP, spec: SolverSpec) -> np.ndarray:
    """Solve an LP with HiGHS' interior-point method and return x (crossover runs only when
    the interior point is imprecise, so the solution stays inside the optimal face)."""
    import highspy

    highs = _highs_for(spec)
    num_col = len(lp.cost)
    # The arrays by pointer (no HighsLp object to fill field by field): the same model.
    highs.passModel(
        num_col,
        len(lp.row_lower),
        len(lp.a_value),
        int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize),
        0.0,
        lp.cost,
        lp.col_lower,
        lp.col_upper,
        lp.row_lower,
        lp.row_upper,
        lp.a_start,
        lp.a_index,
        lp.a_value,
        _continuous(num_col),
    )
    highs.run()
    status = highs.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS ended with {highs.modelStatusToString(status)}")
    return np.asarray(highs.getSolution().col_value)


@lru_cache(maxsize=64)
def _continuous(num_col: int) -> np.ndarray:
    """Integrality of an LP's columns (all continuous), for HiGHS' pointer interface."""
    integrality = np.zeros(num_col, dtype=np.int32)
    integrality.flags.writeable = False
    return integrality


def solve_matrix_milp(lp: MatrixLP, integer: np.ndarray, spec: SolverSpec) -> np.ndarray:
    """Solve a MILP (columns where `integer` is true are integers) given in matrix form:
    HiGHS directly (its fast path), otherwise through a Pyomo model of the same matrix. Returns
    an optimal solution, or the incumbent when a time limit stops the search; raises
    SolverError when there is none (infeasible, or no incumbent in time)."""
    if not spec.uses_fast_path:
        return _solve_matrix_with_pyomo(lp, integer, spec)
    import highspy

    highs = _highs_for(spec, mip=True)
    model = highs_lp(lp)
    kinds = highspy.HighsVarType
    model.integrality_ = [kinds.kInteger if i else kinds.kContinuous for i in integer]
    highs.passModel(model)
    highs.run()
    status = highs.getModelStatus()
    solution = highs.getSolution()
    has_point = bool(solution.value_valid)
    if status == highspy.HighsModelStatus.kOptimal or (
        status == highspy.HighsModelStatus.kTimeLimit and has_point
    ):
        return np.asarray(solution.col_value)
    raise SolverError(f"HiGHS ended with {highs.modelStatusToString(status)}")


def _solve_matrix_with_pyomo(lp: MatrixLP, integer: np.ndarray, spec: SolverSpec) -> np.ndarray:
    import pyomo.environ as pyo

    n = len(lp.cost)
    model = pyo.ConcreteModel()
    model.x = pyo.Var(range(n))
    for j in range(n):
        var = model.x[j]
        var.domain = pyo.Integers if integer[j] else pyo.Reals
        var.setlb(None if math.isinf(lp.col_lower[j]) else float(lp.col_lower[j]))
        var.setub(None if math.isinf(lp.col_upper[j]) else float(lp.col_upper[j]))
    rows: list[list[tuple[int, float]]] = [[] for _ in range(len(lp.row_lower))]
    for j in range(n):
        for k in range(int(lp.a_start[j]), int(lp.a_start[j + 1])):
            rows[int(lp.a_index[k])].append((j, float(lp.a_value[k])))
    model.rows = pyo.ConstraintList()
    for r, terms in enumerate(rows):
        body = sum(value * model.x[j] for j, value in terms)
        lower, upper = lp.row_lower[r], lp.row_upper[r]
        model.rows.add(
            pyo.inequality(
                None if math.isinf(lower) else float(lower),
                body,
                None if math.isinf(upper) else float(upper),
            )
        )
    model.objective = pyo.Objective(
        expr=sum(float(c) * model.x[j] for j, c in enumerate(lp.cost) if c != 0),
        sense=pyo.minimize,
    )
    solve_pyomo(model, spec)
    return np.array([pyo.value(model.x[j]) for j in range(n)], dtype=float)
