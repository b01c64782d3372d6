"""A solver plugin for any solver with a Pyomo interface, configured by data.

A solver plugin module describes its solver (Pyomo interface, what must be installed, its
option names) and registers a `PyomoSolver`; a solver with quirks subclasses it. Nothing is
imported from the solver's own package until a model is solved.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shock.core.errors import SolverError
from shock.core.solver import ProblemClass, Solver, SolverSpec, accepted_classes


@dataclass(frozen=True, kw_only=True)
class PyomoSolver(Solver):
    name: str
    description: str
    problem_classes: frozenset[ProblemClass]
    # The name Pyomo's SolverFactory knows it by (`pyomo help --solvers`).
    pyomo_interface: str
    # How to install it, shown when it is missing.
    install_hint: str
    # What must be installed: a Python module, or an executable on PATH.
    python_module: str | None = None
    executable: str | None = None
    # Its option names for a time limit (seconds) and a relative MIP gap; None: none.
    time_limit_option: str | None = None
    mip_gap_option: str | None = None
    # Options every solve gets (before the time limit, gap and the user's options).
    default_options: Mapping[str, Any] = field(default_factory=dict)
    highspy_fast_path: bool = False
    feasible_is_optimal: bool = False
    # The Pyomo interface takes options per `solve` call, not as `solver.options`.
    options_per_solve: bool = False

    def is_absent(self) -> bool:
        if self.executable is not None:
            return shutil.which(self.executable) is None
        if self.python_module is not None:
            return importlib.util.find_spec(self.python_module) is None
        return False

    def unavailable_reason(self) -> str | None:
        if self.is_absent():
            if self.executable is not None:
                return f"no '{self.executable}' executable on PATH; {self.install_hint}"
            return f"Python module '{self.python_module}' not found; {self.install_hint}"
        return self.runtime_problem()

    def runtime_problem(self) -> str | None:
        """Why an installed solver still cannot run (a licence, a missing library); None
        when it can."""
        return None

    def time_limit_options(self, seconds: float) -> dict[str, Any]:
        if self.time_limit_option is None:
            return {}
        return {self.time_limit_option: float(seconds)}

    def options(self, spec: SolverSpec) -> dict[str, Any]:
        options = dict(self.default_options)
        if spec.time_limit_s is not None:
            options.update(self.time_limit_options(spec.time_limit_s))
        if spec.mip_gap is not None and self.mip_gap_option is not None:
            options[self.mip_gap_option] = float(spec.mip_gap)
        options.update(spec.options)
        return options

    def prepare(self) -> None:
        """Runs before each solve (e.g. to keep a banner off stdout)."""

    def solve(self, model: Any, spec: SolverSpec) -> Any:
        import pyomo.environ as pyo

        self.prepare()
        solver = pyo.SolverFactory(self.pyomo_interface)
        if solver is None or not solver.available(exception_flag=False):
            raise SolverError(
                f"solver '{self.name}' is not available in this environment: Pyomo's "
                f"'{self.pyomo_interface}' interface cannot run it; {self.install_hint}"
            )
        options = self.options(spec)
        if self.options_per_solve:
            return solver.solve(model, load_solutions=False, options=options)
        for key, value in options.items():
            solver.options[key] = value
        return solver.solve(model, load_solutions=False)


def solve_pyomo(model: Any, spec: SolverSpec, infeasible_ok: bool = False) -> bool:
    """Solve a Pyomo model in place; raise SolverError unless it is optimal (or, for a model
    with integer variables, a feasible incumbent at a time or iteration limit).

    `infeasible_ok=True`: a model the solver proves infeasible returns False (nothing
    loaded) instead of raising, for sequences of bounded feasibility problems (bisections)."""
    from pyomo.opt import SolverStatus, TerminationCondition

    name = spec.name
    solver = spec.solver()
    reason = solver.unavailable_reason()
    if reason is not None:
        raise SolverError(f"solver '{name}' is not available in this environment: {reason}")
    if ProblemClass.MILP not in solver.problem_classes and _has_discrete_variables(model):
        # Ipopt would silently relax integrality.
        raise SolverError(
            f"solver '{name}' cannot solve MILP problems (the model has integer variables); "
            f"it takes {accepted_classes(solver)}"
        )
    try:
        result = solver.solve(model, spec)
    except SolverError:
        raise
    except Exception as exc:  # solver back-ends raise many exception types
        raise SolverError(_failure_message(solver, model, exc)) from exc
    condition = result.solver.termination_condition
    status = result.solver.status
    # Bisections' LPs are bounded (every column is): "infeasible or unbounded" is infeasible
    # there (Gurobi's presolve answers so).
    if infeasible_ok and condition in (
        TerminationCondition.infeasible,
        TerminationCondition.infeasibleOrUnbounded,
    ):
        return False
    optimal = condition in (
        TerminationCondition.optimal,
        TerminationCondition.locallyOptimal,
        TerminationCondition.globallyOptimal,
    ) or (solver.feasible_is_optimal and condition is TerminationCondition.feasible)
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
    return True


def model_size(model: Any) -> tuple[int, int]:
    """(variables, active constraints) of a Pyomo model, blocks included; an upper bound on
    what a solver sees (it leaves out variables no constraint or objective uses)."""
    import pyomo.environ as pyo

    variables = sum(1 for _ in model.component_data_objects(pyo.Var, descend_into=True))
    constraints = sum(
        1 for _ in model.component_data_objects(pyo.Constraint, active=True, descend_into=True)
    )
    return variables, constraints


def is_nonlinear(model: Any) -> bool:
    """Whether any active constraint or objective of a Pyomo model has non-linear terms."""
    import pyomo.environ as pyo

    for constraint in model.component_data_objects(pyo.Constraint, active=True):
        if constraint.body.polynomial_degree() not in (0, 1):
            return True
    for objective in model.component_data_objects(pyo.Objective, active=True):
        if objective.expr.polynomial_degree() not in (0, 1):
            return True
    return False


def _has_discrete_variables(model: Any) -> bool:
    import pyomo.environ as pyo

    return any(
        not var.fixed and (var.is_integer() or var.is_binary())
        for var in model.component_data_objects(pyo.Var, descend_into=True)
    )


def _failure_message(solver: Solver, model: Any, exc: Exception) -> str:
    if ProblemClass.NLP not in solver.problem_classes and is_nonlinear(model):
        return (
            f"solver '{solver.name}' cannot solve NLP problems (the model has non-linear "
            f"terms); it takes {accepted_classes(solver)}"
        )
    explained = solver.explain_failure(model, exc)
    if explained is not None:
        return explained
    return f"solver '{solver.name}' failed: {type(exc).__name__}: {exc}"
