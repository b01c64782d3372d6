"""The third-party plugin example (examples/shock-example-policy) and in-process plugins.

The CLI tests install the example package into this interpreter (editable, once,
`example_packages.install_example`) so that the `shock` entry point it declares is found
exactly as a user's `pip install` would make it found. The policy's unit tests import the
module from the source tree and need no install.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from example_packages import EXAMPLES, example_module, install_example
from shock_cli import run_shock_wide

from shock.core.errors import UnknownPluginError
from shock.core.hookspecs import Register, hookimpl
from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.solver import ProblemClass, SolverSpec

EXAMPLE_DIR = EXAMPLES / "shock-example-policy"
DISTRIBUTION = "shock-example-policy"
MODULE = "shock_example_policy"
POLICY = "example_sjf"


@pytest.fixture(scope="module")
def example_installed() -> None:
    """The example package is installed in this interpreter (installs it if it is not)."""
    install_example(EXAMPLE_DIR.name, DISTRIBUTION, MODULE)


_shock = run_shock_wide


# The installed example through the CLI.


@pytest.mark.usefixtures("example_installed")
def test_shock_plugins_lists_example_with_its_package() -> None:
    result = _shock("plugins")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if f" {POLICY} " in line]
    assert len(rows) == 1, result.stdout
    cells = [cell.strip() for cell in re.split(r"[│|]", rows[0]) if cell.strip()]
    assert cells[:3] == ["policy", POLICY, DISTRIBUTION], rows[0]
    assert "broken" not in result.stdout, result.stdout


@pytest.mark.usefixtures("example_installed")
def test_shock_run_with_example_policy(tmp_path: Path) -> None:
    result = _shock("run", "--policy", POLICY, "--quiet", "--json", "out.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["policy"] == POLICY
    assert document["metrics"]["jobs"] == 96
    assert document["unfinished_jobs"] == 0


# The policy's allocation, in-process.


@pytest.fixture(scope="module")
def sjf_module() -> Iterator[ModuleType]:
    """`shock_example_policy.sjf`, installed or straight from the source tree."""
    with example_module(MODULE, EXAMPLE_DIR, "sjf") as module:
        yield module


@pytest.fixture
def sjf(sjf_module: ModuleType) -> Policy:
    """The policy instance, obtained through the module's registration hook."""
    registered: list[Policy] = []
    sjf_module.register_policies(register=registered.append)
    assert len(registered) == 1
    return registered[0]


WORKER_TYPES = ("v100", "p100", "k80")


def _problem(
    capacity: list[int], jobs: list[tuple[int, int, int, float, list[float]]]
) -> PolicyInput:
    """jobs: (job id, scale factor, total steps, steps done, steps/s per worker type)."""
    return PolicyInput(
        now=0.0,
        jobs=tuple(
            PolicyJob(
                job_id=job_id,
                job_type="ResNet-18 (batch size 64)",
                scale_factor=scale_factor,
                priority_weight=1.0,
                arrival_time=0.0,
                total_steps=total,
                steps_done=done,
            )
            for job_id, scale_factor, total, done, _ in jobs
        ),
        worker_types=WORKER_TYPES[: len(capacity)],
        capacity=np.array(capacity),
        throughputs=np.array([rates for *_, rates in jobs], dtype=float).reshape(
            len(jobs), len(capacity)
        ),
    )


def _check_feasible(problem: PolicyInput, allocation: Allocation) -> None:
    assert allocation.keys == tuple(job.job_id for job in problem.jobs)
    assert allocation.worker_types == problem.worker_types
    fractions = allocation.fractions
    assert fractions.shape == (len(problem.jobs), len(problem.worker_types))
    assert set(np.unique(fractions)) <= {0.0, 1.0}
    assert (fractions.sum(axis=1) <= 1.0).all()  # each row: at most one whole worker type
    used = problem.scale_factors @ fractions
    assert (used <= problem.capacity).all(), (used, problem.capacity)
    assert (problem.throughputs[fractions > 0] > 0).all()  # never on a type it cannot run on


def _placed(allocation: Allocation) -> dict[int, str | None]:
    placed: dict[int, str | None] = {}
    for key, row in zip(allocation.keys, allocation.fractions, strict=True):
        assert isinstance(key, int)
        columns = np.flatnonzero(row)
        placed[key] = allocation.worker_types[columns[0]] if columns.size else None
    return placed


def test_example_policy_contract(sjf: Policy) -> None:
    assert sjf.name == POLICY
    assert sjf.description
    assert sjf.problem_class is ProblemClass.HEURISTIC
    assert sjf.backfill is False
    assert sjf.for_run(7) is sjf  # stateless: one instance serves every run


def test_example_policy_allocation(sjf: Policy) -> None:
    # Remaining isolated time = (total - done) / best rate; expected order:
    # 4 (8 s, needs 8 GPUs: fits nowhere, skipped), 1 (10 s), 3 (200 s), 2 (300 s),
    # 0 (1000 s), 6 (1000 s, after 0 on the tie), 5 (no throughput anywhere).
    problem = _problem(
        [2, 4, 4],
        [
            (0, 1, 10_000, 0, [10, 5, 2]),
            (1, 1, 1_000, 900, [10, 5, 2]),
            (2, 2, 3_000, 0, [10, 4, 1]),
            (3, 4, 400, 0, [2, 2, 1]),
            (4, 8, 80, 0, [10, 10, 10]),
            (5, 1, 100, 0, [0, 0, 0]),
            (6, 1, 5_000, 0, [5, 5, 1]),
        ],
    )
    allocation = sjf.allocate(problem, SolverSpec())
    _check_feasible(problem, allocation)
    assert _placed(allocation) == {
        0: "v100",  # the last V100 GPU; job 6 has the same remaining time but a larger id
        1: "v100",  # the shortest job that fits gets its fastest type
        2: "k80",  # too big for the one free V100, P100s taken by job 3
        3: "p100",  # V100 does not fit 4 GPUs
        4: None,  # fits nowhere: skipped, and shorter-to-place jobs go past it
        5: None,
        6: "k80",
    }


def test_example_policy_shortest_job_gets_fastest_type(sjf: Policy) -> None:
    problem = _problem(
        [1, 1],
        [(10, 1, 1_000, 0, [4, 2]), (11, 1, 1_000, 800, [4, 2]), (12, 1, 10, 0, [4, 2])],
    )
    allocation = sjf.allocate(problem, SolverSpec())
    _check_feasible(problem, allocation)
    # Job 12 (2.5 s left) beats job 11 (50 s, partly done) which beats job 10 (250 s).
    assert _placed(allocation) == {10: None, 11: "p100", 12: "v100"}


def test_example_policy_empty_problem(sjf: Policy) -> None:
    allocation = sjf.allocate(_problem([4, 4, 4], []), SolverSpec())
    assert allocation.keys == ()
    assert allocation.fractions.shape == (0, 3)


@pytest.mark.parametrize("seed", range(20))
def test_example_policy_random_problems_are_feasible(sjf: Policy, seed: int) -> None:
    rng = np.random.default_rng(seed)
    capacity = rng.integers(0, 9, size=3).tolist()
    jobs = [
        (
            job_id,
            int(rng.choice([1, 2, 4, 8])),
            int(rng.integers(1, 10_000)),
            float(rng.integers(0, 1_000)),
            (rng.random(3) * (rng.random(3) > 0.2)).tolist(),
        )
        for job_id in range(int(rng.integers(1, 30)))
    ]
    problem = _problem(capacity, jobs)
    allocation = sjf.allocate(problem, SolverSpec())
    _check_feasible(problem, allocation)
    # The first job in SJF order that fits anywhere gets its fastest type that fits.
    remaining = [
        max(job.total_steps - job.steps_done, 0) / max(rates.max(), 1e-300)
        for job, rates in zip(problem.jobs, problem.throughputs, strict=True)
    ]
    for row in sorted(range(len(jobs)), key=lambda r: (remaining[r], problem.jobs[r].job_id)):
        rates = problem.throughputs[row]
        fits = [w for w in range(3) if capacity[w] >= problem.jobs[row].scale_factor]
        fits = [w for w in fits if rates[w] > 0]
        if fits:
            assert allocation.fractions[row, max(fits, key=lambda w: (rates[w], -w))] == 1.0
            break


# Plugins registered in-process, without a package.


class _IdlePolicy(Policy):
    name = "test_inline_idle"
    description = "test policy that gives no job any time"

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        return Allocation(keys, problem.worker_types, np.zeros((len(keys), len(problem.capacity))))


class _InlinePlugin:
    """A plugin object: any object with @hookimpl methods named after the hooks."""

    def __init__(self) -> None:
        self.policy = _IdlePolicy()

    @hookimpl
    def register_policies(self, register: Register) -> None:
        register(self.policy)


def test_in_process_plugin_registers_a_policy() -> None:
    plugin = _InlinePlugin()
    registry = PluginRegistry(load_plugins(extra_plugins=[plugin]))
    assert registry.get("policy", "test_inline_idle") is plugin.policy
    assert {"test_inline_idle", "fifo"} <= set(registry.names("policy"))  # entry points too
    assert "test_inline_idle" not in PluginRegistry(load_plugins()).names("policy")


def test_unknown_policy_name_lists_valid_names() -> None:
    registry = PluginRegistry(load_plugins(extra_plugins=[_InlinePlugin()]))
    with pytest.raises(UnknownPluginError) as raised:
        registry.get("policy", "no_such_policy")
    error = raised.value
    assert (error.kind, error.name) == ("policy", "no_such_policy")
    assert error.valid == registry.names("policy")
    message = str(error)
    assert "unknown policy 'no_such_policy'" in message
    for name in registry.names("policy"):
        assert name in message
