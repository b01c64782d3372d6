"""Measured throughputs, smoothed: what a scheduler believes a job type runs at.

A running job reports steps/s now and then; one report is noisy (start-up, a co-located job,
a checkpoint write). `ThroughputEstimates` starts each (job type, scale factor, worker type)
from a prior (a throughput table where it has the entry, else a default), replaces the prior
by the first report and then follows an exponentially weighted moving average of the reports,
so a trace runs with no profile and converges to what this cluster measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shock.core.throughputs import JobKey, ThroughputTable

DEFAULT_SMOOTHING = 0.3  # weight of the newest report
DEFAULT_STEPS_PER_S = 1.0  # the estimate of a job type neither measured nor in the prior
MEASURED_SOURCE = "measured (EWMA of job reports)"

# (job type, scale factor, worker type)
MeasuredKey = tuple[str, int, str]
# Rates per worker type for a job type the prior lacks, from what was measured of it so far
# (`shock.engine.throughput_estimator.UnknownTypeRates`); None: no estimate.
Fallback = Callable[[JobKey, Mapping[str, float]], Mapping[str, float] | None]


@dataclass(slots=True)
class ThroughputEstimates:
    """EWMA of reported steps/s over a prior: estimate <- s * report + (1 - s) * estimate."""

    prior: ThroughputTable | None = None
    smoothing: float = DEFAULT_SMOOTHING
    default_steps_per_s: float = DEFAULT_STEPS_PER_S
    # What was measured: key -> (smoothed steps/s, reports folded in).
    measured: dict[MeasuredKey, tuple[float, int]] = field(default_factory=dict)
    # Estimates for job types the prior has no rate for (else: the default).
    fallback: Fallback | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.smoothing <= 1.0:
            raise ValueError(f"smoothing must be in (0, 1], got {self.smoothing}")
        if not math.isfinite(self.default_steps_per_s) or self.default_steps_per_s <= 0:
            raise ValueError(
                f"default_steps_per_s must be finite and > 0, got {self.default_steps_per_s}"
            )

    def estimate(self, job_type: str, scale_factor: int, worker_type: str) -> float:
        """The measured average, else the prior's entry, else the default."""
        seen = self.measured.get((job_type, scale_factor, worker_type))
        if seen is not None:
            return seen[0]
        prior = 0.0
        if self.prior is not None:
            prior = self.prior.throughput(job_type, scale_factor, worker_type)
        if prior > 0:
            return prior
        if self.fallback is not None:
            measured = self.measured_of(job_type, scale_factor)
            estimated = self.fallback((job_type, scale_factor), measured)
            rate = 0.0 if estimated is None else estimated.get(worker_type, 0.0)
            if rate > 0:
                return rate
        return self.default_steps_per_s

    def measured_of(self, job_type: str, scale_factor: int) -> dict[str, float]:
        """The measured estimates of one job type, by worker type."""
        return {
            w: value
            for (t, s, w), (value, _) in self.measured.items()
            if t == job_type and s == scale_factor
        }

    def reports(self, job_type: str, scale_factor: int, worker_type: str) -> int:
        """How many reports the estimate folds in (0: not measured)."""
        seen = self.measured.get((job_type, scale_factor, worker_type))
        return 0 if seen is None else seen[1]

    def observe(
        self, job_type: str, scale_factor: int, worker_type: str, steps_per_s: float
    ) -> float:
        """Fold in one report; returns the new estimate. A report that is no throughput
        (not finite, or <= 0) is left out: one bad report never poisons the estimate."""
        key = (job_type, scale_factor, worker_type)
        if not math.isfinite(steps_per_s) or steps_per_s <= 0:
            return self.estimate(*key)
        seen = self.measured.get(key)
        if seen is None:
            value, count = steps_per_s, 1
        else:
            value = self.smoothing * steps_per_s + (1.0 - self.smoothing) * seen[0]
            count = seen[1] + 1
        self.measured[key] = (value, count)
        return value

    def table(self, jobs: list[JobKey], worker_types: tuple[str, ...]) -> ThroughputTable:
        """A throughput table with the current estimate of every job on every worker type."""
        table = ThroughputTable(source=MEASURED_SOURCE)
        for job_type, scale_factor in jobs:
            for worker_type in worker_types:
                value = self.estimate(job_type, scale_factor, worker_type)
                table.set(job_type, scale_factor, worker_type, value)
        return table

    def measured_table(self, min_reports: int = 1) -> ThroughputTable:
        """Only what was measured (at least `min_reports` reports), in Gavel's table form."""
        table = ThroughputTable(source=MEASURED_SOURCE)
        self.apply_to(table, min_reports)
        return table

    def apply_to(self, table: ThroughputTable, min_reports: int = 1) -> int:
        """Write every estimate of at least `min_reports` reports into `table` (isolated
        throughputs; co-location pairs are left alone). Returns how many entries it wrote."""
        written = 0
        for (job_type, scale_factor, worker_type), (value, count) in self.measured.items():
            if count >= min_reports:
                table.set(job_type, scale_factor, worker_type, value)
                written += 1
        return written
