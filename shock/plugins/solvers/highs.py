"""HiGHS, the default solver (open source; highspy is a dependency of shock)."""

from __future__ import annotations

from shock.api import ProblemClass, PyomoSolver, Register, hookimpl


class HighsSolver(PyomoSolver):
    def prepare(self) -> None:
        from shock.api import quiet_highs_banner

        quiet_highs_banner()


HIGHS = HighsSolver(
    name="highs",
    description="HiGHS (open source, the default): LP and MILP; LPs by interior point",
    problem_classes=frozenset({ProblemClass.LP, ProblemClass.MILP}),
    pyomo_interface="appsi_highs",
    install_hint="pip install highspy",
    python_module="highspy",
    time_limit_option="time_limit",
    mip_gap_option="mip_rel_gap",
    # An interior solution of a degenerate LP (the centre of the optimal face) is what
    # cvxpy/ECOS return in Gavel; simplex would pick an arbitrary vertex instead.
    default_options={"solver": "ipm", "run_crossover": "choose", "presolve": "off"},
    highspy_fast_path=True,
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(HIGHS)
