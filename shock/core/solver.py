"""The run-time solver choice (`--solver`) and the solver plugin type.

Policies state their problems once (in matrix form, `shock.lp.matrix_lp`); the optimisation
layer hands them to highspy directly when the chosen solver plugin declares it is HiGHS, and
to any other solver plugin as a Pyomo model. Which solvers exist is up to the plugins of kind
"solver" (`register_solvers`). Solving, status checks, time limits and fallbacks live in the
optimisation layer, not in each policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from shock.core.errors import SolverError

if TYPE_CHECKING:
    from shock.core.plugins import PluginRegistry


class ProblemClass(Enum):
    """The kind of optimisation problem a policy produces (decides which solvers fit)."""

    HEURISTIC = "heuristic"
    LP = "LP"
    MILP = "MILP"
    NLP = "NLP"


DEFAULT_SOLVER = "highs"


class Solver:
    """A solver plugin: one solver, driven through Pyomo.

    Register an instance with `register_solvers`. Only `solve` must be written; the
    other members have defaults. `shock.lp.pyomo_solver.PyomoSolver` implements them all
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
