"""Ipopt through Pyomo's PyNumero interface to cyipopt (`pip install 'shock[ipopt]'`)."""

from __future__ import annotations

from functools import cache

from shock.api import ProblemClass, PyomoSolver, Register, hookimpl

PYNUMERO_BUILD = (
    "apt-get install cmake g++ libamplsolver-dev && python -m pyomo.contrib.pynumero.build "
    "-DASL_INCLUDE_DIR=/usr/include/ampl-netlib-solvers "
    "-DASL_LIBRARY=/usr/lib/x86_64-linux-gnu/libamplsolver.so -DBUILD_AMPLASL_IF_NEEDED=OFF"
)
INSTALL_HINT = (
    "pip install 'shock[ipopt]' (cyipopt-wheels bundles Ipopt), then build Pyomo's "
    f"PyNumero ASL library: {PYNUMERO_BUILD}"
)


class IpoptSolver(PyomoSolver):
    def runtime_problem(self) -> str | None:
        return pynumero_asl_problem()


@cache
def pynumero_asl_problem() -> str | None:
    try:
        from pyomo.contrib.pynumero.asl import AmplInterface

        available = bool(AmplInterface.available())
    except Exception as exc:  # a missing numpy/scipy/packaging, or a broken library
        return f"Pyomo's PyNumero interface cannot be loaded ({exc}); {INSTALL_HINT}"
    if not available:
        return (
            "cyipopt is installed, but Pyomo's cyipopt interface also needs the PyNumero ASL "
            f"library (pynumero_ASL), which is not built; {PYNUMERO_BUILD}"
        )
    return None


IPOPT = IpoptSolver(
    name="ipopt",
    description="Ipopt (open source): LP and NLP (no integer variables), through cyipopt",
    problem_classes=frozenset({ProblemClass.LP, ProblemClass.NLP}),
    pyomo_interface="cyipopt",
    install_hint=INSTALL_HINT,
    python_module="cyipopt",
    # Pyomo's cyipopt interface cannot map Ipopt's max_wall_time stop (KeyError), only this.
    time_limit_option="max_cpu_time",
    # Ipopt's defaults (tol 1e-8, bounds relaxed by 1e-8) leave up to ~2e-6 relative error
    # on the time-fraction LPs; these agree with HiGHS to ~1e-7.
    default_options={"tol": 1e-10, "bound_relax_factor": 1e-10},
    # A point that reaches only Ipopt's acceptable tolerances (1e-6) is still accepted.
    feasible_is_optimal=True,
    options_per_solve=True,
)


@hookimpl
def register_solvers(register: Register) -> None:
    register(IPOPT)
