"""Gurobi through gurobipy (`pip install 'shock[gurobi]'`); its pip licence is size-limited."""

from __future__ import annotations

from functools import cache
from typing import Any

from shock.api import ProblemClass, PyomoSolver, Register, hookimpl, is_nonlinear, model_size

# Gurobi's pip licence (SIZE_LIMIT_EXCEEDED, error 10010 in gurobipy).
GUROBI_PIP_LIMITS = {"variables": 2000, "constraints": 2000, "nonlinear_variables": 200}


class GurobiSolver(PyomoSolver):
    def runtime_problem(self) -> str | None:
        return _licence_problem()

    def explain_failure(self, model: Any, exc: Exception) -> str | None:
        if getattr(exc, "errno", None) != 10010 and "size-limited" not in str(exc).lower():
            return None
        excess = pip_licence_excess(model) or "a model beyond the licence's size limits"
        return (
            f"solver 'gurobi' failed: {exc}. This model has {excess}. Use a full Gurobi "
            "licence or another solver (e.g. --solver highs)"
        )


@cache
def _licence_problem() -> str | None:
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


def pip_licence_excess(model: Any) -> str | None:
    """How a Pyomo model exceeds gurobipy's bundled (pip) licence, or None when it fits."""
    variables, constraints = model_size(model)
    limits = GUROBI_PIP_LIMITS
    if variables > limits["variables"] or constraints > limits["constraints"]:
        return (
            f"{variables} variables and {constraints} constraints (gurobipy's pip licence "
            f"takes at most {limits['variables']} variables and {limits['constraints']} "
            "constraints)"
        )
    if variables > limits["nonlinear_variables"] and is_nonlinear(model):
        return (
            f"{variables} variables and non-linear terms (gurobipy's pip licence takes at "
            f"most {limits['nonlinear_variables']} variables when any term is non-linear)"
        )
    return None


GUROBI = GurobiSolver(
    name="gurobi",
    description="Gurobi (commercial; pip's licence is size-limited): LP, MILP and NLP",
    problem_classes=frozenset({ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP}),
    pyomo_interface="gurobi_direct",
    install_hint=(
        "pip install 'shock[gurobi]' (gurobipy; its bundled licence takes at most 2000 "
        "variables and 2000 constraints, a full Gurobi licence lifts the limit)"
    ),
    python_module="gurobipy",
    time_limit_option="TimeLimit",
    mip_gap_option="MIPGap",
    # Within 1e-9 of every bound, as HiGHS' answers are and the engine's allocation check
    # expects (its default, 1e-6, lets a gang of 4 exceed a capacity by 4e-6).
    default_options={"FeasibilityTol": 1e-9},
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(GUROBI)
