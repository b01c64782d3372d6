"""A timeline as flat arrays: the results document's side-car (`out.timeline.npz`).

One array per field, no object per job or segment, so writing a 50,000-job run's timeline
costs a few arrays' memory and reading one back is a few array loads (docs/results.md has the
schema). `timeline_arrays` flattens a `Timeline`; `timeline_from_arrays` rebuilds one whose
jobs' segments are views into the arrays (`PackedSegments`), so nothing per segment is built
until a reader asks for it.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Mapping
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
    return dict(_array_items(timeline))


def write_timeline_arrays(timeline: Timeline, path: Path) -> None:
    """The side-car at `path`: an uncompressed npz (numpy reads it back without a parser),
    written one array at a time, so that only one segment column exists at once beside the
    run's own."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in _array_items(timeline):
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _array_items(timeline: Timeline) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) in `ARRAY_NAMES` order, each built when it is asked for."""
    rounds = timeline.rounds
    width = len(timeline.worker_types)
    jobs = timeline.jobs
    yield "version", np.array(TIMELINE_ARRAYS_VERSION, dtype=np.int64)
    yield "worker_types", np.array(timeline.worker_types, dtype=np.str_)
    yield "capacity", np.array(timeline.capacity, dtype=np.int64)
    yield "round_time_s", np.array(rounds.time_s, dtype=np.float64)
    yield "round_busy_gpus", np.array(rounds.busy_gpus, dtype=np.int64).reshape(-1, width)
    yield "round_queued", np.array(rounds.queued, dtype=np.int64)
    yield "round_running", np.array(rounds.running, dtype=np.int64)
    yield "round_solve_s", np.array(rounds.solve_s, dtype=np.float64)
    yield "job_id", np.array([job.job_id for job in jobs], dtype=np.int64)
    job_types = sorted({job.job_type for job in jobs})
    type_index = {name: k for k, name in enumerate(job_types)}
    yield "job_types", np.array(job_types, dtype=np.str_)
    yield "job_type", np.array([type_index[job.job_type] for job in jobs], dtype=np.int32)
    yield "job_scale_factor", np.array([job.scale_factor for job in jobs], dtype=np.int32)
    yield "job_segments", np.array([len(job.segments) for job in jobs], dtype=np.int64)
    yield from _segment_items(timeline)
    sizes = [job.batch_sizes for job in jobs]
    yield "job_batch_sizes", np.array([len(s) for s in sizes], dtype=np.int64)
    yield "batch_time_s", np.array([t for s in sizes for t, _ in s], dtype=np.float64)
    yield "batch_size", np.array([b for s in sizes for _, b in s], dtype=np.int64)


def _segment_items(timeline: Timeline) -> Iterator[tuple[str, np.ndarray]]:
    """Every job's segments in job order: start, end, worker-type index, GPUs. Taken from
    the run's columns as arrays where the jobs share them (a simulated run's); otherwise
    segment by segment."""
    jobs = timeline.jobs
    lookup = {name: k for k, name in enumerate(timeline.worker_types)}
    spans = [job.segments.span() for job in jobs if isinstance(job.segments, PackedSegments)]
    if jobs and len(spans) == len(jobs) and len({id(span[0]) for span in spans}) == 1:
        shared: SegmentColumns = spans[0][0]
        index = np.concatenate([span[1] for span in spans])
        del spans
        # The run's worker-type indexes, in the timeline's order.
        to_column = np.array([lookup[name] for name in shared.worker_types], dtype=np.int16)
        starts = np.asarray(shared.round_starts, dtype=np.float64)
        yield "segment_start_s", starts[shared.first_round[index]]
        yield "segment_end_s", np.asarray(shared.end_s[index], dtype=np.float64)
        if len(to_column):
            yield "segment_worker", to_column[shared.column[index]]
        else:
            yield "segment_worker", np.zeros(0, dtype=np.int16)
        yield "segment_gpus", np.asarray(shared.gpus[index], dtype=np.int32)
        return
    rows = [segment for job in jobs for segment in job.segments]
    yield "segment_start_s", np.array([row[0] for row in rows], dtype=np.float64)
    yield "segment_end_s", np.array([row[1] for row in rows], dtype=np.float64)
    yield "segment_worker", np.array([lookup[row[2]] for row in rows], dtype=np.int16)
    yield "segment_gpus", np.array([row[3] for row in rows], dtype=np.int32)


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
