"""What happened over a run, round by round and job by job, for plots and reports.

The engine feeds a `TimelineRecorder` as it runs (every backend gets the same timeline); the
recorder keeps only what the results document's `"timeline"` key needs (docs/results.md):

- per round, columnar: its start, GPUs busy per worker type, jobs queued and running, and the
  allocation solve time spent before it;
- per job: (start, end, worker type, GPUs) segments, consecutive rounds on the same worker
  type and GPU count merged into one, and its batch sizes over time.

It runs inside the engine's loop, once per round over the round's units (thousands in a large
run), so it is written for speed: a round's units are read into arrays by C-level maps; small
rounds wait and are counted and merged into segments many at once (`timeline_segments`);
closed segments stay in columns (20 bytes each), which the final timeline's jobs view rather
than copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

import numpy as np

from shock.core.model import batch_size_of
from shock.core.timeline import (
    JobTimeline,
    PackedSegments,
    Rounds,
    SegmentColumns,
    Timeline,
)
from shock.engine.timeline_segments import BATCH_ENTRIES, BATCH_ROUNDS, SegmentBuilder
from shock.engine.units import ASSIGNED_COLUMN, ASSIGNED_GPUS, ASSIGNED_UNIT

if TYPE_CHECKING:
    from shock.core.executor import BatchSizeChange, UnitProgress
    from shock.core.model import Cluster, JobSpec
    from shock.engine.units import Assignment, JobState


# Fields of the round's progress, read by C-level getters (see round_ran).
_EXEC_S = itemgetter(2)
_STOPPED = itemgetter(1)
_FIRST = itemgetter(0)
_MEMBERS = attrgetter("members")
_JOB_ID = attrgetter("job_id")














class _JobTrack:
    """A job's kind and batch sizes while it is recorded (its segments are kept columnar)."""

    __slots__ = ("batch_sizes", "job_type", "scale_factor")

    def __init__(self, job_type: str, scale_factor: int, arrival_s: float) -> None:
        self.job_type = job_type
        self.scale_factor = scale_factor
        size = batch_size_of(job_type)
        self.batch_sizes: list[tuple[float, int]] = [] if size is None else [(arrival_s, size)]

    @classmethod
    def of(cls, job: JobSpec) -> _JobTrack:
        return cls(job.job_type, job.scale_factor, job.arrival_time)


class _JobIndex:
    """Job id -> the job's index in the segment columns (in the order jobs were first seen).
    Looked up for a round's jobs at once in a table by job id, while ids are small
    non-negative numbers (as traces number jobs); in the dictionary otherwise."""

    # Job ids up to this many times the jobs seen (plus a margin) use the table.
    SPARSE_FACTOR = 8
    MARGIN = 1 << 16

    def __init__(self) -> None:
        self.of: dict[int, int] = {}
        self.table = np.full(0, -1, dtype=np.int64)
        self.table_usable = True

    def __len__(self) -> int:
        return len(self.of)

    def __getitem__(self, job_id: int) -> int:
        return self.of[job_id]

    def add(self, job_id: int) -> None:
        """Give the job the next index, unless it has one."""
        if job_id in self.of:
            return
        position = self.of[job_id] = len(self.of)
        if not self.table_usable:
            return
        if not 0 <= job_id < self.SPARSE_FACTOR * len(self.of) + self.MARGIN:
            self.table_usable = False
            return
        if job_id >= len(self.table):
            grown = np.full(max(job_id + 1, 2 * len(self.table)), -1, dtype=np.int64)
            grown[: len(self.table)] = self.table
            self.table = grown
        self.table[job_id] = position

    def positions(self, job_ids: np.ndarray) -> np.ndarray | None:
        """The jobs' indexes, or None if one of them has none yet."""
        if not len(job_ids):
            return np.zeros(0, dtype=np.intp)
        if self.table_usable:
            if job_ids.min() < 0 or job_ids.max() >= len(self.table):
                return None
            positions = self.table[job_ids]
            return None if positions.min() < 0 else positions
        of = self.of
        if not all(map(of.__contains__, job_ids.tolist())):
            return None
        return np.fromiter(map(of.__getitem__, job_ids.tolist()), np.intp, len(job_ids))


class TimelineRecorder:
    """Fed by the engine: `job_admitted`, `round_planned` then `round_ran` per round,
    `batch_sizes_seen` after a round that may have changed batch sizes."""

    def __init__(self, cluster: Cluster) -> None:
        self.worker_types: list[str] = []
        self.capacity: list[int] = []
        self._columns: dict[str, int] = {}
        self._busy: list[tuple[int, ...]] = []
        # Rounds whose busy GPUs are not counted yet: their units' columns and GPU counts
        # (counted for many rounds at once, like the segments).
        self._uncounted: list[tuple[np.ndarray, np.ndarray]] = []
        self._uncounted_units = 0
        self.cluster_changed(cluster)
        self._jobs: dict[int, _JobTrack] = {}
        self._index = _JobIndex()
        self._time_s: list[float] = []
        self._queued: list[int] = []
        self._running: list[int] = []
        self._solve_s: list[float] = []
        self._solver_total_s = 0.0
        self._pending: tuple[float, int, float] | None = None
        self._segments = SegmentBuilder()
        # The last mechanism columns seen, the timeline's column of each, and whether those
        # are the same (the common case: nothing to translate).
        self._to_column: tuple[tuple[str, ...], np.ndarray, bool] = (
            (),
            np.zeros(0, dtype=np.intp),
            True,
        )

    def cluster_changed(self, cluster: Cluster) -> None:
        """Worker types the cluster gained get a column; capacity is the most seen."""
        self._count_busy()  # the rounds before: as wide as the columns were then
        for worker_type in cluster.worker_types:
            count = cluster.gpus_per_type[worker_type]
            column = self._columns.get(worker_type)
            if column is None:
                self._columns[worker_type] = len(self.worker_types)
                self.worker_types.append(worker_type)
                self.capacity.append(count)
            elif count > self.capacity[column]:
                self.capacity[column] = count

    def job_admitted(self, job: JobSpec) -> None:
        self._jobs[job.job_id] = _JobTrack.of(job)
        self._index.add(job.job_id)

    def round_planned(self, start_s: float, active_jobs: int, solver_total_s: float) -> None:
        """A round was planned at `start_s` with `active_jobs` admitted and unfinished;
        `solver_total_s` is the run's solve time so far."""
        self._pending = (start_s, active_jobs, solver_total_s - self._solver_total_s)
        self._solver_total_s = solver_total_s

    def round_ran(
        self,
        planned: Sequence[Assignment],
        progress: Sequence[UnitProgress],
        worker_types: Sequence[str],
    ) -> None:
        """The planned round ran: its samples and each job's segment. `worker_types` are
        the mechanism's columns (the assignments' `column` indexes them).

        Thousands of units run in a round: their fields are gathered by C-level `map`s
        into arrays and every job's segment is extended or replaced in array operations."""
        if self._pending is None:
            return
        count = len(planned)
        if len(progress) != count:
            raise ValueError(f"{count} units planned, progress reported for {len(progress)}")
        unit_columns = np.fromiter(map(ASSIGNED_COLUMN, planned), np.intp, count)
        unit_gpus = np.fromiter(map(len, map(ASSIGNED_GPUS, planned)), np.intp, count)
        exec_s = np.fromiter(map(_EXEC_S, progress), np.float64, count)
        try:  # every unit a job alone: the common case, kept lean
            job_ids = np.fromiter(map(_JOB_ID, map(ASSIGNED_UNIT, planned)), np.int64, count)
        except AttributeError:  # a pair (it has no job id of its own)
            pass
        else:
            stopped = np.fromiter(map(_FIRST, map(_STOPPED, progress)), np.float64, count)
            self._record(
                unit_columns, unit_gpus, None, job_ids, exec_s, stopped, worker_types,
                lambda: list(map(ASSIGNED_UNIT, planned)),
            )  # fmt: skip
            return
        members = list(map(_MEMBERS, map(ASSIGNED_UNIT, planned)))
        jobs = [job for unit_members in members for job in unit_members]
        stopped = np.array(
            [
                s
                for unit_members, unit_progress in zip(members, progress, strict=True)
                for s in unit_progress.stopped_s[: len(unit_members)]
            ],
            dtype=np.float64,
        )
        self._record(
            unit_columns,
            unit_gpus,
            np.fromiter(map(len, members), np.intp, count),
            np.fromiter(map(_JOB_ID, jobs), np.int64, len(jobs)),
            exec_s,
            stopped,
            worker_types,
            lambda: jobs,
        )

    def jobs_ran(
        self,
        columns: np.ndarray,
        gpus: np.ndarray,
        job_ids: np.ndarray,
        exec_s: np.ndarray,
        stopped_s: np.ndarray,
        worker_types: Sequence[str],
        states: Callable[[], list[JobState]],
    ) -> None:
        """`round_ran` for a round of jobs alone, given as columns (the mechanism's
        `columns` index `worker_types`); `states` gives the jobs' states, wanted only for
        jobs this recorder has not seen admitted."""
        if self._pending is not None:
            self._record(columns, gpus, None, job_ids, exec_s, stopped_s, worker_types, states)

    def _record(
        self,
        unit_columns: np.ndarray,
        unit_gpus: np.ndarray,
        sizes: np.ndarray | None,
        job_ids: np.ndarray,
        unit_exec_s: np.ndarray,
        stopped: np.ndarray,
        worker_types: Sequence[str],
        states: Callable[[], list[JobState]],
    ) -> None:
        """The round's samples and segments from its units' columns (`sizes`: each unit's
        number of jobs, None when every unit is one job; `job_ids` and `stopped` are per
        job)."""
        pending = self._pending
        assert pending is not None
        self._pending = None
        start, active, solve = pending
        index = len(self._time_s)
        # The mechanism's column -> the timeline's (they differ only after a resize).
        if tuple(worker_types) != self._to_column[0]:
            columns = self._columns
            to_column = np.array([columns[w] for w in worker_types], dtype=np.intp)
            same = bool((to_column == np.arange(len(to_column))).all())
            self._to_column = (tuple(worker_types), to_column, same)
        if not self._to_column[2]:
            unit_columns = self._to_column[1][unit_columns]
        if sizes is None:
            job_columns, job_gpus, job_exec_s = unit_columns, unit_gpus, unit_exec_s
        else:
            job_columns = np.repeat(unit_columns, sizes)
            job_gpus = np.repeat(unit_gpus, sizes)
            job_exec_s = np.repeat(unit_exec_s, sizes)
        positions = self._index.positions(job_ids)
        if positions is None:
            positions = self._first_seen_running(job_ids, states())
        running = len(job_ids)
        self._time_s.append(start)
        self._queued.append(active - running)
        self._running.append(running)
        self._solve_s.append(solve)
        uncounted = self._uncounted
        uncounted.append((unit_columns, unit_gpus))
        self._uncounted_units += len(unit_columns)
        if self._uncounted_units >= BATCH_ENTRIES or len(uncounted) >= BATCH_ROUNDS:
            self._count_busy()
        self._segments.ran(
            index, start, positions, job_exec_s, stopped, job_columns, job_gpus, len(self._index)
        )

    def _count_busy(self) -> None:
        """The busy GPUs per worker type of the rounds not counted yet, for all at once."""
        uncounted = self._uncounted
        if not uncounted:
            return
        width = len(self.worker_types)
        rounds = len(uncounted)
        unit_columns, unit_gpus = zip(*uncounted, strict=True)
        round_of = np.repeat(np.arange(rounds), list(map(len, unit_columns)))
        busy = np.bincount(
            round_of * width + np.concatenate(unit_columns),
            weights=np.concatenate(unit_gpus),
            minlength=rounds * width,
        )
        self._busy.extend(map(tuple, busy.astype(np.int64).reshape(rounds, width).tolist()))
        uncounted.clear()
        self._uncounted_units = 0

    def _first_seen_running(self, job_ids: np.ndarray, jobs: list[JobState]) -> np.ndarray:
        """The jobs' indexes in the segment columns, where some run without having been
        admitted here (they were, before a restore): recorded from now on."""
        for job in jobs:
            if job.job_id not in self._jobs:
                self._jobs[job.job_id] = _JobTrack.of(job.spec)
            self._index.add(job.job_id)
        positions = self._index.positions(job_ids)
        assert positions is not None
        return positions

    def batch_sizes_seen(
        self,
        time_s: float,
        jobs: Iterable[JobState],
        changes: Iterable[BatchSizeChange] = (),
    ) -> None:
        """Record each job's batch size where it differs from the last one recorded: the
        engine's states (simulated adaptation) and the changes real jobs reported."""
        tracks = self._jobs
        for state in jobs:
            track = tracks.get(state.job_id)
            if track is not None:
                _note_batch_size(track, time_s, state.spec.job_type)
        for change in changes:
            track = tracks.get(change.job_id)
            if track is not None:
                _note_batch_size(track, time_s, change.job_type)

    def batch_sizes_used(self, time_s: float, sizes: dict[int, int]) -> None:
        """Record the batch size each elastic job runs with from `time_s` on, where it
        differs from the last one recorded."""
        tracks = self._jobs
        for job_id, size in sizes.items():
            track = tracks.get(job_id)
            if track is not None and (not track.batch_sizes or track.batch_sizes[-1][1] != size):
                track.batch_sizes.append((time_s, size))

    def timeline(self) -> Timeline:
        self._count_busy()
        worker_types = tuple(self.worker_types)
        width = len(worker_types)
        rounds = Rounds(
            time_s=tuple(self._time_s),
            # Rounds sampled before the cluster gained a worker type get its column as 0.
            busy_gpus=tuple(tuple(b) + (0,) * (width - len(b)) for b in self._busy),
            queued=tuple(self._queued),
            running=tuple(self._running),
            solve_s=tuple(self._solve_s),
        )
        columns, bounds = self._segment_columns(worker_types)
        index_of = self._index
        jobs = []
        for job_id, track in sorted(self._jobs.items()):
            position = index_of[job_id]
            segments = PackedSegments(columns, bounds[position], bounds[position + 1])
            jobs.append(
                JobTimeline(
                    job_id,
                    track.job_type,
                    track.scale_factor,
                    segments,
                    tuple(track.batch_sizes),
                )
            )
        return Timeline(worker_types, tuple(self.capacity), rounds, tuple(jobs))

    def _segment_columns(self, worker_types: tuple[str, ...]) -> tuple[SegmentColumns, list[int]]:
        """Every job's segments, closed then open (copies: recording goes on), and where
        each job's begin in their order (by the job's index)."""
        jobs = len(self._index)
        job, first, end, column, gpus = self._segments.columns(jobs)
        # Stable: a job's closed segments in the order they closed, its open one last.
        order = np.argsort(job, kind="stable").astype(np.int32)
        bounds = [0, *np.cumsum(np.bincount(job, minlength=jobs)).tolist()]
        columns = SegmentColumns(
            order, first, end, column, gpus, np.array(self._time_s, dtype=np.float64), worker_types
        )
        return columns, bounds


def _note_batch_size(track: _JobTrack, time_s: float, job_type: str) -> None:
    size = batch_size_of(job_type)
    if size is None:
        return
    sizes = track.batch_sizes
    if not sizes or sizes[-1][1] != size:
        sizes.append((time_s, size))
