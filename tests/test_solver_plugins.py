"""Solvers are plugins: a third-party solver registers like any other plugin and is used by
`--solver`; the built-in ones import nothing heavy until they solve."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from instances import generated_input

from shock.core.errors import SolverError
from shock.core.hookspecs import Register, hookimpl
from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.solver import ProblemClass, Solver, SolverSpec, available_solvers
from shock.engine.runner import RunOptions, build_request, bundled_trace_path, run


class CountingHighs(Solver):
    """A third party's solver: HiGHS under another name, counting its solves."""

    name = "counting_highs"
    description = "HiGHS, counted"
    problem_classes = frozenset({ProblemClass.LP, ProblemClass.MILP})

    def __init__(self, registry_of_highs: PluginRegistry) -> None:
        self.inner: Solver = registry_of_highs.get("solver", "highs")
        self.solves = 0

    def solve(self, model: Any, spec: SolverSpec) -> Any:
        self.solves += 1
        return self.inner.solve(model, spec)


class SolverPlugin:
    def __init__(self, solver: Solver) -> None:
        self.solver = solver

    @hookimpl
    def register_solvers(self, register: Register) -> None:
        register(self.solver)


def registry_with_counting_solver() -> tuple[PluginRegistry, CountingHighs]:
    solver = CountingHighs(PluginRegistry(load_plugins()))
    return PluginRegistry(load_plugins(extra_plugins=[SolverPlugin(solver)])), solver


def test_a_third_party_solver_runs_a_policy() -> None:
    registry, solver = registry_with_counting_solver()
    assert "counting_highs" in registry.names("solver")
    options = RunOptions(
        policy="max_min_fairness_perf",
        solver="counting_highs",
        trace=str(bundled_trace_path("small_test.trace")),
        cluster="v100=2,p100=2,k80=2",
    )
    result = run(options, registry)
    assert solver.solves > 0
    assert result.solver == "counting_highs"
    assert result.metrics.jobs == 20 and result.unfinished_jobs == 0


def test_a_third_party_solver_reaches_the_same_allocation_as_highs() -> None:
    registry, solver = registry_with_counting_solver()
    problem = generated_input(12, (2, 3, 2), 4, True)
    policy = registry.get("policy", "max_min_fairness_perf").for_run(0)
    mine = SolverSpec(name="counting_highs").resolved(registry)
    assert not mine.uses_fast_path  # only a plugin that is HiGHS takes the direct path
    theirs = policy.allocate(problem, mine)
    reference = policy.allocate(problem, SolverSpec(name="highs"))
    assert solver.solves > 0
    assert theirs.objective == pytest.approx(reference.objective, rel=1e-6)


def test_a_solver_refuses_problem_classes_it_does_not_declare() -> None:
    registry, _ = registry_with_counting_solver()
    spec = SolverSpec(name="counting_highs").resolved(registry)
    with pytest.raises(SolverError, match="cannot solve NLP problems"):
        spec.check(ProblemClass.NLP, "some_policy")
    spec.check(ProblemClass.MILP, "some_policy")


def test_an_unknown_solver_lists_the_installed_ones_third_party_included() -> None:
    registry, _ = registry_with_counting_solver()
    with pytest.raises(SolverError) as error:
        build_request(RunOptions(solver="cplex"), registry)
    message = str(error.value)
    assert "unknown solver 'cplex'" in message
    for name in registry.names("solver"):
        assert name in message
    assert "counting_highs" in message


def test_the_default_solver_takes_the_fast_path() -> None:
    assert SolverSpec().uses_fast_path
    assert not SolverSpec(fast_path=False).uses_fast_path
    assert "highs" in available_solvers()


def test_registering_the_solvers_imports_no_solver_package() -> None:
    # Registration (and asking whether a solver is installed) must stay cheap: no Pyomo, no
    # solver bindings until a model is solved.
    code = (
        "import sys\n"
        "import shock.plugins.solvers.highs as h, shock.plugins.solvers.gurobi as g\n"
        "import shock.plugins.solvers.scip as s, shock.plugins.solvers.ipopt as i\n"
        "import shock.plugins.solvers.cbc as c, shock.plugins.solvers.glpk as k\n"
        "found = []\n"
        "for module in (h, g, s, i, c, k):\n"
        "    module.register_solvers(found.append)\n"
        "for solver in found:\n"
        "    solver.is_absent()\n"
        "heavy = ('pyomo', 'highspy', 'pyscipopt', 'gurobipy', 'cyipopt')\n"
        "print(len(found), sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "6 []"
