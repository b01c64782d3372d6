"""POP partitioning (shock.lp.partition), `shock bench policy` and `shock run --partitions`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shock_cli import run_shock
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError, UnknownPluginError
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.engine.bench import bench_instance
from shock.engine.runner import RunOptions, build_request
from shock.lp.partition import PartitionedPolicy

SOLVER = SolverSpec()
WORKER_TYPES = ("k80", "p100", "v100")


def mmf() -> Policy:
    policy: Policy = default_registry().get("policy", "max_min_fairness_perf")
    return policy


def make_problem(
    throughputs: np.ndarray,
    capacity: np.ndarray,
    scale_factors: list[int],
    weights: list[float],
    job_ids: list[int] | None = None,
) -> PolicyInput:
    ids = job_ids if job_ids is not None else list(range(len(scale_factors)))
    jobs = tuple(
        PolicyJob(
            job_id=ids[j],
            job_type=f"type{j}",
            scale_factor=scale_factors[j],
            priority_weight=weights[j],
            arrival_time=0.0,
            total_steps=1000,
            steps_done=0.0,
        )
        for j in range(len(scale_factors))
    )
    return PolicyInput(
        now=100.0,
        jobs=jobs,
        worker_types=WORKER_TYPES,
        capacity=capacity,
        throughputs=throughputs,
    )


def assert_feasible(problem: PolicyInput, allocation: Allocation) -> None:
    assert allocation.keys == tuple(job.job_id for job in problem.jobs)
    x = allocation.fractions
    assert x.shape == (len(problem.jobs), len(problem.worker_types))
    assert (x >= 0).all()
    assert (x.sum(axis=1) <= 1 + 1e-7).all()
    used = (problem.scale_factors[:, None] * x).sum(axis=0)
    assert (used <= problem.capacity + 1e-6).all(), (used, problem.capacity)


@st.composite
def problems(draw: st.DrawFn) -> PolicyInput:
    m = draw(st.integers(0, 40))
    throughputs = np.array(
        draw(
            st.lists(
                st.lists(st.floats(0.1, 100.0), min_size=3, max_size=3),
                min_size=m,
                max_size=m,
            )
        )
    ).reshape(m, 3)
    capacity = np.array(draw(st.lists(st.integers(0, 12), min_size=3, max_size=3)), float)
    if capacity.sum() == 0:
        capacity[2] = 1.0
    scale_factors = draw(st.lists(st.sampled_from([1, 1, 1, 2, 4, 8]), min_size=m, max_size=m))
    weights = draw(st.lists(st.sampled_from([1.0, 1.0, 5.0]), min_size=m, max_size=m))
    return make_problem(throughputs, capacity, scale_factors, weights)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(), partitions=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_partitioned_allocation_is_feasible(
    problem: PolicyInput, partitions: int, seed: int
) -> None:
    allocation = PartitionedPolicy(mmf(), partitions, seed).allocate(problem, SOLVER)
    assert_feasible(problem, allocation)


@settings(max_examples=25, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 12)), min_size=1, max_size=8),
    partitions=st.integers(2, 5),
    seed=st.integers(0, 1000),
)
def test_groups_stay_balanced_and_stable(
    steps: list[tuple[int, int]], partitions: int, seed: int
) -> None:
    """Over arrivals and departures: every job in one part, sizes within one of each other,
    and no job moves when jobs only arrive."""
    policy = PartitionedPolicy(mmf(), partitions, seed)
    active: list[int] = []
    next_id = 0
    previous: dict[int, int] = {}
    for departures, arrivals in steps:
        active = active[departures:]
        active.extend(range(next_id, next_id + arrivals))
        next_id += arrivals
        groups = policy.assign(active)
        sizes = [len(rows) for rows in groups]
        assert sum(sizes) == len(active)
        assert max(sizes) - min(sizes) <= 1
        part_of = {active[row]: part for part, rows in enumerate(groups) for row in rows}
        assert len(part_of) == len(active)
        if departures == 0:
            assert all(part_of[j] == p for j, p in previous.items())
        previous = part_of


def test_one_partition_is_the_inner_policy() -> None:
    problem = bench_instance(120, seed=3)
    inner = mmf()
    expected = inner.allocate(problem, SOLVER)
    got = PartitionedPolicy(inner, 1, seed=7).allocate(problem, SOLVER)
    assert got.keys == expected.keys
    assert np.array_equal(got.fractions, expected.fractions)
    assert got.objective == expected.objective


def test_deterministic_for_a_seed() -> None:
    problem = bench_instance(200, seed=1, jitter=0.05)
    first = PartitionedPolicy(mmf(), 4, seed=11).allocate(problem, SOLVER)
    second = PartitionedPolicy(mmf(), 4, seed=11).allocate(problem, SOLVER)
    assert first.keys == second.keys
    assert np.array_equal(first.fractions, second.fractions)
    assert first.objective == second.objective
    ids = [job.job_id for job in problem.jobs]
    groups_a = PartitionedPolicy(mmf(), 4, seed=11).assign(ids)
    groups_b = PartitionedPolicy(mmf(), 4, seed=12).assign(ids)
    assert any(not np.array_equal(a, b) for a, b in zip(groups_a, groups_b, strict=True))


def test_objective_close_to_unpartitioned_optimum() -> None:
    """400 jobs, 100 GPUs of each type. Measured loss of the max-min floor (seeds 0-4 of the
    instance, 3 partition seeds each): K=2 0.3-2.5%, K=4 0.6-4.4%, K=8 2-8.6%. The
    partitioned floor is that of a feasible allocation, so it can never beat the optimum."""
    problem = bench_instance(400, seed=0)
    optimum = mmf().allocate(problem, SOLVER).objective
    assert optimum is not None
    for partitions, floor in ((2, 0.97), (4, 0.96)):
        for seed in range(3):
            allocation = PartitionedPolicy(mmf(), partitions, seed).allocate(problem, SOLVER)
            assert_feasible(problem, allocation)
            assert allocation.objective is not None
            assert allocation.objective <= optimum * (1 + 1e-6)
            assert allocation.objective >= floor * optimum, (partitions, seed)


def test_fewer_jobs_than_partitions_uses_the_whole_cluster() -> None:
    problem = make_problem(np.full((2, 3), 5.0), np.array([4.0, 4.0, 4.0]), [1, 1], [1.0, 1.0])
    allocation = PartitionedPolicy(mmf(), 8, seed=0).allocate(problem, SOLVER)
    assert_feasible(problem, allocation)
    # Each job gets half the cluster's share: it runs all the time (rows sum to 1).
    assert allocation.fractions.sum(axis=1) == pytest.approx([1.0, 1.0])


def test_packed_inner_pairs_stay_within_parts() -> None:
    """Space-sharing policies pair jobs within a part; singles come first in job order, then
    pairs; each job's time over its units and every type's GPUs stay within bounds."""
    try:
        packed: Policy = default_registry().get("policy", "max_min_fairness_packed")
    except UnknownPluginError:
        pytest.skip("max_min_fairness_packed is not installed")
    problem = bench_instance(60, seed=2)
    policy = PartitionedPolicy(packed, 3, seed=1)
    allocation = policy.allocate(problem, SOLVER)
    ids = [job.job_id for job in problem.jobs]
    singles = [k for k in allocation.keys if not isinstance(k, tuple)]
    pairs = [k for k in allocation.keys if isinstance(k, tuple)]
    assert singles == [k for k in ids if k in singles]
    assert list(allocation.keys) == singles + pairs
    part_of = {ids[row]: part for part, rows in enumerate(policy.assign(ids)) for row in rows}
    assert all(part_of[a] == part_of[b] for a, b in pairs)
    x = allocation.fractions
    assert (x >= 0).all()
    time_of = dict.fromkeys(ids, 0.0)
    for row, key in enumerate(allocation.keys):
        for job_id in key if isinstance(key, tuple) else (key,):
            time_of[job_id] += float(x[row].sum())
    assert max(time_of.values()) <= 1 + 1e-7
    assert (x.sum(axis=0) <= problem.capacity + 1e-6).all()  # single-GPU units


class Recorder(Policy):
    """A stateful policy that remembers every job id it was given (per instance)."""

    name = "recorder"
    description = "test"

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def for_run(self, seed: int) -> Recorder:
        return Recorder()

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        self.seen.update(job.job_id for job in problem.jobs)
        fractions = np.zeros((len(problem.jobs), len(problem.worker_types)))
        return Allocation(tuple(j.job_id for j in problem.jobs), problem.worker_types, fractions)


def test_stateful_inner_gets_one_instance_per_part_and_run() -> None:
    registered = Recorder()
    run = PartitionedPolicy(registered, 3, seed=0).for_run(5)
    problem = bench_instance(30, seed=0)
    run.allocate(problem, SOLVER)
    later = bench_instance(40, seed=0)  # job ids 0-29 again, plus 30-39
    run.allocate(later, SOLVER)
    instances = run._instances
    assert len({id(p) for p in instances}) == 3
    assert registered.seen == set()
    assert all(isinstance(p, Recorder) for p in instances)
    seen = [p.seen for p in instances if isinstance(p, Recorder)]
    # Each job was solved by one part only, every time (arrivals only: nobody moved).
    assert sum(len(s) for s in seen) == 40
    assert set().union(*seen) == set(range(40))


def test_partitions_must_be_positive() -> None:
    with pytest.raises(InputError, match="--partitions"):
        PartitionedPolicy(mmf(), 0, seed=0)
    with pytest.raises(InputError, match="--partitions"):
        build_request(RunOptions(partitions=0))
    request = build_request(RunOptions(partitions=3))
    assert isinstance(request.policy, PartitionedPolicy)
    assert request.policy.name == "max_min_fairness_perf"
    assert not isinstance(build_request(RunOptions()).policy, PartitionedPolicy)


def test_bench_policy_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["bench", "policy", "--jobs", "64", "--json", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert {"policy", "jobs", "seconds", "objective", "status"} <= set(document)
    assert document["policy"] == "max_min_fairness_perf"
    assert document["jobs"] == 64
    assert document["status"] == "optimal"
    assert document["seconds"] > 0
    assert document["objective"] > 0


def test_bench_policy_partitioned(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    args = ["bench", "policy", "--jobs", "64", "--partitions", "4", "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["partitions"] == 4
    assert document["status"] == "optimal"


def test_run_with_partitions(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = CliRunner().invoke(app, ["run", "--partitions", "2", "--quiet", "--json", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["policy"] == "max_min_fairness_perf"
    assert document["metrics"]["jobs"] == 96
    assert document["unfinished_jobs"] == 0


def test_partitions_zero_is_a_clean_error(tmp_path: Path) -> None:
    for args in (("run", "--partitions", "0"), ("bench", "policy", "--partitions", "0")):
        result = run_shock(*args, cwd=tmp_path)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert "--partitions" in result.stderr
        assert "must be >= 1" in " ".join(result.stderr.split())
