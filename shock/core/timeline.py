"""What happened over a run, round by round and job by job, for plots and reports.

The engine feeds a `TimelineRecorder` as it runs (every backend gets the same timeline); the
recorder keeps only what the results document's `"timeline"` key needs (docs/results.md):

- per round, columnar: its start, GPUs busy per worker type, jobs queued and running, and the
  allocation solve time spent before it;
- per job: (start, end, worker type, GPUs) segments, consecutive rounds on the same worker
  type and GPU count merged into one, and its batch sizes over time.

It runs inside the engine's loop, once per round over the round's units, so it is written for
speed: plain lists, no per-unit objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, overload

from shock.core.model import batch_size_of

if TYPE_CHECKING:
    from shock.core.executor import BatchSizeChange, UnitProgress
    from shock.core.mechanism import Assignment, JobState
    from shock.core.model import Cluster, JobSpec

# Decimals kept for times and durations: milliseconds, so a 5,600-job document stays small.
TIME_DECIMALS = 3

# A segment while it is recorded: [start, end, worker-type column, GPUs, last round's index].
_Segment = list[float]
# Stands for "no segment yet": its last round (-2) never precedes a recorded round.
_NO_SEGMENT: _Segment = [0.0, 0.0, -1, 0, -2]


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


class PackedSegments(Sequence[Segment]):
    """A job's segments, packed: (start, end) in one array of doubles and (worker-type index,
    GPUs) in one of shorts, 20 bytes a segment. A long run has millions of segments, which as
    Python objects would cost over 100 bytes each and slow every garbage collection."""

    __slots__ = ("_places", "_times", "_worker_types")

    def __init__(
        self, times: array[float], places: array[int], worker_types: Sequence[str]
    ) -> None:
        self._times = times  # start, end, start, end, ...
        self._places = places  # worker-type index, GPUs, ...
        self._worker_types = worker_types

    def __len__(self) -> int:
        return len(self._places) // 2

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
        times, places = self._times, self._places
        return Segment(
            times[2 * index],
            times[2 * index + 1],
            self._worker_types[places[2 * index]],
            places[2 * index + 1],
        )

    def __iter__(self) -> Iterator[Segment]:
        times, places, names = self._times, self._places, self._worker_types
        for i in range(0, len(places), 2):
            yield Segment(times[i], times[i + 1], names[places[i]], places[i + 1])

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


class _JobTrack:
    """A job's timeline while it is recorded."""

    __slots__ = ("batch_sizes", "job_type", "places", "scale_factor", "times")

    def __init__(self, job_type: str, scale_factor: int, arrival_s: float) -> None:
        self.job_type = job_type
        self.scale_factor = scale_factor
        # Closed segments, packed as PackedSegments keeps them.
        self.times = array("d")
        self.places = array("H")
        size = batch_size_of(job_type)
        self.batch_sizes: list[tuple[float, int]] = [] if size is None else [(arrival_s, size)]

    @classmethod
    def of(cls, job: JobSpec) -> _JobTrack:
        return cls(job.job_type, job.scale_factor, job.arrival_time)


class TimelineRecorder:
    """Fed by the engine: `job_admitted`, `round_planned` then `round_ran` per round,
    `batch_sizes_seen` after a round that may have changed batch sizes."""

    def __init__(self, cluster: Cluster) -> None:
        self.worker_types: list[str] = []
        self.capacity: list[int] = []
        self._columns: dict[str, int] = {}
        self.cluster_changed(cluster)
        self._jobs: dict[int, _JobTrack] = {}
        self._time_s: list[float] = []
        self._busy: list[tuple[int, ...]] = []
        self._queued: list[int] = []
        self._running: list[int] = []
        self._solve_s: list[float] = []
        self._solver_total_s = 0.0
        self._pending: tuple[float, int, float] | None = None
        # Each job's last segment: [start, end, column, GPUs, index of its last round].
        self._open: dict[int, _Segment] = {}

    def cluster_changed(self, cluster: Cluster) -> None:
        """Worker types the cluster gained get a column; capacity is the most seen."""
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
        the mechanism's columns (the assignments' `column` indexes them)."""
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        start, active, solve = pending
        index = len(self._time_s)
        previous = index - 1
        columns = self._columns
        # The mechanism's column -> the timeline's (they differ only after a resize).
        to_column = [columns[w] for w in worker_types]
        busy = [0] * len(self.worker_types)
        running = 0
        open_segments = self._open
        for assignment, unit_progress in zip(planned, progress, strict=True):
            # Unpacked at once: cheaper than named-tuple attributes on this hot path.
            unit, column, _, gpu_ids, _, _, _ = assignment
            _, stopped, exec_s = unit_progress
            gpus = len(gpu_ids)
            column = to_column[column]
            busy[column] += gpus
            held_until = start + exec_s
            members = unit.members
            if len(members) == 1:  # the common case, kept lean
                job = members[0]
                running += 1
                # A job that finished early stops holding its GPUs then.
                end = stopped[0]
                if end > held_until or end < start:
                    end = held_until
                segment = open_segments.get(job.job_id, _NO_SEGMENT)
                if (
                    segment[4] == previous
                    and segment[2] == column
                    and segment[3] == gpus
                ):
                    segment[1] = end
                    segment[4] = index
                else:
                    self._open_segment(job, start, end, column, gpus, index)
                continue
            running += len(members)
            for position, member in enumerate(members):
                end = stopped[position]
                if end > held_until or end < start:
                    end = held_until
                segment = open_segments.get(member.job_id, _NO_SEGMENT)
                if (
                    segment[4] == previous
                    and segment[2] == column
                    and segment[3] == gpus
                ):
                    segment[1] = end
                    segment[4] = index
                else:
                    self._open_segment(member, start, end, column, gpus, index)
        self._time_s.append(start)
        self._busy.append(tuple(busy))
        self._queued.append(active - running)
        self._running.append(running)
        self._solve_s.append(solve)

    def _open_segment(
        self, job: JobState, start: float, end: float, column: int, gpus: int, index: int
    ) -> None:
        """The job runs somewhere new (or after a pause): a new segment, kept open while it
        runs in the following rounds on the same worker type and GPU count."""
        track = self._jobs.get(job.job_id)
        if track is None:  # admitted before a restore: recorded from here on
            track = self._jobs[job.job_id] = _JobTrack.of(job.spec)
        last = self._open.get(job.job_id)
        if last is not None:
            _close(track, last)
        self._open[job.job_id] = [start, end, column, gpus, index]

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

    def _segments_of(
        self, job_id: int, track: _JobTrack, worker_types: tuple[str, ...]
    ) -> PackedSegments:
        """The job's closed segments and its open one (copies: recording goes on)."""
        times, places = array("d", track.times), array("H", track.places)
        last = self._open.get(job_id)
        if last is not None:
            start, end, column, gpus, _ = last
            times.extend((start, end))
            places.extend((int(column), int(gpus)))
        return PackedSegments(times, places, worker_types)

    def timeline(self) -> Timeline:
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
        jobs = tuple(
            JobTimeline(
                job_id,
                track.job_type,
                track.scale_factor,
                self._segments_of(job_id, track, worker_types),
                tuple(track.batch_sizes),
            )
            for job_id, track in sorted(self._jobs.items())
        )
        return Timeline(worker_types, tuple(self.capacity), rounds, jobs)


def _close(track: _JobTrack, segment: _Segment) -> None:
    start, end, column, gpus, _ = segment
    track.times.extend((start, end))
    track.places.extend((int(column), int(gpus)))


def _note_batch_size(track: _JobTrack, time_s: float, job_type: str) -> None:
    size = batch_size_of(job_type)
    if size is None:
        return
    sizes = track.batch_sizes
    if not sizes or sizes[-1][1] != size:
        sizes.append((time_s, size))
