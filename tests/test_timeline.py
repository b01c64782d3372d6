"""The results document's timeline on the simulator: consistent with the jobs' records, with
the work each job did, and with batch-size changes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from test_dynamics import dynamic_jobs
from test_simulator import simulate
from timeline_checks import check_timeline

from shock.core.model import JobSpec, batch_size_of
from shock.core.plugins import default_registry
from shock.core.results import RunResult
from shock.core.throughputs import default_throughputs
from shock.engine.dynamics import batch_schedules
from shock.results.document import ResultDocument, load_result

JOB_TYPES = (
    "ResNet-18 (batch size 32)",
    "LM (batch size 20)",
    "ResNet-50 (batch size 64)",
    "Transformer (batch size 128)",
)


def queued_jobs(count: int) -> list[JobSpec]:
    """More single-GPU jobs than GPUs, arriving over time, of unequal lengths."""
    table = default_throughputs()
    jobs = []
    for job_id in range(count):
        job_type = JOB_TYPES[job_id % len(JOB_TYPES)]
        steps = int(table.throughput(job_type, 1, "v100") * (1800 + 700 * (job_id % 5)))
        jobs.append(JobSpec(job_id, job_type, steps, arrival_time=300.0 * (job_id // 3)))
    return jobs


def written(result: RunResult, tmp_path: Path) -> ResultDocument:
    path = tmp_path / "run.json"
    result.write_json(path)
    return load_result(path)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "fifo", "max_min_fairness_packed"])
def test_timeline_agrees_with_the_records(policy: str, tmp_path: Path) -> None:
    result = simulate(queued_jobs(18), policy=policy, cluster="2:2:2", preemption_overhead_s=0)
    document = written(result, tmp_path)
    assert document.timeline is not None
    check_timeline(document)
    assert len(document.timeline.rounds.time_s) == result.metrics.rounds
    # Some rounds had jobs waiting: the check above saw queueing, not an idle cluster.
    assert max(document.timeline.rounds.queued) > 0


def test_segments_account_for_each_jobs_work(tmp_path: Path) -> None:
    """Time on each worker type times the job's rate there adds up to its steps. Merging
    consecutive rounds spans the gap between a job's last step and the round's end, under
    one step per merged round."""
    jobs = queued_jobs(18)
    result = simulate(
        jobs, policy="max_min_fairness_perf", cluster="2:2:2", preemption_overhead_s=0
    )
    document = written(result, tmp_path)
    assert document.timeline is not None
    table = default_throughputs()
    round_length = 360.0
    types_used = set()
    for job in document.timeline.jobs:
        spec = jobs[job.job_id]
        steps = rounds_merged = rounding = 0.0
        for segment in job.segments:
            rate = table.throughput(spec.job_type, 1, segment.worker_type)
            steps += (segment.end_s - segment.start_s) * rate
            rounds_merged += (segment.end_s - segment.start_s) // round_length
            rounding += 1e-3 * rate  # both ends rounded to milliseconds
            types_used.add(segment.worker_type)
        assert spec.total_steps - rounding <= steps <= spec.total_steps + rounds_merged + rounding
    assert len(types_used) == 3  # the jobs moved between worker types
    # GPU-seconds of the segments: the engine's busy GPU-seconds (utilisation), up to the
    # same merge gaps.
    busy = result.metrics.utilization * 6 * result.metrics.makespan_s
    in_segments = sum(
        (s.end_s - s.start_s) * s.gpus for job in document.timeline.jobs for s in job.segments
    )
    assert busy - 0.1 <= in_segments <= busy * 1.01


def test_timeline_round_trips_and_keeps_every_other_key(tmp_path: Path) -> None:
    result = simulate(queued_jobs(6), cluster="1:1:1")
    path = tmp_path / "run.json"
    result.write_json(path)
    raw = json.loads(path.read_text())
    assert set(raw) == set(result.to_document())
    assert {"metrics", "jobs", "policy", "timeline"} <= set(raw)
    document = load_result(path)
    assert document.timeline is not None
    assert document.timeline.worker_types == ("k80", "p100", "v100")
    assert document.timeline.capacity == (1, 1, 1)
    assert [job.job_id for job in document.timeline.jobs] == list(range(6))
    assert all(len(job.batch_sizes) == 1 for job in document.timeline.jobs)


def test_batch_size_changes_are_recorded(tmp_path: Path) -> None:
    jobs = dynamic_jobs(14)
    table = default_throughputs()
    schedules = batch_schedules(jobs, default_registry(), table, ("v100",), "t")
    result = simulate(jobs, cluster="8:0:0", preset="shockwave")
    document = written(result, tmp_path)
    timeline = document.timeline
    assert timeline is not None
    check_timeline(document)
    records = {job.job_id: job for job in document.jobs}
    changed = 0
    for job in timeline.jobs:
        sizes = job.batch_sizes
        spec = jobs[job.job_id]
        assert sizes[0] == (spec.arrival_time, batch_size_of(spec.job_type))
        times = [t for t, _ in sizes]
        assert times == sorted(times)
        assert times[-1] <= records[job.job_id].completion_s + 1e-3
        assert all(a[1] != b[1] for a, b in itertools.pairwise(sizes))
        schedule = schedules.get(job.job_id)
        if schedule is None:
            assert len(sizes) == 1
            continue
        assert {size for _, size in sizes} <= set(schedule.batch_sizes)
        if len(set(schedule.batch_sizes[: int(schedule.total_epochs)])) > 1:
            changed += 1
            assert len(sizes) > 1, f"job {job.job_id} changed batch size unrecorded"
    assert changed >= 3


def test_a_window_run_lists_the_jobs_it_left_unfinished(tmp_path: Path) -> None:
    result = simulate(queued_jobs(18), cluster="1:1:1", window=(0, 3), round_length_s=300.0)
    document = written(result, tmp_path)
    assert document.timeline is not None
    assert result.unfinished_jobs > 0
    check_timeline(document)
    finished = {job.job_id for job in document.jobs}
    unfinished = [job for job in document.timeline.jobs if job.job_id not in finished]
    assert len(unfinished) == len(document.timeline.jobs) - len(finished) > 0
    # The run stopped at the end of its last round.
    stop = document.timeline.rounds.time_s[-1] + 300.0
    for job in unfinished:
        assert all(s.end_s <= stop + 1e-3 for s in job.segments)
