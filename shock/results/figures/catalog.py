"""The figure kinds by name, with one line each (no matplotlib import: the CLI's help reads it)."""

from __future__ import annotations

DESCRIPTIONS: dict[str, str] = {
    "jct-cdf": "CDF of job completion times, one line per run",
    "rho-cdf": "CDF of finish-time fairness ρ, one line per run",
    "summary": "makespan, average JCT, worst ρ, unfair share as bars relative to a baseline run",
    "utilization": "GPU utilisation over time per worker type",
    "queue": "queued and running jobs over time",
    "gantt": "jobs × time, coloured by worker type, batch-size changes marked",
    "solve-time": "allocation solve time per round",
    "jct-vs-load": "a metric (--metric; average JCT by default) against the load axis of a "
    "sweep, one line per policy, the mean over seeds with their spread",
}
