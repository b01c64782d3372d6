"""Measured throughputs, smoothed: what the scheduler believes a job type runs at.

A job type starts from a prior (the run's throughput table where it has the type, else a
default estimate), is replaced by its first measurement and then follows an exponentially
weighted moving average of the measurements jobs report, so a trace runs with no profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shock.core.throughputs import JobKey, ThroughputTable

DEFAULT_STEPS_PER_S = 1.0


@dataclass(slots=True)
class ThroughputEstimates:
    prior: ThroughputTable
    alpha: float = 0.3  # weight of a new measurement
    default_steps_per_s: float = DEFAULT_STEPS_PER_S
    # (job type, scale factor, worker type) -> (steps/s, measurements)
    measured: dict[tuple[str, int, str], tuple[float, int]] = field(default_factory=dict)

    def estimate(self, job_type: str, scale_factor: int, worker_type: str) -> float:
        seen = self.measured.get((job_type, scale_factor, worker_type))
        if seen is not None:
            return seen[0]
        return self.prior.throughput(job_type, scale_factor, worker_type) or (
            self.default_steps_per_s
        )

    def observe(
        self, job_type: str, scale_factor: int, worker_type: str, steps_per_s: float
    ) -> float:
        """Fold in one measurement; returns the new estimate."""
        key = (job_type, scale_factor, worker_type)
        seen = self.measured.get(key)
        if seen is None:
            value, count = steps_per_s, 1
        else:
            value = (1 - self.alpha) * seen[0] + self.alpha * steps_per_s
            count = seen[1] + 1
        self.measured[key] = (value, count)
        return value

    def table(self, jobs: list[JobKey], worker_types: tuple[str, ...]) -> ThroughputTable:
        """A throughput table with the current estimate of every job on every worker type."""
        table = ThroughputTable(source="measured (EWMA of job reports)")
        for job_type, scale_factor in jobs:
            for worker_type in worker_types:
                table.set(
                    job_type, scale_factor, worker_type,
                    self.estimate(job_type, scale_factor, worker_type),
                )
        return table

    def measured_table(self) -> ThroughputTable:
        """Only what was measured, in Gavel's table form."""
        table = ThroughputTable(source="measured (EWMA of job reports)")
        for (job_type, scale_factor, worker_type), (value, _) in self.measured.items():
            table.set(job_type, scale_factor, worker_type, value)
        return table
