"""Jobs whose batch size changes while they train (Accordion, GNS).

A dynamic job's work is counted in epochs. Its epoch e has the batch size its adaptation
model gives; while at batch size b it runs ceil(samples / b) steps per epoch at the table's
isolated throughput of `<model> (batch size b)`. When its batch size changes, the steps it has
done and its total steps are rescaled to the new steps per epoch, so completed and total
epochs stay the same (the total to within one step: it is rounded up to a whole step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import PluginRegistry
from shock.core.throughputs import ThroughputTable
from shock.engine.epochs import (
    epoch_durations,
    job_type_with_batch_size,
    num_epochs,
    steps_per_epoch,
)
from shock.engine.mechanism import Mechanism
from shock.engine.units import JobState


@dataclass(frozen=True, slots=True)
class BatchSchedule:
    """A dynamic job's batch size per epoch and its total (possibly fractional) epochs."""

    model: str
    scale_factor: int
    batch_sizes: tuple[int, ...]
    total_epochs: float  # total steps at the initial batch size / its steps per epoch
    isolated_runtime_s: float  # alone, on its fastest worker type at every batch size

    def batch_size_at(self, epochs_done: float) -> int:
        """The batch size of the epoch the job is in after `epochs_done` epochs."""
        return self.batch_sizes[min(int(epochs_done), len(self.batch_sizes) - 1)]


@dataclass(frozen=True, slots=True)
class Rescaled:
    """A job's step counts after a batch-size change."""

    job_type: str
    total_steps: int
    steps_done: float


def rescale(
    schedule: BatchSchedule, steps_done: float, old_batch_size: int, new_batch_size: int
) -> Rescaled:
    """Steps in units of the new batch size that keep completed and total epochs."""
    epochs_done = steps_done / steps_per_epoch(schedule.model, old_batch_size)
    per_epoch = steps_per_epoch(schedule.model, new_batch_size)
    done = epochs_done * per_epoch
    total = max(math.ceil(schedule.total_epochs * per_epoch - 1e-9), math.floor(done) + 1)
    return Rescaled(job_type_with_batch_size(schedule.model, new_batch_size), total, done)


def batch_schedules(
    jobs: Iterable[JobSpec],
    registry: PluginRegistry,
    table: ThroughputTable,
    worker_types: tuple[str, ...],
    source: str,
) -> dict[int, BatchSchedule]:
    """The schedule of every job whose batch size changes (static jobs have none)."""
    schedules: dict[int, BatchSchedule] = {}
    for job in jobs:
        if job.mode == "static":
            continue
        adaptation = registry.get("adaptation", job.mode)
        sizes = tuple(adaptation.batch_sizes(job, num_epochs(job, source)))
        runs = _runs(sizes)
        if len(runs.sizes) <= 1:
            continue
        model = job.model_family
        initial = sizes[0]
        total_epochs = job.total_steps / steps_per_epoch(model, initial)
        # (steps per epoch, fastest isolated rate) per batch size, in order of first
        # appearance: a job has a few sizes over many epochs, in a few runs of equal size.
        steps_of: dict[int, float] = {}
        rate_of: dict[int, float] = {}
        for size in dict.fromkeys(runs.sizes):
            job_type = job_type_with_batch_size(model, size)
            rate = max(table.throughput(job_type, job.scale_factor, w) for w in worker_types)
            if rate <= 0:
                raise InputError(
                    f"throughput table {table.source} has no throughput for '{job_type}' "
                    f"at scale factor {job.scale_factor} on {', '.join(worker_types)} (the "
                    f"job's {job.mode} schedule reaches batch size {size})",
                    path=source,
                    line=job.source_line,
                    field="job_type",
                )
            steps_of[size] = steps_per_epoch(model, size)
            rate_of[size] = rate
        schedules[job.job_id] = BatchSchedule(
            model,
            job.scale_factor,
            sizes,
            total_epochs,
            _alone_s(runs, total_epochs, steps_of, rate_of),
        )
    return schedules


@dataclass(frozen=True, slots=True)
class _Runs:
    """A batch-size pattern as runs of equal sizes: run i is `counts[i]` epochs of `sizes[i]`."""

    sizes: tuple[int, ...]
    counts: np.ndarray
    epochs: int


def _runs(pattern: Sequence[int]) -> _Runs:
    """Run-length encoding of a pattern (thousands of epochs, a handful of runs)."""
    values = np.fromiter(pattern, np.int64, len(pattern))
    if not len(values):
        return _Runs((), np.zeros(0, np.int64), 0)
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    counts = np.diff(np.append(starts, len(values)))
    return _Runs(tuple(values[starts].tolist()), counts, len(values))


def _alone_s(
    runs: _Runs,
    total_epochs: float,
    steps_of: dict[int, float],
    rate_of: dict[int, float],
) -> float:
    """Sum over epochs of min(1, total - epoch) x steps / rate at that epoch's batch size, as
    arrays: the same products and quotients, added one after another in epoch order."""
    fraction = np.minimum(1.0, total_epochs - np.arange(runs.epochs, dtype=np.float64))
    steps = np.repeat(np.array([steps_of[size] for size in runs.sizes], np.float64), runs.counts)
    rates = np.repeat(np.array([rate_of[size] for size in runs.sizes], np.float64), runs.counts)
    terms = fraction * steps / rates
    # (accumulate adds in order, from 0.0, unlike sum)
    return float(np.add.accumulate(np.concatenate(([0.0], terms)))[-1])


def whole_epochs_alone_s(
    job: JobSpec,
    registry: PluginRegistry,
    table: ThroughputTable,
    worker_types: tuple[str, ...],
    source: str,
    pattern: Sequence[int] | None = None,
) -> float | None:
    """Shockwave's run time alone, the T_alone of its rho: the job's per-epoch profile summed
    over all its epochs, the last one whole, each (samples / bs) / isolated throughput at
    that epoch's batch size, on the worker type where that is shortest. None when the job's
    epochs are unknown (a model without a dataset size) or no worker type runs every size.
    `pattern`: the job's batch size per epoch when already drawn (its schedule's)."""
    if pattern is None:
        try:
            pattern = registry.get("adaptation", job.mode).batch_sizes(job, num_epochs(job, source))
        except InputError:
            return None
    runs = _runs(pattern)
    totals = []
    for worker_type in worker_types:
        try:
            by_size = epoch_durations(job, runs.sizes, table, worker_type, source)
        except InputError:
            continue
        durations = np.array([by_size[size] for size in runs.sizes], np.float64)
        # Python's sum over the per-epoch durations, as the profile's total adds them.
        totals.append(sum(np.repeat(durations, runs.counts).tolist()))
    return min(totals) if totals else None


def follow_schedule(mechanism: Mechanism, job: JobState, schedule: BatchSchedule) -> bool:
    """Switch an active job to the batch size of the epoch it is in, if that changed (at a
    round boundary); return whether it changed."""
    current = job.spec.batch_size
    if current is None:
        return False
    epochs_done = job.steps_done / steps_per_epoch(schedule.model, current)
    target = schedule.batch_size_at(epochs_done)
    if target == current:
        return False
    new = rescale(schedule, job.steps_done, current, target)
    mechanism.change_job_type(job, new.job_type, new.total_steps, new.steps_done)
    return True
