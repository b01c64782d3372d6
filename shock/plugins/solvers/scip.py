"""SCIP through Pyomo's pyscipopt interface (`pip install 'shock[scip]'`)."""

from __future__ import annotations

from shock.api import ProblemClass, PyomoSolver, Register, hookimpl

SCIP = PyomoSolver(
    name="scip",
    description="SCIP (open source): LP, MILP and NLP, through pyscipopt",
    problem_classes=frozenset({ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP}),
    pyomo_interface="scip_direct",
    install_hint="pip install 'shock[scip]' (pyscipopt)",
    python_module="pyscipopt",
    time_limit_option="limits/time",
    mip_gap_option="limits/gap",
    # Within 1e-9 of every bound, as HiGHS' answers are and the engine's allocation check
    # expects (its default, 1e-6, lets a gang of 4 exceed a capacity by 4e-6).
    default_options={"numerics/feastol": 1e-9},
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(SCIP)
