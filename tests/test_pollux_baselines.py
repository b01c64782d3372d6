"""Pollux's artifact's baselines (`optimus`, `tiresias_pollux`), `--preset pollux`, and the
three policies run end to end on a small Pollux workload."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.engine.runner import RunOptions, build_request
from shock.goodput.progress import curve
from shock.plugins.policies.optimus import Optimus, packed_step_seconds
from shock.plugins.policies.tiresias_pollux import TiresiasPollux, TiresiasPolluxOptions

SOLVER = SolverSpec()


def job(
    job_id: int, job_type: str, gpus: int = 1, arrival: float = 0.0, done: float = 0.0
) -> PolicyJob:
    return PolicyJob(job_id, job_type, gpus, 1.0, arrival, 10_000, done)


def problem(jobs: list[PolicyJob], gpus: int, now: float = 0.0) -> PolicyInput:
    return PolicyInput(now, tuple(jobs), ("t4",), np.array([float(gpus)]), np.ones((len(jobs), 1)))


def granted(allocation) -> dict[int, int]:  # type: ignore[no-untyped-def]
    assert allocation.elastic is not None
    return {j: g.gpus for j, g in allocation.elastic.items()}


def test_optimus_gives_every_job_one_gpu_first_in_arrival_order() -> None:
    jobs = [job(i, "cifar10 (batch size 2048)", arrival=float(i)) for i in range(5)]
    gpus = granted(Optimus().allocate(problem(jobs, 3), SOLVER))
    assert gpus == {0: 1, 1: 1, 2: 1}


def test_optimus_hands_out_gpus_by_marginal_gain_within_limits() -> None:
    # An NCF job is pinned to one GPU; cifar10 at 2048 may use 2048 / 32 = 64.
    jobs = [job(0, "ncf (batch size 32768)"), job(1, "cifar10 (batch size 2048)")]
    allocation = Optimus().allocate(problem(jobs, 16), SOLVER)
    gpus = granted(allocation)
    assert gpus[0] == 1
    assert 1 < gpus[1] <= 15
    assert sum(gpus.values()) <= 16
    # Worked by hand: each GPU it got saved time; the next one would not.
    training = curve("cifar10")
    times = [packed_step_seconds(training, 2048, r, 4) for r in range(1, gpus[1] + 1)]
    assert all(later < earlier for earlier, later in pairwise(times))
    grant = allocation.elastic[1]  # type: ignore[index]
    assert grant.batch_size is not None and abs(grant.batch_size - 2048) <= gpus[1]


def test_optimus_favours_the_job_with_more_work_left() -> None:
    training = curve("cifar10")
    near_end = 10_000 * training.epoch_ends[-5] / training.target
    jobs = [
        job(0, "cifar10 (batch size 2048)", done=near_end),
        job(1, "cifar10 (batch size 2048)"),
    ]
    gpus = granted(Optimus().allocate(problem(jobs, 12), SOLVER))
    assert gpus[1] > gpus[0]


def test_tiresias_pollux_runs_fixed_gangs_and_skips_those_that_do_not_fit() -> None:
    policy = TiresiasPollux().for_run(0)
    jobs = [job(0, "cifar10 (batch size 512)", 4), job(1, "bert (batch size 384)", 8, 1.0)]
    jobs.append(job(2, "ncf (batch size 32768)", 1, 2.0))
    gpus = granted(policy.allocate(problem(jobs, 6), SOLVER))
    # Job 1's 8 GPUs do not fit after job 0's 4; job 2 behind it runs.
    assert gpus == {0: 4, 2: 1}


def test_tiresias_pollux_demotes_after_its_threshold() -> None:
    policy = TiresiasPollux(TiresiasPolluxOptions(threshold_gpu_s=400.0)).for_run(0)
    first = job(0, "cifar10 (batch size 512)", 4)
    second = job(1, "cifar10 (batch size 512)", 4, arrival=1.0)
    assert granted(policy.allocate(problem([first, second], 4, 0.0), SOLVER)) == {0: 4}
    # 100 s x 4 GPUs reaches 400 GPU-s: job 0 drops to the second queue, job 1 runs.
    assert granted(policy.allocate(problem([first, second], 4, 60.0), SOLVER)) == {0: 4}
    assert granted(policy.allocate(problem([first, second], 4, 120.0), SOLVER)) == {1: 4}
    # Its state survives a snapshot.
    copy = TiresiasPollux(TiresiasPolluxOptions(threshold_gpu_s=400.0)).for_run(0)
    copy.restore(policy.snapshot())
    assert copy.second == policy.second and copy.executed == policy.executed


def test_the_pollux_preset_sets_pollux_simulator_semantics() -> None:
    preset = default_registry().get("preset", "pollux")
    assert preset.round_length_s == 60.0
    assert preset.preemption_overhead_s == 30.0
    assert preset.overhead_on_first_start
    assert preset.reallocate_every_round


SMALL = """name,time,application,num_replicas,batch_size
cifar10-0,0,cifar10,4,512
ncf-1,30,ncf,1,32768
ncf-2,100,ncf,1,32768
cifar10-3,200,cifar10,2,256
"""


@pytest.mark.parametrize(
    ("policy", "options"),
    [("pollux", ("generations=5", "population=10")), ("optimus", ()), ("tiresias_pollux", ())],
)
def test_each_policy_runs_a_pollux_workload_to_the_end(
    tmp_path: Path, policy: str, options: tuple[str, ...]
) -> None:
    trace = tmp_path / "small.csv"
    trace.write_text(SMALL)
    registry = default_registry()
    request = build_request(
        RunOptions(policy=policy, trace=str(trace), preset="pollux", policy_options=options),
        registry,
    )
    result = registry.get("backend", "simulator").run(request)
    assert len(result.records) == 4
    assert result.timeline is not None
    cifar = result.timeline.jobs[0]
    counts = {segment.gpus for segment in cifar.segments}
    if policy == "tiresias_pollux":
        assert counts == {4}  # never resized
        assert [size for _, size in cifar.batch_sizes] == [512]
    else:
        assert max(counts) > 1
    busy = np.array(result.timeline.rounds.busy_gpus)
    assert busy.max() <= 64


def test_jobs_that_all_arrive_at_once_start_a_round_later_under_pollux(tmp_path: Path) -> None:
    """At its first round every job is 0 s old, and Pollux's restart factor, age / (age +
    penalty), prices any allocation at nothing: the policy may grant none. The run then
    waits a round (as Pollux's simulator first decides one interval in) instead of failing."""
    trace = tmp_path / "together.csv"
    trace.write_text(
        "name,time,application,num_replicas,batch_size\n"
        "cifar10-0,0,cifar10,1,128\n"
        "cifar10-1,0,cifar10,2,256\n"
    )
    registry = default_registry()
    request = build_request(
        RunOptions(policy="pollux", trace=str(trace), preset="pollux"), registry
    )
    result = registry.get("backend", "simulator").run(request)
    assert sorted(record.job_id for record in result.records) == [0, 1]
    assert result.timeline is not None
    first_start = min(job.segments[0].start_s for job in result.timeline.jobs)
    assert first_start == 60.0  # one round of 60 s with nothing granted
