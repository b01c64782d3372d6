"""The solver matrix: every optimisation policy reaches HiGHS' optimum with every solver.

Policies are discovered from the plugin registry, so a policy added later is covered without
editing this file: each registered LP/MILP policy (HEURISTIC ones solve nothing) is solved
through Pyomo (`SolverSpec(name=..., fast_path=False)`) by every solver that takes its problem
class, on small instances (at most 30 jobs x 3 worker types, inside gurobipy's pip licence),
and must return HiGHS' optimal objective (relative 1e-6). Solvers that are not installed are
skipped with what to install. `SHOCK_TEST_SOLVER=<name>` (the tox `solver-*` environments)
restricts the matrix to that solver and makes its absence a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyomo.environ as pyo
import pytest
from instances import generated_input

import shock.lp.pyomo_solver as pyomo_solver_module
from shock.core.errors import SolverError
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.solver import (
    ProblemClass,
    SolverSpec,
    available_solvers,
    solver_options,
    unavailable_reason,
)
from shock.lp.pyomo_solver import PyomoSolver, solve_pyomo
from shock.plugins.solvers import ipopt as ipopt_plugin
from shock.plugins.solvers.gurobi import pip_licence_excess as gurobi_pip_licence_excess

pytestmark = pytest.mark.solvers

# Which problem classes each registered solver plugin takes.
SOLVER_CLASSES = {
    name: default_registry().get("solver", name).problem_classes
    for name in default_registry().names("solver")
}
REQUESTED = os.environ.get("SHOCK_TEST_SOLVER", "").strip() or None
if REQUESTED is not None and REQUESTED not in SOLVER_CLASSES:
    raise ValueError(
        f"SHOCK_TEST_SOLVER={REQUESTED!r} is not a solver; valid: {', '.join(SOLVER_CLASSES)}"
    )
SOLVERS = [REQUESTED] if REQUESTED is not None else list(SOLVER_CLASSES)
COMPARED = (ProblemClass.LP, ProblemClass.MILP)  # HiGHS gives the reference optimum
REL, ABS = 1e-6, 1e-7  # abs only matters at a zero optimum
# MILPs are solved to a 1e-9 relative gap; HiGHS still stops at an absolute gap of 1e-6.
MIP_GAP, MIP_ABS = 1e-9, 2e-6


def require(solver: str) -> None:
    """Skip (or, for the solver SHOCK_TEST_SOLVER asks for, fail) when `solver` is absent."""
    reason = unavailable_reason(solver)
    if reason is None:
        return
    message = f"solver '{solver}' is not usable here: {reason}"
    if solver == REQUESTED:
        pytest.fail(f"SHOCK_TEST_SOLVER={solver}, but {message}")
    pytest.skip(message)


def optimisation_policies() -> list[Policy]:
    policies = default_registry().all("policy")
    return [p for p in policies if p.problem_class is not ProblemClass.HEURISTIC]


def matrix_cases() -> Iterator[Any]:
    for solver in SOLVERS:
        for policy in optimisation_policies():
            kind = policy.problem_class
            if kind in COMPARED and kind in SOLVER_CLASSES[solver]:
                yield pytest.param(solver, policy.name, id=f"{solver}-{policy.name}")


# --------------------------------------------------------------------------- instances


@dataclass(frozen=True)
class Instance:
    name: str
    num_jobs: int
    capacity: tuple[int, int, int]
    seed: int
    multi_gpu: bool


INSTANCES = (
    Instance("6 single-GPU jobs, 2+2+2 GPUs", 6, (2, 2, 2), 0, False),
    Instance("15 jobs with gangs, 4+4+4 GPUs", 15, (4, 4, 4), 1, True),
    Instance("30 jobs with gangs, 8+4+8 GPUs", 30, (8, 4, 8), 2, True),
    Instance("30 single-GPU jobs, scarce 1+2+1 GPUs", 30, (1, 2, 1), 3, False),
)


@cache
def policy_input(instance: Instance) -> PolicyInput:
    """Generated jobs (Gavel's workload model, the bundled throughputs) part-way through,
    with SLOs and prices, so policies that use any of them have something to work with."""
    return generated_input(instance.num_jobs, instance.capacity, instance.seed, instance.multi_gpu)


# --------------------------------------------------------------------------- recording


class SolveRecorder:
    """Wraps `solve_pyomo` wherever a loaded module holds it, so the test sees every Pyomo
    model a policy solves: its size (checked against Gurobi's pip licence before solving)
    and its optimal objective."""

    def __init__(self) -> None:
        self.objectives: list[float] = []
        # How each model exceeds gurobipy's pip licence (None where it fits).
        self.licence_excess: list[str | None] = []

    def __call__(self, model: Any, spec: SolverSpec, infeasible_ok: bool = False) -> bool:
        excess = gurobi_pip_licence_excess(model)
        self.licence_excess.append(excess)
        if spec.name == "gurobi" and excess is not None:
            pytest.skip(f"model too large for gurobipy's pip licence: it has {excess}")
        if not solve_pyomo(model, spec, infeasible_ok):
            return False  # a bisection's infeasible step: no objective
        objective = next(model.component_data_objects(pyo.Objective, active=True))
        self.objectives.append(float(pyo.value(objective)))
        return True


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> SolveRecorder:
    recording = SolveRecorder()
    # Policies import solve_pyomo by name; patch every module that did (shock's and any
    # third-party policy package loaded through the registry).
    packages = {"shock"} | {type(p).__module__.split(".")[0] for p in optimisation_policies()}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in packages:
            continue
        if vars(module).get("solve_pyomo") is solve_pyomo:
            monkeypatch.setattr(module, "solve_pyomo", recording)
    return recording


def allocate(policy_name: str, problem: PolicyInput, spec: SolverSpec) -> Allocation:
    return default_registry().get("policy", policy_name).for_run(0).allocate(problem, spec)


# --------------------------------------------------------------------------- the matrix


# (policy, instance) -> HiGHS' objective (fast path where the policy has one) and, for a
# policy that reports none, the objective of each model it solves with HiGHS through Pyomo.
_REFERENCES: dict[tuple[str, str], tuple[float | None, list[float]]] = {}


def spec_for(policy_name: str, solver: str, fast_path: bool = False) -> SolverSpec:
    milp = default_registry().get("policy", policy_name).problem_class is ProblemClass.MILP
    return SolverSpec(name=solver, fast_path=fast_path, mip_gap=MIP_GAP if milp else None)


def highs_reference(
    policy_name: str, instance: Instance, recorder: SolveRecorder
) -> tuple[float | None, list[float]]:
    key = (policy_name, instance.name)
    if key not in _REFERENCES:
        problem = policy_input(instance)
        objective = allocate(policy_name, problem, spec_for(policy_name, "highs", True)).objective
        solves: list[float] = []
        if objective is None:
            recorder.objectives.clear()
            allocate(policy_name, problem, spec_for(policy_name, "highs"))
            solves = list(recorder.objectives)
        _REFERENCES[key] = (objective, solves)
    return _REFERENCES[key]


@pytest.mark.parametrize(("solver", "policy_name"), list(matrix_cases()))
def test_every_solver_reaches_the_highs_optimum(
    solver: str, policy_name: str, recorder: SolveRecorder
) -> None:
    # The `highs` row compares HiGHS through Pyomo with the policy's direct HiGHS path.
    require(solver)
    spec = spec_for(policy_name, solver)
    absolute = ABS if spec.mip_gap is None else MIP_ABS
    pyomo_solves = 0
    for instance in INSTANCES:
        objective, reference_solves = highs_reference(policy_name, instance, recorder)
        recorder.objectives.clear()
        recorder.licence_excess.clear()
        result = allocate(policy_name, policy_input(instance), spec)
        solves = list(recorder.objectives)
        pyomo_solves += len(solves)

        where = f"policy '{policy_name}', solver '{solver}', instance '{instance.name}'"
        # The gurobi row skips a model beyond gurobipy's pip licence; every instance must
        # fit it, or that row would silently compare less than the others.
        too_large = [excess for excess in recorder.licence_excess if excess is not None]
        assert not too_large, f"{where}: a model beyond gurobipy's pip licence: {too_large[0]}"
        # Keys may differ (packed policies pair jobs by the solution); the optimum may not.
        assert np.all(np.isfinite(result.fractions)), where
        if objective is not None:
            assert result.objective is not None, f"{where}: no objective reported"
            assert result.objective == pytest.approx(objective, rel=REL, abs=absolute), (
                f"{where}: objective {result.objective} vs HiGHS {objective}"
            )
        else:
            assert solves == pytest.approx(reference_solves, rel=REL, abs=absolute), (
                f"{where}: model objectives {solves} vs HiGHS {reference_solves}"
            )
    assert pyomo_solves > 0, (
        f"policy '{policy_name}' solved no Pyomo model through shock.core.solver.solve_pyomo "
        f"with SolverSpec(name='{solver}', fast_path=False) on any instance: `--solver "
        f"{solver}` would be ignored"
    )


# --------------------------------------------------------------------------- refusals

REFUSED = [
    pytest.param(solver, kind, id=f"{solver}-{kind.value}")
    for solver in SOLVERS
    for kind in (ProblemClass.LP, ProblemClass.MILP, ProblemClass.NLP)
    if kind not in SOLVER_CLASSES[solver]
] or [
    pytest.param(
        REQUESTED,
        ProblemClass.NLP,
        id=f"{REQUESTED}-none",
        marks=pytest.mark.skip(reason=f"solver '{REQUESTED}' takes LP, MILP and NLP"),
    )
]


@pytest.mark.parametrize(("solver", "problem_class"), REFUSED)
def test_a_solver_refuses_a_problem_class_it_cannot_take(
    solver: str, problem_class: ProblemClass
) -> None:
    with pytest.raises(SolverError) as error:
        SolverSpec(name=solver).check(problem_class, "some_policy")
    message = str(error.value)
    accepted = "/".join(sorted(c.value for c in SOLVER_CLASSES[solver]))
    assert f"solver '{solver}' cannot solve {problem_class.value} problems" in message
    assert "'some_policy'" in message and accepted in message


def test_registered_policies_are_refused_by_solvers_that_cannot_take_them() -> None:
    for solver in SOLVERS:
        for policy in optimisation_policies():
            if policy.problem_class in SOLVER_CLASSES[solver]:
                continue
            with pytest.raises(SolverError, match=f"'{policy.name}'"):
                SolverSpec(name=solver).check(policy.problem_class, policy.name)


def milp_model() -> Any:
    model = pyo.ConcreteModel()
    model.x = pyo.Var([0, 1], domain=pyo.NonNegativeIntegers)
    model.budget = pyo.Constraint(expr=2 * model.x[0] + 3 * model.x[1] <= 7.5)
    model.objective = pyo.Objective(expr=model.x[0] + 1.4 * model.x[1], sense=pyo.maximize)
    return model


def nlp_model() -> Any:
    model = pyo.ConcreteModel()
    model.x = pyo.Var([0, 1], bounds=(0.1, 4.0), initialize=1.0)
    model.product = pyo.Constraint(expr=model.x[0] * model.x[1] >= 1.0)
    model.objective = pyo.Objective(expr=model.x[0] + model.x[1])
    return model


@pytest.mark.parametrize("solver", SOLVERS)
def test_solving_a_model_of_a_class_the_solver_cannot_take_is_a_solver_error(
    solver: str,
) -> None:
    require(solver)
    refused = {ProblemClass.MILP: milp_model, ProblemClass.NLP: nlp_model}
    cases = {k: build for k, build in refused.items() if k not in SOLVER_CLASSES[solver]}
    if not cases:
        pytest.skip(f"solver '{solver}' takes LP, MILP and NLP")
    for kind, build in cases.items():
        with pytest.raises(SolverError, match=f"cannot solve {kind.value} problems"):
            solve_pyomo(build(), SolverSpec(name=solver))


@pytest.mark.parametrize("solver", SOLVERS)
def test_time_limit_and_gap_options_are_accepted(solver: str) -> None:
    # A wrong option name is an error in most back-ends; this catches it for each solver.
    require(solver)
    spec = SolverSpec(name=solver, time_limit_s=30.0, mip_gap=1e-6)
    if ProblemClass.MILP in SOLVER_CLASSES[solver]:
        model = milp_model()
        solve_pyomo(model, spec)
        assert pyo.value(model.objective) == pytest.approx(3.4, rel=1e-6)
    else:
        model = nlp_model()
        solve_pyomo(model, spec)
        assert pyo.value(model.objective) == pytest.approx(2.0, rel=1e-6)


def test_solver_option_names() -> None:
    def options(name: str) -> dict[str, Any]:
        return solver_options(SolverSpec(name=name, time_limit_s=2.5, mip_gap=0.01))

    assert options("highs") == {
        "solver": "ipm",
        "run_crossover": "choose",
        "presolve": "off",
        "time_limit": 2.5,
        "mip_rel_gap": 0.01,
    }
    # Feasible within 1e-9, as HiGHS' answers are and the engine's allocation check expects.
    assert options("gurobi") == {"FeasibilityTol": 1e-9, "TimeLimit": 2.5, "MIPGap": 0.01}
    assert options("scip") == {"numerics/feastol": 1e-9, "limits/time": 2.5, "limits/gap": 0.01}
    # No integer variables, no gap; tighter than Ipopt's defaults (agrees with HiGHS).
    assert options("ipopt") == {"tol": 1e-10, "bound_relax_factor": 1e-10, "max_cpu_time": 2.5}
    assert options("cbc") == {"seconds": 2.5, "timeMode": "elapsed", "ratioGap": 0.01}
    assert options("glpk") == {"tmlim": 3, "mipgap": 0.01}  # whole seconds
    spec = SolverSpec(name="highs", options={"presolve": "on", "threads": 1})
    assert solver_options(spec)["presolve"] == "on" and solver_options(spec)["threads"] == 1


def test_models_beyond_gurobis_pip_licence_are_recognised() -> None:
    def model(n: int, nonlinear: bool) -> Any:
        m = pyo.ConcreteModel()
        m.x = pyo.Var(range(n), bounds=(0.0, 1.0))
        m.total = pyo.Constraint(expr=sum(m.x[i] for i in range(n)) <= 3.0)
        if nonlinear:
            m.product = pyo.Constraint(expr=m.x[0] * m.x[1] <= 0.5)
        m.objective = pyo.Objective(expr=sum(m.x[i] for i in range(n)), sense=pyo.maximize)
        return m

    assert gurobi_pip_licence_excess(model(2000, False)) is None
    assert gurobi_pip_licence_excess(model(200, True)) is None
    assert "2001 variables" in (gurobi_pip_licence_excess(model(2001, False)) or "")
    excess = gurobi_pip_licence_excess(model(201, True)) or ""
    assert "201 variables and non-linear terms" in excess and "at most 200" in excess


def test_gurobi_beyond_its_pip_licence_is_a_clear_solver_error() -> None:
    if "gurobi" not in SOLVERS:
        pytest.skip(f"a gurobi test; SHOCK_TEST_SOLVER={REQUESTED} selects another solver")
    require("gurobi")
    model = pyo.ConcreteModel()
    model.x = pyo.Var(range(2100), bounds=(0.0, 1.0))
    model.total = pyo.Constraint(expr=sum(model.x[i] for i in range(2100)) <= 3.0)
    model.objective = pyo.Objective(expr=sum(model.x[i] for i in range(2100)), sense=pyo.maximize)
    try:
        solve_pyomo(model, SolverSpec(name="gurobi"))
    except SolverError as error:
        message = str(error)
        assert "at most 2000 variables" in message and "2100 variables" in message
        assert "another solver" in message
    else:  # a full licence
        assert pyo.value(model.objective) == pytest.approx(3.0)


# --------------------------------------------------------------------------- not installed


def hide(monkeypatch: pytest.MonkeyPatch, solver: str) -> None:
    """Make `solver` look uninstalled: its Python module or executable is not found."""
    plugin = default_registry().get("solver", solver)
    assert isinstance(plugin, PyomoSolver)
    module, executable = plugin.python_module, plugin.executable
    real_find_spec: Callable[..., Any] = importlib.util.find_spec
    real_which: Callable[..., Any] = shutil.which

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == module else real_find_spec(name, *args, **kwargs)

    def which(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == executable else real_which(name, *args, **kwargs)

    monkeypatch.setattr(pyomo_solver_module.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(pyomo_solver_module.shutil, "which", which)


INSTALL = {
    "highs": "pip install highspy",
    "gurobi": "pip install 'shock[gurobi]'",
    "scip": "pip install 'shock[scip]'",
    "ipopt": "pip install 'shock[ipopt]'",
    "cbc": "apt-get install coinor-cbc",
    "glpk": "apt-get install glpk-utils",
}


@pytest.mark.parametrize("solver", SOLVERS)
def test_an_uninstalled_solver_is_a_solver_error_naming_how_to_install(
    solver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide(monkeypatch, solver)
    assert solver not in available_solvers()
    with pytest.raises(SolverError) as error:
        SolverSpec(name=solver).check(ProblemClass.LP, "max_min_fairness")
    message = str(error.value)
    assert f"solver '{solver}' is not installed" in message and INSTALL[solver] in message
    # Used anyway (a policy called directly): the same advice, before any modelling error.
    lp_policies = [p for p in optimisation_policies() if p.problem_class is ProblemClass.LP]
    problem = policy_input(INSTANCES[0])
    for policy in lp_policies[:1]:
        with pytest.raises(SolverError, match="not available") as error:
            policy.for_run(0).allocate(problem, SolverSpec(name=solver, fast_path=False))
        assert INSTALL[solver] in str(error.value)


def test_ipopt_without_pynumero_asl_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    if "ipopt" not in SOLVERS:
        pytest.skip(f"an ipopt test; SHOCK_TEST_SOLVER={REQUESTED} selects another solver")
    if importlib.util.find_spec("cyipopt") is None:
        pytest.skip("cyipopt is not installed: pip install 'shock[ipopt]'")
    from pyomo.contrib.pynumero.asl import AmplInterface

    monkeypatch.setattr(AmplInterface, "available", classmethod(lambda cls: False))
    ipopt_plugin.pynumero_asl_problem.cache_clear()
    try:
        reason = unavailable_reason("ipopt")
        with pytest.raises(SolverError, match="not available") as error:
            solve_pyomo(nlp_model(), SolverSpec(name="ipopt"))
    finally:
        monkeypatch.undo()
        ipopt_plugin.pynumero_asl_problem.cache_clear()
    assert reason is not None and "pynumero_ASL" in reason
    assert "pyomo.contrib.pynumero.build" in str(error.value)
