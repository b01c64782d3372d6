"""COIN-OR CBC, the `cbc` executable (`apt-get install coinor-cbc`)."""

from __future__ import annotations

from typing import Any

from shock.api import ProblemClass, PyomoSolver, Register, hookimpl


class CbcSolver(PyomoSolver):
    def time_limit_options(self, seconds: float) -> dict[str, Any]:
        # Wall clock, like every other solver here (CBC counts CPU time by default).
        return {**super().time_limit_options(seconds), "timeMode": "elapsed"}


CBC = CbcSolver(
    name="cbc",
    description="COIN-OR CBC (open source): LP and MILP, the cbc executable",
    problem_classes=frozenset({ProblemClass.LP, ProblemClass.MILP}),
    pyomo_interface="cbc",
    install_hint="apt-get install coinor-cbc",
    executable="cbc",
    time_limit_option="seconds",
    mip_gap_option="ratioGap",
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(CBC)
