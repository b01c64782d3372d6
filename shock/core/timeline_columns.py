"""A timeline as flat arrays: the results document's side-car (`out.timeline.npz`).

One array per field, no object per job or segment, so writing a 50,000-job run's timeline
costs a few arrays' memory and reading one back is a few array loads (docs/results.md has the
schema). `timeline_arrays` flattens a `Timeline`; `timeline_from_arrays` rebuilds one whose
jobs' segments are views into the arrays (`PackedSegments`), so nothing per segment is built
until a reader asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from shock.core.timeline import (
    JobTimeline,
    PackedSegments,
    Rounds,
    SegmentColumns,
    Timeline,
)

# Bumped when the arrays' meaning changes; readers refuse a newer one.
TIMELINE_ARRAYS_VERSION = 1

# Every array the side-car holds (the npz file has exactly these).
ARRAY_NAMES = (
    "version",
    "worker_types",
    "capacity",
    "round_time_s",
    "round_busy_gpus",
    "round_queued",
    "round_running",
    "round_solve_s",
    "job_id",
    "job_types",
    "job_type",
    "job_scale_factor",
    "job_segments",
    "segment_start_s",
    "segment_end_s",
    "segment_worker",
    "segment_gpus",
    "job_batch_sizes",
    "batch_time_s",
    "batch_size",
)


def timeline_arrays(timeline: Timeline) -> dict[str, np.ndarray]:
    """The timeline as the side-car's arrays (full precision)."""
    rounds = timeline.rounds
    width = len(timeline.worker_types)
    jobs = timeline.jobs
    job_types = sorted({job.job_type for job in jobs})
    type_index = {name: k for k, name in enumerate(job_types)}
    start, end, worker, gpus, counts = _segments(timeline)
    sizes = [job.batch_sizes for job in jobs]
    return {
        "version": np.array(TIMELINE_ARRAYS_VERSION, dtype=np.int64),
        "worker_types": np.array(timeline.worker_types, dtype=np.str_),
        "capacity": np.array(timeline.capacity, dtype=np.int64),
        "round_time_s": np.array(rounds.time_s, dtype=np.float64),
        "round_busy_gpus": np.array(rounds.busy_gpus, dtype=np.int64).reshape(-1, width),
        "round_queued": np.array(rounds.queued, dtype=np.int64),
        "round_running": np.array(rounds.running, dtype=np.int64),
        "round_solve_s": np.array(rounds.solve_s, dtype=np.float64),
        "job_id": np.array([job.job_id for job in jobs], dtype=np.int64),
        "job_types": np.array(job_types, dtype=np.str_),
        "job_type": np.array([type_index[job.job_type] for job in jobs], dtype=np.int32),
        "job_scale_factor": np.array([job.scale_factor for job in jobs], dtype=np.int32),
        "job_segments": counts,
        "segment_start_s": start,
        "segment_end_s": end,
        "segment_worker": worker,
        "segment_gpus": gpus,
        "job_batch_sizes": np.array([len(s) for s in sizes], dtype=np.int64),
        "batch_time_s": np.array([t for s in sizes for t, _ in s], dtype=np.float64),
        "batch_size": np.array([b for s in sizes for _, b in s], dtype=np.int64),
    }


def _segments(timeline: Timeline) -> tuple[np.ndarray, ...]:
    """Every job's segments in job order: start, end, worker-type index, GPUs, and how many
    each job has. Taken from the run's columns as arrays where the jobs share them (a
    simulated run's); otherwise segment by segment."""
    jobs = timeline.jobs
    counts = np.array([len(job.segments) for job in jobs], dtype=np.int64)
    spans = [job.segments.span() for job in jobs if isinstance(job.segments, PackedSegments)]
    columns = {id(span[0]) for span in spans}
    if len(spans) == len(jobs) and len(columns) == 1 and jobs:
        shared: SegmentColumns = spans[0][0]
        index = np.concatenate([span[1] for span in spans])
        lookup = {name: k for k, name in enumerate(timeline.worker_types)}
        # The run's worker-type indexes, in the timeline's order.
        to_column = np.array([lookup[name] for name in shared.worker_types], dtype=np.int16)
        return (
            np.asarray(shared.round_starts, dtype=np.float64)[shared.first_round[index]],
            np.asarray(shared.end_s[index], dtype=np.float64),
            to_column[shared.column[index]] if len(to_column) else np.zeros(0, np.int16),
            np.asarray(shared.gpus[index], dtype=np.int32),
            counts,
        )
    lookup = {name: k for k, name in enumerate(timeline.worker_types)}
    rows = [segment for job in jobs for segment in job.segments]
    return (
        np.array([row[0] for row in rows], dtype=np.float64),
        np.array([row[1] for row in rows], dtype=np.float64),
        np.array([lookup[row[2]] for row in rows], dtype=np.int16),
        np.array([row[3] for row in rows], dtype=np.int32),
        counts,
    )


def write_timeline_arrays(timeline: Timeline, path: Path) -> None:
    """The side-car at `path` (uncompressed npz: numpy reads it back without a parser)."""
    with path.open("wb") as handle:
        np.savez(handle, allow_pickle=False, **timeline_arrays(timeline))


class TimelineArraysError(ValueError):
    """Side-car arrays that are missing, of the wrong shape or of a newer version."""


def timeline_from_arrays(arrays: Mapping[str, np.ndarray]) -> Timeline:
    """The timeline the side-car's arrays hold; `TimelineArraysError` when they do not fit."""
    missing = [name for name in ARRAY_NAMES if name not in arrays]
    if missing:
        raise TimelineArraysError(f"missing array(s) {', '.join(missing)}")
    version = int(arrays["version"])
    if version > TIMELINE_ARRAYS_VERSION:
        raise TimelineArraysError(
            f"arrays version {version} is newer than this shock reads "
            f"({TIMELINE_ARRAYS_VERSION}); upgrade shock"
        )
    worker_types = tuple(str(w) for w in arrays["worker_types"].tolist())
    width = len(worker_types)
    busy = arrays["round_busy_gpus"]
    rounds = Rounds(
        time_s=tuple(arrays["round_time_s"].tolist()),
        busy_gpus=tuple(tuple(row) for row in busy.reshape(-1, width).tolist()),
        queued=tuple(arrays["round_queued"].tolist()),
        running=tuple(arrays["round_running"].tolist()),
        solve_s=tuple(arrays["round_solve_s"].tolist()),
    )
    if len({len(rounds.time_s), len(rounds.busy_gpus), len(rounds.queued),
            len(rounds.running), len(rounds.solve_s)}) != 1:
        raise TimelineArraysError("the round arrays need one entry per round each")
    job_ids = arrays["job_id"].tolist()
    counts = arrays["job_segments"]
    sizes = arrays["job_batch_sizes"]
    segments = len(arrays["segment_start_s"])
    if not (
        len(arrays["job_type"]) == len(arrays["job_scale_factor"]) == len(counts)
        == len(sizes) == len(job_ids)
        and int(counts.sum()) == segments
        and all(len(arrays[f"segment_{f}"]) == segments for f in ("end_s", "worker", "gpus"))
        and int(sizes.sum()) == len(arrays["batch_time_s"]) == len(arrays["batch_size"])
    ):
        raise TimelineArraysError("the job, segment and batch-size arrays do not line up")
    # Segments are stored in job order, so a job's are one stretch: a segment's "round" is
    # the segment itself, its start the round start.
    columns = SegmentColumns(
        order=np.arange(segments, dtype=np.int64),
        first_round=np.arange(segments, dtype=np.int64),
        end_s=arrays["segment_end_s"],
        column=arrays["segment_worker"],
        gpus=arrays["segment_gpus"],
        round_starts=arrays["segment_start_s"],
        worker_types=worker_types,
    )
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    size_bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    times = arrays["batch_time_s"].tolist()
    batch = arrays["batch_size"].tolist()
    types = arrays["job_types"].tolist()
    type_of = arrays["job_type"].tolist()
    scales = arrays["job_scale_factor"].tolist()
    jobs = tuple(
        JobTimeline(
            job_id,
            str(types[type_of[k]]),
            int(scales[k]),
            PackedSegments(columns, bounds[k], bounds[k + 1]),
            tuple(zip(times[size_bounds[k] : size_bounds[k + 1]],
                      batch[size_bounds[k] : size_bounds[k + 1]], strict=True)),
        )
        for k, job_id in enumerate(job_ids)
    )
    capacity = tuple(int(c) for c in arrays["capacity"].tolist())
    if len(capacity) != width:
        raise TimelineArraysError("needs one capacity per worker type")
    if segments and not 0 <= int(arrays["segment_worker"].min()) <= int(
        arrays["segment_worker"].max()
    ) < width:
        raise TimelineArraysError("a segment's worker type is not one of worker_types")
    if type_of and not 0 <= min(type_of) <= max(type_of) < len(types):
        raise TimelineArraysError("a job's type is not one of job_types")
    return Timeline(worker_types, capacity, rounds, jobs)
