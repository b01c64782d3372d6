"""What happened over a run, round by round and job by job, for plots and reports: the
results document's `"timeline"` key (docs/results.md). The engine's `TimelineRecorder` builds it.

- per round, columnar: its start, GPUs busy per worker type, jobs queued and running, and the
  allocation solve time spent before it;
- per job: (start, end, worker type, GPUs) segments, consecutive rounds on the same worker
  type and GPU count merged into one, and its batch sizes over time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple, overload

import numpy as np

# Decimals kept for times and durations: milliseconds, so a 5,600-job document stays small.
TIME_DECIMALS = 3


# Builds a named tuple without its Python-level __new__ (one per segment read).
_new_tuple = tuple.__new__


@dataclass(frozen=True, slots=True)
class Rounds:
    """Columnar per-round samples (one entry per round in every list)."""

    time_s: tuple[float, ...]
    busy_gpus: tuple[tuple[int, ...], ...]  # per worker type, in `Timeline.worker_types` order
    queued: tuple[int, ...]  # admitted, not running in the round
    running: tuple[int, ...]
    solve_s: tuple[float, ...]  # allocation solve time spent before the round (0: reused)


class Segment(NamedTuple):
    """A stretch of consecutive rounds a job ran on one worker type and GPU count."""

    start_s: float
    end_s: float
    worker_type: str
    gpus: int


@dataclass(frozen=True, slots=True)
class SegmentColumns:
    """Every job's segments in a run, as columns (arrays: 20 bytes a segment). A long run
    has millions of segments, which as Python objects would cost over 100 bytes each and
    slow every garbage collection."""

    order: np.ndarray  # segment indexes, grouped by job, each job's in time order
    first_round: np.ndarray  # round a segment starts in (it starts at the round's start)
    end_s: np.ndarray
    column: np.ndarray  # worker-type index
    gpus: np.ndarray
    round_starts: np.ndarray
    worker_types: Sequence[str]


class PackedSegments(Sequence[Segment]):
    """A job's segments: a stretch of the run's `SegmentColumns` order."""

    __slots__ = ("_begin", "_columns", "_length")

    def __init__(self, columns: SegmentColumns, begin: int, end: int) -> None:
        self._columns = columns
        self._begin = begin
        self._length = end - begin

    def __len__(self) -> int:
        return self._length

    def span(self) -> tuple[SegmentColumns, np.ndarray]:
        """The run's columns and this job's segment indexes in them (for writers that take
        every job's segments as arrays at once)."""
        return self._columns, self._columns.order[self._begin : self._begin + self._length]

    @overload
    def __getitem__(self, index: int) -> Segment: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Segment, ...]: ...
    def __getitem__(self, index: int | slice) -> Segment | tuple[Segment, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("segment index out of range")
        columns = self._columns
        k = columns.order[self._begin + index]
        return Segment(
            float(columns.round_starts[columns.first_round[k]]),
            float(columns.end_s[k]),
            columns.worker_types[columns.column[k]],
            int(columns.gpus[k]),
        )

    def __iter__(self) -> Iterator[Segment]:
        # Gathered in array operations: documents read millions of segments through here.
        columns = self._columns
        mine = columns.order[self._begin : self._begin + self._length]
        return map(
            _new_tuple,
            repeat(Segment),
            zip(
                columns.round_starts[columns.first_round[mine]].tolist(),
                columns.end_s[mine].tolist(),
                map(columns.worker_types.__getitem__, columns.column[mine].tolist()),
                columns.gpus[mine].tolist(),
                strict=False,  # the repeat is endless
            ),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"PackedSegments({list(self)!r})"


@dataclass(frozen=True, slots=True)
class JobTimeline:
    job_id: int
    job_type: str  # as the job arrived (its first batch size)
    scale_factor: int
    segments: Sequence[Segment]
    # (time, batch size): the starting one, then one per change; empty when the job type
    # names no batch size.
    batch_sizes: tuple[tuple[float, int], ...]


@dataclass(frozen=True, slots=True)
class Timeline:
    worker_types: tuple[str, ...]
    capacity: tuple[int, ...]  # GPUs per worker type (the most the cluster had)
    rounds: Rounds
    jobs: tuple[JobTimeline, ...]

    def to_json(self) -> dict[str, object]:
        def t(value: float) -> float:
            return round(value, TIME_DECIMALS)

        rounds = self.rounds
        return {
            "worker_types": list(self.worker_types),
            "capacity": list(self.capacity),
            "rounds": {
                "time_s": [t(v) for v in rounds.time_s],
                "busy_gpus": [list(b) for b in rounds.busy_gpus],
                "queued": list(rounds.queued),
                "running": list(rounds.running),
                "solve_s": [round(v, 6) for v in rounds.solve_s],
            },
            "jobs": [
                {
                    "id": job.job_id,
                    "job_type": job.job_type,
                    "scale_factor": job.scale_factor,
                    "segments": [
                        [round(start, TIME_DECIMALS), round(end, TIME_DECIMALS), worker, gpus]
                        for start, end, worker, gpus in job.segments
                    ],
                    "batch_sizes": [[t(time), size] for time, size in job.batch_sizes],
                }
                for job in self.jobs
            ],
        }
