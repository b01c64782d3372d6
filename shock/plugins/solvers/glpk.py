"""GLPK, the `glpsol` executable (`apt-get install glpk-utils`)."""

from __future__ import annotations

import math
from typing import Any

from shock.api import ProblemClass, PyomoSolver, Register, hookimpl


class GlpkSolver(PyomoSolver):
    def time_limit_options(self, seconds: float) -> dict[str, Any]:
        # glpsol takes whole seconds only.
        return {option: max(1, math.ceil(seconds)) for option in super().time_limit_options(1)}


GLPK = GlpkSolver(
    name="glpk",
    description="GLPK (open source): LP and MILP, the glpsol executable",
    problem_classes=frozenset({ProblemClass.LP, ProblemClass.MILP}),
    pyomo_interface="glpk",
    install_hint="apt-get install glpk-utils",
    executable="glpsol",
    time_limit_option="tmlim",
    mip_gap_option="mipgap",
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(GLPK)
