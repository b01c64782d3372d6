"""Measured throughputs, smoothed, fed back into a throughput table.

A running job reports steps/s now and then; one report is noisy (start-up, a co-located job,
a checkpoint write). `MeasuredThroughputs` keeps an exponentially weighted moving average per
(job type, scale factor, worker type) and writes the averages into a `ThroughputTable`, so a
scheduler can start from a prior table (or none) and converge to what this cluster measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shock.core.throughputs import JobKey, ThroughputTable

DEFAULT_SMOOTHING = 0.3  # weight of the newest report


@dataclass(frozen=True, slots=True)
class ThroughputEstimate:
    steps_per_s: float
    reports: int


class MeasuredThroughputs:
    """EWMA of reported steps/s: estimate <- a * report + (1 - a) * estimate."""

    def __init__(self, smoothing: float = DEFAULT_SMOOTHING) -> None:
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        self.smoothing = smoothing
        self._estimates: dict[tuple[JobKey, str], ThroughputEstimate] = {}

    def observe(
        self, job_type: str, worker_type: str, steps_per_s: float, scale_factor: int = 1
    ) -> float:
        """Fold one report in; returns the new estimate. Reports must be finite and > 0."""
        if not math.isfinite(steps_per_s) or steps_per_s <= 0:
            raise ValueError(f"steps_per_s must be finite and > 0, got {steps_per_s}")
        key = ((job_type, scale_factor), worker_type)
        previous = self._estimates.get(key)
        if previous is None:
            value = steps_per_s
            reports = 1
        else:
            value = self.smoothing * steps_per_s + (1.0 - self.smoothing) * previous.steps_per_s
            reports = previous.reports + 1
        self._estimates[key] = ThroughputEstimate(value, reports)
        return value

    def estimate(
        self, job_type: str, worker_type: str, scale_factor: int = 1
    ) -> ThroughputEstimate | None:
        return self._estimates.get(((job_type, scale_factor), worker_type))

    def apply_to(self, table: ThroughputTable, min_reports: int = 1) -> int:
        """Write every estimate with at least `min_reports` reports into the table (isolated
        throughputs; co-location pairs are left alone). Returns how many entries it wrote."""
        written = 0
        for ((job_type, scale_factor), worker_type), estimate in self._estimates.items():
            if estimate.reports >= min_reports:
                table.set(job_type, scale_factor, worker_type, estimate.steps_per_s)
                written += 1
        return written

    def to_table(self, min_reports: int = 1) -> ThroughputTable:
        table = ThroughputTable(source="<measured>")
        self.apply_to(table, min_reports)
        return table
