"""A policy's snapshot, through JSON and back into a fresh instance, lets it go on exactly as
the original would (what a scheduler restarted from its journal relies on)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.lp.partition import PartitionedPolicy

HIGHS = SolverSpec("highs")
WORKER_TYPES = ("v100", "p100", "k80")
ROUND_S = 360.0
JOB_TYPES = (
    "ResNet-18 (batch size 32)",
    "LM (batch size 20)",
    "Transformer (batch size 64)",
    "ResNet-50 (batch size 64)",
    "CycleGAN",
    "Recommendation (batch size 2048)",
)
MODES = ("static", "accordion", "gns")


def _jobs(count: int, seed: int) -> list[PolicyJob]:
    rng = np.random.default_rng(seed)
    jobs = []
    for job_id in range(count):
        job_type = JOB_TYPES[int(rng.integers(len(JOB_TYPES)))]
        jobs.append(
            PolicyJob(
                job_id,
                job_type,
                int(rng.choice([1, 1, 2, 4])),
                1.0,
                float(job_id * 500),  # arrivals while the run goes on
                int(rng.integers(2_000, 40_000)),
                0.0,
                mode=MODES[job_id % 3],
            )
        )
    return jobs


def _problem(now: float, jobs: list[PolicyJob]) -> PolicyInput:
    table = default_throughputs()
    active = tuple(j for j in jobs if j.arrival_time <= now and j.steps_done < j.total_steps)
    rates = np.array(
        [[table.throughput(j.job_type, j.scale_factor, w) for w in WORKER_TYPES] for j in active]
    ).reshape(len(active), len(WORKER_TYPES))
    capacity = np.array([4.0, 4.0, 4.0])
    return PolicyInput(now, active, WORKER_TYPES, capacity, rates, table, None, ROUND_S)


def _progress(
    jobs: list[PolicyJob], problem: PolicyInput, allocation: Allocation
) -> list[PolicyJob]:
    """Each job gains its allocated share of a round at its rates (pairs count for nothing:
    the test only needs a deterministic, moving state)."""
    row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
    gained: dict[int, float] = {}
    for key, fractions in zip(allocation.keys, allocation.fractions, strict=True):
        if isinstance(key, int) and key in row_of:
            gained[key] = float(fractions @ problem.throughputs[row_of[key]]) * ROUND_S
    return [
        job if job.job_id not in gained
        else PolicyJob(
            job.job_id, job.job_type, job.scale_factor, job.priority_weight, job.arrival_time,
            job.total_steps, job.steps_done + gained[job.job_id], mode=job.mode,
        )
        for job in jobs
    ]  # fmt: skip


def _policy(name: str, partitions: int = 1) -> Policy:
    policy: Policy = default_registry().get("policy", name)
    if partitions > 1:
        policy = PartitionedPolicy(policy, partitions, seed=3)
    return policy.for_run(3)


def _same(a: Allocation, b: Allocation) -> bool:
    return (
        a.keys == b.keys
        and np.array_equal(a.fractions, b.fractions)
        and a.round_order == b.round_order
    )


STATEFUL = [
    ("fifo", 1),
    ("fifo_perf", 1),
    ("allox", 1),
    ("gandiva", 1),
    ("finish_time_fairness", 1),
    ("finish_time_fairness_perf", 1),
    ("finish_time_fairness_packed", 1),
    ("shockwave", 1),
    ("themis", 1),
    ("pollux", 1),
    ("sia", 1),
    ("max_min_fairness_perf", 2),
    ("finish_time_fairness_perf", 2),
]


@pytest.mark.parametrize(("name", "partitions"), STATEFUL)
def test_a_restored_policy_goes_on_as_the_original(name: str, partitions: int) -> None:
    jobs = _jobs(14, seed=len(name) + partitions)
    original = _policy(name, partitions)
    restored: Policy | None = None
    now = 0.0
    compared = 0
    for round_index in range(24):
        problem = _problem(now, jobs)
        allocation = original.allocate(problem, HIGHS)
        if restored is not None:
            assert _same(restored.allocate(problem, HIGHS), allocation), f"round {round_index}"
            compared += 1
        if round_index == 8:
            snapshot = original.snapshot()
            assert snapshot is not None
            restored = _policy(name, partitions)
            restored.restore(json.loads(json.dumps(snapshot)))
            assert json.dumps(restored.snapshot()) == json.dumps(snapshot)
        jobs = _progress(jobs, problem, allocation)
        now += ROUND_S
    assert compared == 15


def test_a_fresh_policy_differs_from_a_restored_one() -> None:
    """The check above can fail: without the snapshot, FTF's attained time is lost and its
    allocation moves."""
    jobs = _jobs(14, seed=5)
    original = _policy("finish_time_fairness_perf")
    fresh = _policy("finish_time_fairness_perf")
    now, differed = 0.0, False
    for round_index in range(16):
        problem = _problem(now, jobs)
        allocation = original.allocate(problem, HIGHS)
        if round_index > 8:
            differed |= not _same(fresh.allocate(problem, HIGHS), allocation)
        jobs = _progress(jobs, problem, allocation)
        now += ROUND_S
    assert differed


@pytest.mark.parametrize("name", ["max_min_fairness_perf", "las", "proportional"])
def test_policies_that_keep_nothing_have_no_snapshot(name: str) -> None:
    policy = _policy(name)
    assert policy.snapshot() is None
    with pytest.raises(ValueError, match="keeps no state"):
        policy.restore({})


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("fifo", {"placed": {"0": 1}}),  # no random state
        ("shockwave", {"jobs": {"0": {"batch_sizes": [32]}}}),
        ("themis", {"leases": [{"job_id": 1}], "contention": {}}),
        ("finish_time_fairness_perf", {"attained": {"x": 1.0}, "previous": {}}),
    ],
)
def test_a_snapshot_that_does_not_fit_is_refused(name: str, bad: dict[str, object]) -> None:
    with pytest.raises((ValueError, KeyError, TypeError, AttributeError)):
        _policy(name).restore(bad)
