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
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(SCIP)
