"""Tiresias (Gu et al., NSDI'19): discretised two-dimensional attained-service scheduling.

A job's attained service is its time on GPUs times its GPUs (GPU-seconds), counted since it
arrived or was last promoted. The thresholds cut it into queues; a job starts in the top one
and moves down as it crosses them. Higher queues run first; within a queue `tiresias` (2D-LAS)
runs jobs in the order they entered it and `tiresias_gittins` (2D-Gittins) by their Gittins
index (highest first), computed from a distribution of job service. Jobs are walked in that
order and each gets a whole gang on the fastest worker type with room (a job that does not fit
is skipped, later ones may still run); the allocation is recomputed every round, so a job
demoted below a waiting one is preempted at the round boundary.

Starvation knob (`starvation_factor` K > 0): a job below the top queue that has waited, since
it first ran after its arrival or last promotion, at least K times the time it has run since
then goes back to the top queue with its attained service counted from zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from shock.api import PolicyInput, PolicyJob, Register, by_job, hookimpl, job_keyed, typed_options
from shock.plugins.policies.gittins_index import ServiceDistribution, read_samples
from shock.plugins.policies.orderings import OrderingPolicy

# Tiresias's simulator (jobs.py): three queues cut at 3250 and 7200 GPU-seconds, and a static
# Gittins quantum of 3250 GPU-seconds; its default `dlas-gpu` runs without the starvation knob.
DEFAULT_THRESHOLDS = "3250,7200"
DEFAULT_QUANTUM_S = 3250.0
HISTORY = "history"


def parse_thresholds(text: str) -> tuple[float, ...]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(
            f"queue_thresholds must be comma-separated GPU-seconds, got '{text}'"
        ) from None
    if any(not value > 0 or value == float("inf") for value in values):
        raise ValueError(f"queue_thresholds must be finite and > 0, got '{text}'")
    if any(b <= a for a, b in pairwise(values)):
        raise ValueError(f"queue_thresholds must increase, got '{text}'")
    return values


@dataclass(frozen=True)
class TiresiasOptions:
    # GPU-seconds where the queues are cut; K thresholds give K + 1 queues ("" gives one).
    queue_thresholds: str = DEFAULT_THRESHOLDS
    # K of the starvation knob; 0 turns it off.
    starvation_factor: float = 0.0

    def __post_init__(self) -> None:
        parse_thresholds(self.queue_thresholds)
        if not self.starvation_factor >= 0 or self.starvation_factor == float("inf"):
            raise ValueError(f"starvation_factor must be >= 0, got {self.starvation_factor}")

    @property
    def thresholds(self) -> tuple[float, ...]:
        return parse_thresholds(self.queue_thresholds)


@dataclass(frozen=True)
class GittinsOptions(TiresiasOptions):
    # The service quantum Δ in GPU-seconds; 0 takes the supremum over every Δ.
    gittins_quantum: float = DEFAULT_QUANTUM_S
    # "history": the total service of every job seen so far; else a file of samples.
    service_samples: str = HISTORY

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.gittins_quantum >= 0 or self.gittins_quantum == float("inf"):
            raise ValueError(f"gittins_quantum must be >= 0, got {self.gittins_quantum}")


@dataclass(slots=True)
class QueueState:
    """What Tiresias remembers of one job between rounds."""

    queue: int
    entered_s: float  # when it entered its queue (FIFO order within it)
    base_run_s: float  # its time on GPUs at arrival or last promotion
    last_run_s: float  # its time on GPUs when last seen
    waited_s: float = 0.0  # waiting since it first ran after arrival or last promotion

    def to_json(self) -> list[float]:
        return [self.queue, self.entered_s, self.base_run_s, self.last_run_s, self.waited_s]

    @classmethod
    def from_json(cls, data: Any) -> QueueState:
        queue, entered, base, last, waited = data
        return cls(int(queue), float(entered), float(base), float(last), float(waited))


def queue_of(attained: float, thresholds: tuple[float, ...]) -> int:
    return sum(1 for threshold in thresholds if attained >= threshold)


class Tiresias(OrderingPolicy):
    name = "tiresias"
    description = "Tiresias 2D-LAS: GPU-time queues, FIFO within a queue, preemptive"

    def __init__(self, options: TiresiasOptions | None = None) -> None:
        self.options = options or TiresiasOptions()
        self._thresholds = self.options.thresholds
        self._jobs: dict[int, QueueState] = {}
        self._last_now: float | None = None

    def _fresh(self) -> Tiresias:
        return Tiresias(self.options)

    def for_run(self, seed: int) -> Tiresias:
        return self._fresh()

    def with_options(self, values: Mapping[str, str]) -> Tiresias:
        return Tiresias(typed_options(self.options, values, self.name))

    def snapshot(self) -> dict[str, Any]:
        return {
            "jobs": by_job({job_id: s.to_json() for job_id, s in self._jobs.items()}),
            "last_now": self._last_now,
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._jobs = job_keyed(snapshot["jobs"], QueueState.from_json)
        last = snapshot["last_now"]
        self._last_now = None if last is None else float(last)

    def queue(self, job_id: int) -> int:
        """The queue a job was in at the last allocation (0 is the top)."""
        return self._jobs[job_id].queue

    def order(self, problem: PolicyInput) -> list[int]:
        self._observe(problem)
        keys = [self._within_queue(problem, row) for row in range(len(problem.jobs))]
        return sorted(
            range(len(problem.jobs)),
            key=lambda row: (
                self._jobs[problem.jobs[row].job_id].queue,
                keys[row],
                problem.jobs[row].arrival_time,
                problem.jobs[row].job_id,
            ),
        )

    def _within_queue(self, problem: PolicyInput, row: int) -> float:
        return self._jobs[problem.jobs[row].job_id].entered_s

    def attained(self, job: PolicyJob) -> float:
        """GPU-seconds since the job arrived or was last promoted."""
        state = self._jobs.get(job.job_id)
        base = 0.0 if state is None else state.base_run_s
        return (job.time_run_s - base) * job.scale_factor

    def _observe(self, problem: PolicyInput) -> None:
        now = problem.now
        elapsed = 0.0 if self._last_now is None else max(0.0, now - self._last_now)
        active = {job.job_id for job in problem.jobs}
        self._jobs = {k: v for k, v in self._jobs.items() if k in active}
        factor = self.options.starvation_factor
        for job in problem.jobs:
            state = self._jobs.get(job.job_id)
            ran = 0.0
            if state is None:
                # First seen: its service counts from its arrival (it was never promoted).
                state = QueueState(0, job.arrival_time, 0.0, job.time_run_s)
                self._jobs[job.job_id] = state
            else:
                ran = job.time_run_s - state.last_run_s
                if job.time_run_s > state.base_run_s:
                    state.waited_s += max(0.0, elapsed - ran)
                state.last_run_s = job.time_run_s
            executed = job.time_run_s - state.base_run_s
            # Only a job that waited through the last round is promoted (as the paper's
            # simulator checks pending jobs only).
            if (
                factor > 0
                and state.queue > 0
                and ran == 0
                and executed > 0
                and (state.waited_s >= factor * executed)
            ):
                state.queue, state.entered_s = 0, now
                state.base_run_s, state.waited_s = job.time_run_s, 0.0
                continue
            attained = executed * job.scale_factor
            queue = queue_of(attained, self._thresholds)
            if queue != state.queue:
                # It crossed the threshold while running up to now.
                crossed = self._thresholds[queue - 1] if queue > 0 else 0.0
                state.entered_s = max(
                    job.arrival_time, now - (attained - crossed) / job.scale_factor
                )
                state.queue = queue
        self._last_now = now


class TiresiasGittins(Tiresias):
    name = "tiresias_gittins"
    description = "Tiresias 2D-Gittins: GPU-time queues, Gittins index within a queue"

    def __init__(self, options: GittinsOptions | None = None) -> None:
        self.options: GittinsOptions = options or GittinsOptions()
        super().__init__(self.options)
        self._given: ServiceDistribution | None = None
        if self.options.service_samples != HISTORY:
            self._given = ServiceDistribution(read_samples(self.options.service_samples))
        self._seen: dict[int, float] = {}  # job id -> its total service (the history)
        self._history: ServiceDistribution | None = None

    def _fresh(self) -> TiresiasGittins:
        return TiresiasGittins(self.options)

    def for_run(self, seed: int) -> TiresiasGittins:
        return self._fresh()

    def with_options(self, values: Mapping[str, str]) -> TiresiasGittins:
        return TiresiasGittins(typed_options(self.options, values, self.name))

    def snapshot(self) -> dict[str, Any]:
        return {**super().snapshot(), "seen": by_job(self._seen)}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        super().restore(snapshot)
        self._seen = job_keyed(snapshot["seen"], float)
        self._history = None

    def distribution(self) -> ServiceDistribution:
        if self._given is not None:
            return self._given
        if self._history is None:
            self._history = ServiceDistribution(self._seen.values())
        return self._history

    def gittins_index(self, job: PolicyJob) -> float:
        quantum = self.options.gittins_quantum or None
        return self.distribution().index(self.attained(job), quantum)

    def order(self, problem: PolicyInput) -> list[int]:
        if self._given is None:
            self._learn(problem)
        return super().order(problem)

    def _learn(self, problem: PolicyInput) -> None:
        """Each new job's total service (GPU-seconds at its best throughput) joins the history."""
        for row, job in enumerate(problem.jobs):
            if job.job_id in self._seen:
                continue
            best = float(problem.throughputs[row].max(initial=0.0)) * job.speed
            if best > 0:
                self._seen[job.job_id] = job.total_steps / best * job.scale_factor
                self._history = None

    def _within_queue(self, problem: PolicyInput, row: int) -> float:
        return -self.gittins_index(problem.jobs[row])


@hookimpl
def register_policies(register: Register) -> None:
    register(Tiresias())
    register(TiresiasGittins())
