"""Checks that a results document's timeline agrees with its jobs' records (shared by the
simulator's and the cluster's tests)."""

from __future__ import annotations

from shock.core.timeline import JobTimeline
from shock.results.document import JobResult, ResultDocument

# Times in the timeline are rounded to milliseconds.
EPS = 2e-3


def check_timeline(document: ResultDocument) -> None:
    """Every segment within its job's arrival..completion, no overlaps, busy GPUs within
    capacity and equal to the segments running at each round's start, and queued + running
    equal to the jobs in the system then."""
    timeline = document.timeline
    assert timeline is not None
    records = {job.job_id: job for job in document.jobs}
    rounds = timeline.rounds
    assert len(rounds.time_s) > 0
    assert list(rounds.time_s) == sorted(rounds.time_s)
    for job in timeline.jobs:
        record = records.get(job.job_id)
        last_end = -1.0
        for segment in job.segments:
            assert segment.worker_type in timeline.worker_types
            assert segment.gpus >= 1
            assert segment.start_s < segment.end_s + EPS
            assert segment.start_s >= last_end - EPS, f"job {job.job_id} overlaps itself"
            last_end = segment.end_s
            if record is not None:
                assert record.arrival_s - EPS <= segment.start_s
                assert segment.end_s <= record.completion_s + EPS
    finished = set(records)
    assert finished <= {job.job_id for job in timeline.jobs}, (
        "a finished job is missing from the timeline"
    )
    for index, start in enumerate(rounds.time_s):
        busy = rounds.busy_gpus[index]
        assert len(busy) == len(timeline.worker_types)
        assert all(0 <= b <= c for b, c in zip(busy, timeline.capacity, strict=True))
        # The segments covering the round's start are exactly what ran in it.
        covering = [
            (job.job_id, s)
            for job in timeline.jobs
            for s in job.segments
            if s.start_s <= start < s.end_s or (s.start_s == start == s.end_s)
        ]
        per_type = [0] * len(timeline.worker_types)
        for _, segment in covering:
            per_type[timeline.worker_types.index(segment.worker_type)] += segment.gpus
        assert rounds.running[index] == len({job_id for job_id, _ in covering})
        # Packed pairs share their GPUs; without pairs the counts agree exactly.
        if rounds.running[index] == len(covering) and not _pairs(document):
            assert tuple(per_type) == busy, f"round {index} at {start}"
        # Jobs in the system at the round's start: arrived, not yet completed (up to rounding).
        in_system = rounds.queued[index] + rounds.running[index]
        surely, maybe = 0, 0
        for job in timeline.jobs:
            arrival = _arrival(job, records)
            completion = records[job.job_id].completion_s if job.job_id in finished else None
            if arrival > start + EPS or (completion is not None and completion < start - EPS):
                continue
            if arrival < start - EPS and (completion is None or completion > start + EPS):
                surely += 1
            else:
                maybe += 1
        assert surely <= in_system <= surely + maybe, f"round {index} at {start}"


def _pairs(document: ResultDocument) -> bool:
    return "packed" in document.policy


def _arrival(job: JobTimeline, records: dict[int, JobResult]) -> float:
    """A job's arrival: its record's, else its first batch size's entry (made at arrival)."""
    if job.job_id in records:
        return records[job.job_id].arrival_s
    if job.batch_sizes:
        return job.batch_sizes[0][0]
    return job.segments[0].start_s if job.segments else float("inf")
