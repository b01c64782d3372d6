"""pollux and sia, property-based: capacity, per-job limits, and what restarts cost."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.engine.allocation_check import check_allocation
from shock.goodput import applications
from shock.goodput.speedup import application_of
from shock.plugins.policies.pollux.policy import Pollux, PolluxOptions, node_sizes
from shock.plugins.policies.sia import Sia, SiaOptions, configurations

# Pollux's applications, and a job type without a goodput model (it scales linearly).
JOB_TYPES = [f"{name} (batch size 64)" for name in applications.names()] + [
    "ResNet-18 (batch size 32)"
]
SETTINGS: Any = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def jobs(draw: Any, max_jobs: int = 8) -> tuple[PolicyJob, ...]:
    count = draw(st.integers(1, max_jobs))
    made = []
    for job_id in range(count):
        total = draw(st.integers(100, 10_000))
        made.append(
            PolicyJob(
                job_id=job_id,
                job_type=draw(st.sampled_from(JOB_TYPES)),
                scale_factor=draw(st.sampled_from([1, 2, 4])),
                priority_weight=1.0,
                arrival_time=float(draw(st.integers(0, 3000))),
                total_steps=total,
                steps_done=float(draw(st.integers(0, total - 1))),
                time_run_s=float(draw(st.integers(0, 5000))),
            )
        )
    return tuple(made)


def problem_of(jobs: tuple[PolicyJob, ...], capacity: list[int]) -> PolicyInput:
    types = ("t4", "v100", "a100")[: len(capacity)]
    rng = np.random.default_rng(len(jobs))
    return PolicyInput(
        now=4000.0,
        jobs=jobs,
        worker_types=types,
        capacity=np.array(capacity, dtype=float),
        throughputs=rng.uniform(0.5, 3.0, size=(len(jobs), len(types))),
    )


def job_limit(job_type: str) -> int:
    name = application_of(job_type)
    return applications.application(name).limits.max_gpus if name else 10**9


# ---------------------------------------------------------------------------------------- sia


@SETTINGS
@given(
    jobs=jobs(),
    capacity=st.lists(st.integers(1, 24), min_size=1, max_size=3),
)
def test_sia_respects_capacity_and_job_limits(
    jobs: tuple[PolicyJob, ...], capacity: list[int]
) -> None:
    problem = problem_of(jobs, capacity)
    allocation = Sia().for_run(0).allocate(problem, SolverSpec())
    check_allocation("sia", problem, allocation)
    assert allocation.elastic is not None
    valid = {
        (problem.worker_types[c.worker], c.num_nodes, c.gpus)
        for c in configurations(problem.capacity, 4)
    }
    used = dict.fromkeys(problem.worker_types, 0)
    for job in jobs:
        grant = allocation.elastic.get(job.job_id)
        if grant is None:
            continue
        assert (grant.worker_type, grant.num_nodes, grant.gpus) in valid
        assert grant.gpus <= job_limit(job.job_type)
        used[grant.worker_type] += grant.gpus
        name = application_of(job.job_type)
        if name is not None:
            limits = applications.application(name).limits
            assert grant.atomic_batch_size is not None and grant.batch_size is not None
            assert limits.min_local_bsz <= grant.atomic_batch_size <= limits.max_local_bsz
            assert grant.batch_size <= limits.max_batch_size + grant.gpus * (
                grant.accumulation_steps + 1
            )
    for w, gpus in used.items():
        assert gpus <= capacity[problem.worker_types.index(w)]


@SETTINGS
@given(jobs=jobs(), capacity=st.lists(st.integers(1, 24), min_size=1, max_size=3))
def test_sia_leaves_gpus_idle_only_when_no_job_can_use_them(
    jobs: tuple[PolicyJob, ...], capacity: list[int]
) -> None:
    # Every job left out costs lambda_n > any configuration's cost: a job is left out only
    # when even a single GPU of any type is taken.
    problem = problem_of(jobs, capacity)
    allocation = Sia().for_run(0).allocate(problem, SolverSpec())
    assert allocation.elastic is not None
    free = dict(zip(problem.worker_types, capacity, strict=True))
    for grant in allocation.elastic.values():
        free[grant.worker_type] -= grant.gpus
    if len(allocation.elastic) < len(jobs):
        assert all(gpus == 0 for gpus in free.values())


@SETTINGS
@given(jobs=jobs(), capacity=st.lists(st.integers(1, 24), min_size=1, max_size=3))
def test_sia_never_moves_a_job_a_restart_would_cost_everything(
    jobs: tuple[PolicyJob, ...], capacity: list[int]
) -> None:
    problem = problem_of(jobs, capacity)
    policy = Sia(SiaOptions(restart_penalty_s=30.0)).for_run(0)
    first = policy.allocate(problem, SolverSpec())
    assert first.elastic is not None
    # Restarted so often that moving is worth nothing: each job keeps its configuration or,
    # at worst, stops; none moves.
    for job_id in policy.ledger.current:
        policy.ledger.restarts[job_id] = 10**6
    # The next round, the worker types' speeds are swapped and a newcomer asks for GPUs:
    # without the restart penalty jobs would move.
    newcomer = PolicyJob(99, "imagenet (batch size 200)", 1, 1.0, 3900.0, 10_000, 0.0)
    changed = replace(
        problem,
        now=4100.0,
        jobs=(*problem.jobs, newcomer),
        throughputs=np.vstack([problem.throughputs[:, ::-1], np.ones(len(capacity))]),
    )
    second = policy.allocate(changed, SolverSpec())
    assert second.elastic is not None
    for job_id, grant in second.elastic.items():
        before = first.elastic.get(job_id)
        if before is not None:
            assert (grant.worker_type, grant.num_nodes, grant.gpus) == (
                before.worker_type,
                before.num_nodes,
                before.gpus,
            )


def test_sia_prefers_the_faster_gpu_type() -> None:
    job = PolicyJob(0, "ResNet-18 (batch size 32)", 1, 1.0, 0.0, 1000, 0.0)
    problem = PolicyInput(
        now=10.0,
        jobs=(job,),
        worker_types=("slow", "fast"),
        capacity=np.array([4.0, 4.0]),
        throughputs=np.array([[1.0, 3.0]]),
    )
    # Every job's model known from the start (no bootstrapping).
    allocation = Sia(SiaOptions(explore=False)).for_run(0).allocate(problem, SolverSpec())
    assert allocation.elastic is not None
    # A linear job with p < 0 and the cluster to itself: all of the faster type's GPUs.
    assert allocation.elastic[0].worker_type == "fast"
    assert allocation.elastic[0].gpus == 4


# ------------------------------------------------------------------------------------- pollux

FAST = PolluxOptions(population=24, generations=15)


@SETTINGS
@given(jobs=jobs(), gpus=st.integers(1, 40))
def test_pollux_respects_nodes_and_job_limits(jobs: tuple[PolicyJob, ...], gpus: int) -> None:
    problem = problem_of(jobs, [gpus])
    policy = Pollux(FAST).for_run(0)
    nodes = node_sizes(gpus, 4)
    most: dict[int, int] = {}
    for _ in range(3):
        allocation = policy.allocate(problem, SolverSpec())
        check_allocation("pollux", problem, allocation)
        assert allocation.elastic is not None
        per_node = np.zeros(len(nodes), dtype=int)
        distributed_on = np.zeros(len(nodes), dtype=int)
        for job in jobs:
            grant = allocation.elastic.get(job.job_id)
            if grant is None:
                assert job.job_id not in policy.placements
                continue
            placed = policy.placements[job.job_id]
            assert placed.sum() == grant.gpus and np.count_nonzero(placed) == grant.num_nodes
            per_node += placed
            if grant.num_nodes > 1:
                distributed_on += placed > 0
            # Pollux explores: at most twice the most GPUs the job has had (1 at first).
            assert grant.gpus <= min(max(2 * most.get(job.job_id, 0), 1), job_limit(job.job_type))
        assert np.all(per_node <= nodes)
        assert np.all(distributed_on <= 1)  # one distributed job per node
        for job_id, grant in allocation.elastic.items():
            most[job_id] = max(most.get(job_id, 0), grant.gpus)


@SETTINGS
@given(jobs=jobs(max_jobs=6))
def test_pollux_keeps_every_allocation_when_restarts_cost_everything(
    jobs: tuple[PolicyJob, ...],
) -> None:
    problem = problem_of(jobs, [32])
    policy = Pollux(FAST).for_run(0)
    policy.allocate(problem, SolverSpec())
    before = {job_id: placed.copy() for job_id, placed in policy.placements.items()}
    for job_id in policy.ledger.restarts:
        policy.ledger.restarts[job_id] = 10**6
    policy.allocate(problem, SolverSpec())
    for job_id, placed in before.items():
        assert np.array_equal(policy.placements.get(job_id), placed)


def test_pollux_grows_a_scalable_job_step_by_step() -> None:
    job = PolicyJob(0, "imagenet (batch size 200)", 1, 1.0, 0.0, 100_000, 0.0)
    problem = PolicyInput(
        now=10_000.0,
        jobs=(job,),
        worker_types=("t4",),
        capacity=np.array([64.0]),
        throughputs=np.ones((1, 1)),
    )
    policy = Pollux(PolluxOptions(population=30, generations=20, restart_penalty_s=0)).for_run(0)
    seen = []
    for _ in range(5):
        allocation = policy.allocate(problem, SolverSpec())
        assert allocation.elastic is not None
        seen.append(allocation.elastic[0].gpus)
    # Alone on the cluster, ImageNet takes more GPUs each round, at most doubling.
    assert seen[0] == 1
    assert all(b > a for a, b in itertools.pairwise(seen))
    assert all(b <= 2 * a for a, b in itertools.pairwise(seen))
    grant = allocation.elastic[0]
    assert grant.batch_size is not None and grant.batch_size > 200
