"""Space sharing: the packed max-min policy and pairs in the mechanism and simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, PolicyInput, PolicyJob
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.cluster_spec import parse_cluster
from shock.engine.mechanism import Mechanism
from shock.engine.runner import RunOptions, build_request
from shock.plugins.policies.max_min_fairness import MaxMinFairness
from shock.plugins.policies.max_min_fairness_packed import MaxMinFairnessPacked
from shock.traces.generator import WorkloadConfig, generate_jobs

TABLE = default_throughputs()
TYPES = ("k80", "p100", "v100")
SINGLE_KEYS = sorted(k for k in TABLE.isolated if k[1] == 1)
GANG_KEYS = sorted(k for k in TABLE.isolated if k[1] == 2)


def instance(
    keys: list[tuple[str, int]], capacity: tuple[float, ...], weights: list[float]
) -> PolicyInput:
    jobs = tuple(
        PolicyJob(i, job_type, sf, weights[i], 0.0, 1000, 0.0)
        for i, (job_type, sf) in enumerate(keys)
    )
    throughputs = np.array([[TABLE.throughput(t, sf, w) for w in TYPES] for t, sf in keys])
    return PolicyInput(0.0, jobs, TYPES, np.array(capacity), throughputs, table=TABLE)


def check_feasible(problem: PolicyInput, allocation: Allocation) -> None:
    size = {job.job_id: job.scale_factor for job in problem.jobs}
    per_job = dict.fromkeys(size, 0.0)
    used = np.zeros(len(TYPES))
    assert (allocation.fractions >= 0).all()
    for key, row in zip(allocation.keys, allocation.fractions, strict=True):
        members = key if isinstance(key, tuple) else (key,)
        if isinstance(key, tuple):
            assert key[0] < key[1] and size[key[0]] == size[key[1]]
        for member in members:
            per_job[member] += row.sum()
        used += size[members[0]] * row
    assert max(per_job.values()) <= 1 + 1e-6
    assert (used <= problem.capacity + 1e-6).all()


instances = st.builds(
    lambda picks, gangs, capacity, heavy: (
        [SINGLE_KEYS[i % 9] for i in picks] + [GANG_KEYS[i % 5] for i in gangs],
        capacity,
        [5.0 if i in heavy else 1.0 for i in range(len(picks) + len(gangs))],
    ),
    st.lists(st.integers(0, 100), min_size=1, max_size=9),
    st.lists(st.integers(0, 100), max_size=3),
    st.tuples(*(st.integers(2, 5).map(float) for _ in TYPES)),
    st.sets(st.integers(0, 11), max_size=3),
)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(instances)
def test_class_lp_matches_the_job_level_model(case: tuple) -> None:
    problem = instance(*case)
    policy = MaxMinFairnessPacked()
    by_class = policy.allocate(problem, SolverSpec())
    by_job = policy.allocate(problem, SolverSpec(fast_path=False))
    assert by_class.objective == pytest.approx(by_job.objective, rel=1e-6, abs=1e-7)
    check_feasible(problem, by_class)
    check_feasible(problem, by_job)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(instances)
def test_packing_never_lowers_the_max_min_level(case: tuple) -> None:
    problem = instance(*case)
    packed = MaxMinFairnessPacked().allocate(problem, SolverSpec())
    alone = MaxMinFairness(heterogeneity_aware=True).allocate(problem, SolverSpec())
    assert packed.objective is not None and alone.objective is not None
    assert packed.objective >= alone.objective - 1e-6


def test_each_job_reaches_the_max_min_level_with_its_pair_throughputs() -> None:
    keys = [SINGLE_KEYS[i] for i in (0, 0, 0, 3, 5, 8, 8)]
    problem = instance(keys, (2.0, 2.0, 2.0), [1.0] * len(keys))
    allocation = MaxMinFairnessPacked().allocate(problem, SolverSpec())
    check_feasible(problem, allocation)
    assert any(isinstance(key, tuple) for key in allocation.keys)
    equal = problem.throughputs @ (problem.capacity / problem.capacity.sum())
    progress = np.zeros(len(keys))
    for key, row in zip(allocation.keys, allocation.fractions, strict=True):
        if isinstance(key, int):
            progress[key] += row @ problem.throughputs[key]
            continue
        a, b = key
        rates = np.array([TABLE.pair_throughput(keys[a], keys[b], w) for w in TYPES])
        if keys[a] == keys[b]:
            rates = np.repeat(rates.mean(axis=1, keepdims=True), 2, axis=1)
        progress[a] += row @ rates[:, 0]
        progress[b] += row @ rates[:, 1]
    assert allocation.objective is not None
    assert (progress / equal >= allocation.objective - 1e-6).all()


def test_pairs_in_the_mechanism_never_double_book_a_job_or_a_gpu() -> None:
    registry = default_registry()
    mechanism = Mechanism(
        parse_cluster("v100=2,p100=2,k80=2"),
        registry.get("policy", "max_min_fairness_packed"),
        SolverSpec(),
        registry.get("placement", "first_fit"),
        TABLE,
        MechanismConfig(round_length_s=360.0),
    )
    for job_id, key in enumerate([SINGLE_KEYS[i] for i in (0, 0, 1, 3, 5, 8, 8, 9)]):
        mechanism.admit(JobSpec(job_id, key[0], 10**9))
    ran_pair = False
    for index in range(40):
        assignments = mechanism.plan_round(index * 360.0)
        jobs = [job.job_id for a in assignments for job in a.unit.members]
        gpus = [gpu for a in assignments for gpu in a.gpus]
        assert len(jobs) == len(set(jobs))
        assert len(gpus) == len(set(gpus))
        for assignment in assignments:
            ran_pair |= len(assignment.unit.members) == 2
            assert all(rate > 0 for rate in assignment.rates)
            assert not mechanism.credit(assignment, [r * 360 for r in assignment.rates], 360.0)
    assert ran_pair


def test_packed_beats_unpacked_at_high_load() -> None:
    registry = default_registry()
    jobs = generate_jobs(WorkloadConfig(num_jobs=60, seed=0), TABLE)
    trace = Trace(tuple(jobs), "static60")
    results = {}
    for policy in ("max_min_fairness_perf", "max_min_fairness_packed"):
        options = RunOptions(policy=policy, cluster="2:2:2", preset="gavel")
        request = build_request(options, registry, trace=trace)
        result = registry.get("backend", "simulator").run(request)
        assert result.unfinished_jobs == 0
        results[policy] = result.metrics
    packed, alone = results["max_min_fairness_packed"], results["max_min_fairness_perf"]
    assert packed.avg_jct_s < alone.avg_jct_s
    assert packed.makespan_s < alone.makespan_s


@settings(max_examples=25, deadline=None, derandomize=True)
@given(instances)
def test_fifo_packed_and_gandiva_allocations_are_feasible(case: tuple) -> None:
    problem = instance(*case)
    registry = default_registry()
    for name in ("fifo_packed", "gandiva"):
        allocation = registry.get("policy", name).for_run(0).allocate(problem, SolverSpec())
        check_feasible(problem, allocation)


def test_fifo_packed_pairs_a_waiting_job_only_when_packing_pays() -> None:
    from shock.plugins.policies.fifo import PACKING_THRESHOLD, FifoPacked

    keys = [SINGLE_KEYS[i] for i in (0, 3, 5, 8, 12, 14)]
    problem = instance(keys, (1.0, 1.0, 1.0), [1.0] * len(keys))
    allocation = FifoPacked().allocate(problem, SolverSpec())
    check_feasible(problem, allocation)
    running = {k for k, row in zip(allocation.keys, allocation.fractions, strict=True) if row.max()}
    members = {m for k in running for m in (k if isinstance(k, tuple) else (k,))}
    # The first three jobs take the three GPUs; later ones only join as good pairs, in order.
    assert {0, 1, 2} <= members
    waiting = sorted(members - {0, 1, 2})
    assert waiting  # this instance has a pair worth forming (job 3 with job 0)
    assert waiting == list(range(3, 3 + len(waiting)))
    for key, row in zip(allocation.keys, allocation.fractions, strict=True):
        if isinstance(key, tuple) and row.max() > 0:
            column = int(np.argmax(row))
            a, b = key
            pa, pb = TABLE.pair_throughput(keys[a], keys[b], TYPES[column])
            score = pa / problem.throughputs[a, column] + pb / problem.throughputs[b, column]
            assert score > PACKING_THRESHOLD


def test_gandiva_keeps_good_pairs_and_never_retries_bad_ones() -> None:
    from shock.plugins.policies.gandiva import Gandiva

    keys = [SINGLE_KEYS[i] for i in (0, 1, 3, 5, 8, 9, 12, 14)]
    problem = instance(keys, (2.0, 2.0, 2.0), [1.0] * len(keys))
    policy = Gandiva(seed=3)
    first = policy.allocate(problem, SolverSpec())
    kept = {k for k in first.keys if isinstance(k, tuple)}
    rejected = set(policy._rejected)
    for _ in range(5):
        again = policy.allocate(problem, SolverSpec())
        check_feasible(problem, again)
        pairs = {k for k in again.keys if isinstance(k, tuple)}
        assert kept <= pairs  # good pairs stay together
        assert not (pairs & rejected)  # a rejected pair never comes back
        rejected = set(policy._rejected)
        kept = pairs


def _pair_progress(problem: PolicyInput, allocation: Allocation) -> np.ndarray:
    """Each job's steps/s under an allocation of singles and pairs (table throughputs)."""
    keys = [(job.job_type, job.scale_factor) for job in problem.jobs]
    row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
    progress = np.zeros(len(problem.jobs))
    for key, fractions in zip(allocation.keys, allocation.fractions, strict=True):
        if isinstance(key, int):
            progress[row_of[key]] += fractions @ problem.throughputs[row_of[key]]
            continue
        a, b = row_of[key[0]], row_of[key[1]]
        rates = np.array([TABLE.pair_throughput(keys[a], keys[b], w) for w in TYPES])
        if keys[a] == keys[b]:
            rates = np.repeat(rates.mean(axis=1, keepdims=True), 2, axis=1)
        progress[a] += fractions @ rates[:, 0]
        progress[b] += fractions @ rates[:, 1]
    return progress


@settings(max_examples=20, deadline=None, derandomize=True)
@given(instances)
def test_packed_makespan_is_optimal_achieved_and_never_worse(case: tuple) -> None:
    from shock.plugins.policies.min_total_duration import MinTotalDuration, MinTotalDurationPacked

    keys, capacity, weights = case
    problem = instance(keys, capacity, weights)
    policy = MinTotalDurationPacked()
    by_class = policy.allocate(problem, SolverSpec())
    by_job = policy.allocate(problem, SolverSpec(fast_path=False))
    alone = MinTotalDuration(heterogeneity_aware=True).allocate(problem, SolverSpec())
    assert by_class.objective is not None and by_job.objective is not None
    assert alone.objective is not None
    assert by_class.objective == pytest.approx(by_job.objective, rel=1e-6)
    assert by_class.objective <= alone.objective * (1 + 1e-6)
    check_feasible(problem, by_class)
    # Every job finishes its remaining steps within the reported makespan.
    finish = problem.steps_remaining / _pair_progress(problem, by_class)
    assert finish.max() <= by_class.objective * (1 + 1e-5)
