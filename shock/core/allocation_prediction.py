"""The input of the next allocation, as it will most likely be.

Made twice over, by the same functions:
- by the run's process after each allocation, from the real state: when the next one may
  come, which jobs will have left by then (their steps left against their progress in an
  average round, and in this one once its choice is made) and which will have arrived;
- by the allocation worker one allocation further: from the allocation it has just computed
  (whose shares give the jobs' progress after it) and a `NextStep` the run's process sent
  with the request. It computes that allocation too while it would otherwise wait, so that
  the run's next request usually finds its answer made.

A prediction is only ever a guess: an answer is used when its input equals the real one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.core.model import JobSpec
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.throughputs import ThroughputTable


class NoJobViews(Exception):
    """A predicted input has no job views; a policy that reads them cannot be predicted."""


def _no_job_views() -> tuple[PolicyJob, ...]:
    raise NoJobViews


_OWN_METHODS = frozenset({"fields_read", "field"})


class PredictedInput(PolicyInput):
    """A policy input for a predicted set of jobs, that records the fields a policy reads
    (it has no job views)."""

    def __getattribute__(self, name: str) -> Any:
        if name[0] != "_" and name not in _OWN_METHODS:
            reads = object.__getattribute__(self, "__dict__").setdefault("_reads", set())
            reads.add(name)
        return object.__getattribute__(self, name)

    def fields_read(self) -> frozenset[str]:
        return frozenset(object.__getattribute__(self, "__dict__").get("_reads", ()))

    def field(self, name: str) -> Any:
        """A field's value, not recorded as read."""
        return object.__getattribute__(self, name)


@dataclass(frozen=True, slots=True)
class PredictedJobs:
    """What a predicted input holds besides the run's fixed table: sent to the worker."""

    job_ids: np.ndarray  # by id
    scale_factors: np.ndarray
    priority_weights: np.ndarray
    throughputs: np.ndarray
    now: float
    worker_types: tuple[str, ...]
    capacity: np.ndarray
    prices: np.ndarray | None
    round_length_s: float | None
    entity_weights: Mapping[str, float] | None

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _predicted_jobs_of,
            (
                packed(self.job_ids),
                packed(self.scale_factors),
                packed(self.priority_weights),
                packed(self.throughputs),
                self.now,
                self.worker_types,
                packed(self.capacity),
                None if self.prices is None else packed(self.prices),
                self.round_length_s,
                self.entity_weights,
            ),
        )

    def value(self, name: str, table: ThroughputTable, ids: tuple[int, ...]) -> Any:
        """The predicted input's field `name` (`ids`: the job ids as a tuple), without
        building it; `MISSING` for a name it has no value for."""
        if name == "job_ids":
            return ids
        if name == "table":
            return table
        return getattr(self, name, MISSING) if name in _SENT else MISSING

    def input(self, table: ThroughputTable) -> PredictedInput:
        problem = PredictedInput.of_job_columns(
            _no_job_views,
            tuple(self.job_ids.tolist()),
            self.scale_factors,
            self.priority_weights,
            now=self.now,
            worker_types=self.worker_types,
            capacity=self.capacity,
            throughputs=self.throughputs,
            table=table,
            prices=self.prices,
            round_length_s=self.round_length_s,
            entity_weights=self.entity_weights,
        )
        assert isinstance(problem, PredictedInput)
        return problem


MISSING = object()
_SENT = frozenset(PredictedJobs.__slots__)

# An array as pickled between the run's process and the worker: its dtype, shape and bytes.
# (Pickling a numpy array itself costs several microseconds, and a request and its answer
# hold several.)
PackedArray = tuple[str, tuple[int, ...], bytes]


def packed(array: np.ndarray) -> PackedArray:
    return array.dtype.str, array.shape, array.tobytes()


def unpacked(state: PackedArray) -> np.ndarray:
    dtype, shape, data = state
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _predicted_jobs_of(
    job_ids: PackedArray,
    scale_factors: PackedArray,
    priority_weights: PackedArray,
    throughputs: PackedArray,
    now: float,
    worker_types: tuple[str, ...],
    capacity: PackedArray,
    prices: PackedArray | None,
    round_length_s: float | None,
    entity_weights: Mapping[str, float] | None,
) -> PredictedJobs:
    return PredictedJobs(
        unpacked(job_ids),
        unpacked(scale_factors),
        unpacked(priority_weights),
        unpacked(throughputs),
        now,
        worker_types,
        unpacked(capacity),
        None if prices is None else unpacked(prices),
        round_length_s,
        entity_weights,
    )


def same_value(real: Any, predicted: Any) -> bool:
    """Whether a field of the real input equals the predicted one exactly (arrays: same
    dtype, shape and elements)."""
    if real is predicted:
        return True
    if isinstance(real, np.ndarray) or isinstance(predicted, np.ndarray):
        return (
            isinstance(real, np.ndarray)
            and isinstance(predicted, np.ndarray)
            and real.dtype == predicted.dtype
            and real.shape == predicted.shape
            and bool((real == predicted).all())  # (np.array_equal, less its checks)
        )
    return type(real) is type(predicted) and bool(real == predicted)


@dataclass(frozen=True, slots=True)
class ArrivalTable:
    """The run's jobs in arrival order, as columns: sent to the worker once (and again when
    the jobs change), so that a `NextStep` names the arrivals after it by an index."""

    arrival_s: np.ndarray
    job_ids: np.ndarray
    scale_factors: np.ndarray
    priority_weights: np.ndarray
    total_steps: np.ndarray
    rates: np.ndarray  # per worker type

    @classmethod
    def of(
        cls, jobs: Sequence[JobSpec], rates_of: Callable[[JobSpec], Sequence[float]], width: int
    ) -> ArrivalTable:
        count = len(jobs)
        return cls(
            np.fromiter((job.arrival_time for job in jobs), np.float64, count),
            np.fromiter((job.job_id for job in jobs), np.int64, count),
            np.fromiter((job.scale_factor for job in jobs), np.int64, count),
            np.fromiter((job.priority_weight for job in jobs), np.float64, count),
            np.fromiter((job.total_steps for job in jobs), np.float64, count),
            np.array([rates_of(job) for job in jobs], dtype=np.float64).reshape(count, width),
        )

    def arrived_by(self, first: int, time_s: float) -> int:
        """The index after the jobs from `first` on that arrive by `time_s`."""
        return first + int(np.searchsorted(self.arrival_s[first:], time_s, side="right"))

    def next_arrival_s(self, first: int) -> float:
        """When the job at `first` arrives (infinity: there is none)."""
        return float(self.arrival_s[first]) if first < len(self.arrival_s) else np.inf

    def columns(self, jobs: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ids, scale factors, priority weights and rates of `jobs`."""
        return (
            self.job_ids[jobs],
            self.scale_factors[jobs],
            self.priority_weights[jobs],
            self.rates[jobs],
        )


@dataclass(frozen=True, slots=True)
class NextStep:
    """What the worker needs to predict the allocation after the one it is asked for."""

    steps_left: np.ndarray  # each job's when the asked-for allocation comes (request order)
    first_round: int  # the first round after it at which the next one may come
    waits_for_change: bool  # the next comes only once a job arrives or leaves
    round_length_s: float
    next_arrival: int  # the first job of the `ArrivalTable` to arrive after it

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _next_step_of,
            (
                packed(self.steps_left),
                self.first_round,
                self.waits_for_change,
                self.round_length_s,
                self.next_arrival,
            ),
        )


def _next_step_of(
    steps_left: PackedArray,
    first_round: int,
    waits_for_change: bool,
    round_length_s: float,
    next_arrival: int,
) -> NextStep:
    return NextStep(
        unpacked(steps_left), first_round, waits_for_change, round_length_s, next_arrival
    )


def gone_by_round(
    steps_left: np.ndarray, this_round: np.ndarray, per_round: np.ndarray
) -> np.ndarray:
    """For each job, the round start (counted from now: 1 is the next one) by which it will
    have finished, if it makes `this_round` steps in this round and `per_round` in each round
    after (infinity: never)."""
    remaining = steps_left - this_round
    gone = np.full(len(remaining), np.inf)
    np.divide(remaining, per_round, out=gone, where=per_round > 0)
    np.ceil(gone, out=gone)
    gone += 1.0
    gone[remaining <= 0] = 1.0
    return gone


def first_round(
    now: float, last_reset_s: float, round_length_s: float, interval_s: float, every_round: bool
) -> int:
    """The first round start (counted from now) at which an allocation may come: the next
    one, or the first after the minimum interval since the last."""
    first, start = 1, now + round_length_s
    while not every_round and start - last_reset_s < interval_s:
        first, start = first + 1, start + round_length_s
    return first


def allocation_round(
    first: int,
    gone_at: np.ndarray,
    next_arrival_in_s: float,
    round_length_s: float,
    waits_for_change: bool,
) -> float:
    """The round start (counted from now) of the next allocation: `first`, or, where it
    waits for a change, the first at which a job may have left or arrived (infinity: none)."""
    if not waits_for_change:
        return first
    soonest = min(
        float(gone_at.min(initial=np.inf)),
        max(1.0, np.ceil(next_arrival_in_s / round_length_s))
        if next_arrival_in_s < np.inf
        else np.inf,
    )
    if soonest == np.inf:
        return np.inf
    return max(first, int(soonest))


def predicted_jobs(
    staying: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    arriving: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    steps_left: np.ndarray | None,
    **context: Any,
) -> tuple[PredictedJobs, np.ndarray | None]:
    """The jobs that stay and those that arrive (each as ids, scale factors, priority weights,
    rates), by id, with the input's other fields from `context`; and `steps_left` (the staying
    jobs' then the arriving ones', if given) in the same order."""
    job_ids, gpus, weights, throughputs = staying
    if len(arriving[0]):
        job_ids, gpus, weights, throughputs = (
            np.concatenate(pair) for pair in zip(staying, arriving, strict=True)
        )
        if len(job_ids) > 1 and not (job_ids[1:] > job_ids[:-1]).all():
            # (Usually not: jobs arrive in id order.)
            by_id = np.argsort(job_ids, kind="stable")
            job_ids, gpus = job_ids[by_id], gpus[by_id]
            weights, throughputs = weights[by_id], throughputs[by_id]
            if steps_left is not None:
                steps_left = steps_left[by_id]
    return PredictedJobs(job_ids, gpus, weights, throughputs, **context), steps_left


def predict_next(
    jobs: PredictedJobs, fractions: np.ndarray, step: NextStep, arrivals: ArrivalTable
) -> PredictedJobs | None:
    """The allocation after `jobs`', predicted as the run's process will once `jobs`' comes
    with shares `fractions` (rows: `jobs`' jobs): each job's progress in its first round and
    after is its allocation's average (the run's process knows the first round's choice).
    None where no allocation is due."""
    length = step.round_length_s
    per_round = (fractions * jobs.throughputs).sum(axis=1) * length
    gone_at = gone_by_round(step.steps_left, per_round, per_round)
    start = jobs.now
    target = allocation_round(
        step.first_round,
        gone_at,
        arrivals.next_arrival_s(step.next_arrival) - start,
        length,
        step.waits_for_change,
    )
    if target == np.inf:
        return None
    until = start + target * length
    arriving = slice(step.next_arrival, arrivals.arrived_by(step.next_arrival, until))
    staying = np.flatnonzero(gone_at > target)
    predicted, _ = predicted_jobs(
        (
            jobs.job_ids[staying],
            jobs.scale_factors[staying],
            jobs.priority_weights[staying],
            jobs.throughputs[staying],
        ),
        arrivals.columns(arriving),
        None,
        now=until,
        worker_types=jobs.worker_types,
        capacity=jobs.capacity,
        prices=jobs.prices,
        round_length_s=jobs.round_length_s,
        entity_weights=jobs.entity_weights,
    )
    return predicted
