"""The run-time solver choice (`--solver`), the solver plugin type, and solving a Pyomo model.

Policies write Pyomo models (readable, any solver); which solvers exist is up to the plugins
of kind "solver" (`register_solvers`). Solving, status checks, time limits and fallbacks live
here, not in each policy. LPs re-solved every round may also go to highspy directly
(`shock.core.matrix_lp`) when the chosen solver plugin declares it is HiGHS.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from shock.core.errors import SolverError
from shock.core.policy import ProblemClass

if TYPE_CHECKING:
    from shock.core.plugins import PluginRegistry

DEFAULT_SOLVER = "highs"


class Solver:
    """A solver plugin: one solver, driven through Pyomo.

    Register an instance with `register_solvers`. Only `solve` must be written; the
    other members have defaults. `shock.core.pyomo_solver.PyomoSolver` implements them all
    for a solver with a Pyomo interface.
    """

    name: str = ""
    description: str = ""
    # The problem classes it takes (LP, MILP, NLP); policies of other classes are refused.
    problem_classes: frozenset[ProblemClass] = frozenset({ProblemClass.LP})
    # True only for a plugin that *is* HiGHS: policies may then solve their matrix-form LPs
    # and MILPs with shock's direct highspy path instead of a Pyomo model.
    highspy_fast_path: bool = False
    # A 'feasible' termination counts as optimal (Ipopt's acceptable tolerance level).
    feasible_is_optimal: bool = False

    def unavailable_reason(self) -> str | None:
        """Why it cannot run here, with how to fix it; None when it can. Cheap to call: no
        heavy imports, no solve."""
        return None

    def is_absent(self) -> bool:
        """Whether it is not installed at all (rather than installed but unable to run)."""
        return False

    def options(self, spec: SolverSpec) -> dict[str, Any]:
        """The options a solve hands the solver, under the solver's own option names."""
        return dict(spec.options)

    def solve(self, model: Any, spec: SolverSpec) -> Any:
        """Solve the Pyomo model without loading the solution; return Pyomo's results
        object (`solver.termination_condition`, `solver.status`, `solution`)."""
        raise NotImplementedError(f"solver plugin '{self.name}' does not implement solve")

    def explain_failure(self, model: Any, exc: Exception) -> str | None:
        """A better message than the exception's for a failed solve, or None."""
        return None


@dataclass(frozen=True, slots=True)
class SolverSpec:
    """The run-time solver choice (`--solver`)."""

    name: str = DEFAULT_SOLVER
    time_limit_s: float | None = None
    mip_gap: float | None = None
    # Use a policy's direct matrix path for HiGHS where it has one (same problem, less overhead).
    fast_path: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    # The plugin, when the spec was resolved from a registry (`resolved`); otherwise the
    # installed plugin of that name is looked up when needed.
    plugin: Solver | None = field(default=None, compare=False, repr=False)

    def solver(self) -> Solver:
        """The solver plugin this spec names; SolverError when none is installed."""
        return self.plugin if self.plugin is not None else find_solver(self.name)

    def resolved(self, registry: PluginRegistry) -> SolverSpec:
        """This spec with its plugin looked up in `registry`."""
        return replace(self, plugin=find_solver(self.name, registry))

    def check(self, problem_class: ProblemClass, policy: str) -> None:
        if problem_class is ProblemClass.HEURISTIC:
            return
        solver = self.solver()
        if problem_class not in solver.problem_classes:
            raise SolverError(
                f"solver '{self.name}' cannot solve {problem_class.value} problems "
                f"(policy '{policy}'); it takes {accepted_classes(solver)}"
            )
        reason = solver.unavailable_reason()
        if reason is not None:
            state = "is not installed" if solver.is_absent() else "cannot run here"
            raise SolverError(f"solver '{self.name}' {state}: {reason}")

    def takes(self, problem_class: ProblemClass) -> bool:
        """Whether the solver takes problems of this class."""
        return problem_class in self.solver().problem_classes

    @property
    def uses_fast_path(self) -> bool:
        return self.fast_path and self.solver().highspy_fast_path


def find_solver(name: str, registry: PluginRegistry | None = None) -> Solver:
    """The installed solver plugin `name`; SolverError listing the installed ones if none."""
    if registry is None:
        from shock.core.plugins import default_registry

        registry = default_registry()
    if name not in registry.names("solver"):
        installed = ", ".join(registry.names("solver")) or "(none)"
        raise SolverError(
            f"unknown solver '{name}'; installed solvers: {installed} (`shock plugins` lists "
            "them; a solver plugin package adds more)"
        )
    solver: Solver = registry.get("solver", name)
    return solver


def accepted_classes(solver: Solver) -> str:
    return "/".join(sorted(c.value for c in solver.problem_classes))


def unavailable_reason(name: str, registry: PluginRegistry | None = None) -> str | None:
    """Why solver `name` cannot run here, with how to fix it; None when it can."""
    try:
        solver = find_solver(name, registry)
    except SolverError as error:
        return str(error)
    return solver.unavailable_reason()


def is_installed(name: str, registry: PluginRegistry | None = None) -> bool:
    """Whether solver `name` is registered and can run here."""
    return unavailable_reason(name, registry) is None


def available_solvers(registry: PluginRegistry | None = None) -> list[str]:
    """The registered solvers that can run here."""
    if registry is None:
        from shock.core.plugins import default_registry

        registry = default_registry()
    return [name for name in registry.names("solver") if is_installed(name, registry)]


def solver_options(spec: SolverSpec) -> dict[str, Any]:
    """The options `solve_pyomo` hands the solver, under its own option names."""
    return spec.solver().options(spec)


def solve_pyomo(model: Any, spec: SolverSpec) -> None:
    """Solve a Pyomo model in place; raise SolverError unless it is optimal (or, for a model
    with integer variables, a feasible incumbent at a time or iteration limit)."""
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
