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
from shock.core.policy import ProblemClass
from shock.core.solver import Solver, SolverSpec


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
