"""Run metrics from per-job records: JCT statistics, makespan, utilisation, fairness.

Finish-time fairness (Themis): rho_j = JCT_j / (T_alone_j * max(1, N_j / G)), where T_alone_j
is job j's run time alone on the fastest worker type at its scale factor, G the cluster's
GPUs and N_j the time-averaged number of jobs in the system (queued or running) while j was.
rho <= 1 means the job did at least as well as with a 1/N share of the cluster. A job is
counted unfair when rho > 1.05.

Shockwave's definition (`--preset shockwave`) uses N = the number of jobs in the whole trace
for every job, and T_alone at the job's own batch-size schedule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from shock.core.results import UNFAIR_RHO, JobRecord, Metrics, RunCounters


def average_contention(
    records: Sequence[JobRecord], unfinished: Sequence[tuple[float, float]] = ()
) -> np.ndarray:
    """N_j: time-averaged number of jobs in the system over each job's lifetime. Jobs still
    in the system when the run stopped count as (arrival, stop time) intervals."""
    if not records:
        return np.zeros(0)
    arrivals = np.array([r.arrival_s for r in records])
    completions = np.array([r.completion_s for r in records])
    all_arrivals = np.concatenate([arrivals, [a for a, _ in unfinished]])
    all_completions = np.concatenate([completions, [c for _, c in unfinished]])
    times = np.unique(np.concatenate([all_arrivals, all_completions]))
    # Jobs in the system on [times[k], times[k+1]).
    in_system = np.searchsorted(np.sort(all_arrivals), times, side="right") - np.searchsorted(
        np.sort(all_completions), times, side="right"
    )
    integral = np.concatenate([[0.0], np.cumsum(in_system[:-1] * np.diff(times))])
    start = integral[np.searchsorted(times, arrivals)]
    end = integral[np.searchsorted(times, completions)]
    lifetime = completions - arrivals
    with np.errstate(invalid="ignore", divide="ignore"):
        contention = np.where(lifetime > 0, (end - start) / lifetime, 1.0)
    return np.asarray(contention, dtype=float)


def ftf_rhos(
    records: Sequence[JobRecord],
    total_gpus: int,
    unfinished: Sequence[tuple[float, float]] = (),
    trace_jobs: int | None = None,
) -> np.ndarray:
    """rho of every record; N_j is `trace_jobs` for all jobs when given (Shockwave's rule),
    else the time-averaged number of jobs in the system."""
    if not records:
        return np.zeros(0)
    if trace_jobs is not None:
        contention = np.full(len(records), float(trace_jobs))
    else:
        contention = average_contention(records, unfinished)
    jct = np.array([r.jct_s for r in records])
    alone = np.array([r.isolated_runtime_s for r in records])
    return finish_time_ratio(jct, alone, contention, total_gpus)


def fair_share_runtime(
    isolated_runtime_s: np.ndarray | float, contention: np.ndarray | float, total_gpus: int
) -> np.ndarray:
    """T_ideal: the run time alone on a 1/N share of a G-GPU cluster, T_alone * max(1, N / G)
    (the denominator of rho). Policies that estimate rho before a job ends use it too."""
    slowdown = np.maximum(1.0, np.asarray(contention, dtype=float) / max(total_gpus, 1))
    return np.asarray(isolated_runtime_s, dtype=float) * slowdown


def finish_time_ratio(
    duration_s: np.ndarray | float,
    isolated_runtime_s: np.ndarray | float,
    contention: np.ndarray | float,
    total_gpus: int,
) -> np.ndarray:
    """rho = duration / T_ideal (a JCT, or a projected one); infinite where T_alone is 0."""
    ideal = fair_share_runtime(isolated_runtime_s, contention, total_gpus)
    duration = np.asarray(duration_s, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(ideal > 0, duration / np.where(ideal > 0, ideal, 1.0), np.inf)
    return np.asarray(rho, dtype=float)


def compute_metrics(
    records: Sequence[JobRecord],
    total_gpus: int,
    counters: RunCounters,
    wall_s: float,
    window: tuple[int, int] | None = None,
    unfinished: Sequence[tuple[float, float]] = (),
    trace_jobs: int | None = None,
) -> tuple[Metrics, np.ndarray]:
    """Metrics over the measured jobs (a job-id window [start, end) if given); returns the
    metrics and every job's rho (computed with all jobs, so contention is right)."""
    rhos = ftf_rhos(records, total_gpus, unfinished, trace_jobs)
    measured = [
        i for i, r in enumerate(records) if window is None or window[0] <= r.job_id < window[1]
    ]
    jct = np.array([records[i].jct_s for i in measured])
    measured_rho = rhos[measured] if measured else np.zeros(0)
    if records:
        first = min(r.arrival_s for r in records)
        makespan = max(r.completion_s for r in records) - first
    else:
        makespan = 0.0
    utilization = counters.busy_gpu_seconds / (total_gpus * makespan) if makespan > 0 else 0.0

    ordered = np.sort(jct)

    def pct(q: float) -> float:
        return linear_percentile(ordered, q) if len(ordered) else 0.0

    metrics = Metrics(
        jobs=len(measured),
        avg_jct_s=float(jct.mean()) if len(jct) else 0.0,
        makespan_s=makespan,
        p50_jct_s=pct(50),
        p90_jct_s=pct(90),
        p99_jct_s=pct(99),
        utilization=utilization,
        worst_ftf_rho=float(measured_rho.max()) if len(measured_rho) else 0.0,
        unfair_fraction=float((measured_rho > UNFAIR_RHO).mean()) if len(measured_rho) else 0.0,
        preemptions=counters.preemptions,
        lease_extension_share=(
            counters.lease_extensions / counters.placements if counters.placements else 0.0
        ),
        rounds=counters.rounds,
        allocations=counters.allocations,
        solver_seconds=counters.solver_seconds,
        wall_s=wall_s,
    )
    return metrics, rhos


def linear_percentile(ordered: np.ndarray, q: float) -> float:
    """`np.percentile(values, q)` (its default, linear method) of a sorted, non-empty float
    array, with numpy's own operations in its order, so the result is bit-for-bit the same:
    np.percentile calls np.unique, whose first call imports numpy.ma (~10 ms a run)."""
    n = len(ordered)
    if np.isnan(ordered[-1]):  # (NaNs sort last; numpy's answer is then NaN)
        return float("nan")
    virtual = (n - 1) * float(np.true_divide(q, 100))
    if virtual >= n - 1:
        return float(ordered[-1])
    previous = math.floor(virtual)
    below, above = float(ordered[previous]), float(ordered[previous + 1])
    gamma = virtual - previous
    # numpy's _lerp: from below for gamma < 0.5, back from above otherwise.
    difference = above - below
    if gamma >= 0.5:
        return above - difference * (1 - gamma)
    return below + difference * gamma
