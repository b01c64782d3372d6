"""Shared pieces of the throughput-target policies (finish-time fairness, makespan, cost).

They all reason about a job's effective throughput under an allocation,
    a_j(x) = sum_w T[j, w] x[j, w]   (steps/s; T is per job, already for its gang of sf_j GPUs),
and need a few common inputs: Gavel's heterogeneity-agnostic throughputs, a normalised
throughput for summing over jobs, and LPs in HiGHS' column-wise matrix form.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from shock.api import MatrixLP, PolicyInput

REFERENCE_WORKER_TYPE = "v100"


def subproblem(problem: PolicyInput, rows: np.ndarray, throughputs: np.ndarray) -> PolicyInput:
    """The problem restricted to the jobs where `rows` is true, with the given throughputs
    (already restricted) in place of the original ones."""
    jobs = tuple(job for job, keep in zip(problem.jobs, rows, strict=True) if keep)
    return dataclasses.replace(problem, jobs=jobs, throughputs=throughputs)


def agnostic_throughputs(problem: PolicyInput) -> np.ndarray:
    """Every type as fast as the job's V100 (what Gavel's agnostic variants do).

    Gavel hard-codes 'v100' and fails without one; here a cluster without V100s, or a job the
    table has no V100 throughput for, uses the job's best throughput instead.
    """
    throughputs = problem.throughputs
    m, n = throughputs.shape
    if m == 0 or n == 0:
        return throughputs.copy()
    best = throughputs.max(axis=1)
    if REFERENCE_WORKER_TYPE in problem.worker_types:
        reference = throughputs[:, problem.worker_types.index(REFERENCE_WORKER_TYPE)].copy()
        reference[reference <= 0] = best[reference <= 0]
    else:
        reference = best
    return np.repeat(reference[:, None], n, axis=1)


def normalised_throughput_coefficients(problem: PolicyInput) -> np.ndarray:
    """c[j, w] = w_j T[j, w] / max_v T[j, v]: job j's priority-weighted share of its best
    throughput per unit time on type w (0 for a job that runs nowhere).

    Raw steps/s are not comparable between models (a recommendation model makes thousands of
    steps/s, a ResNet-50 a few), so a sum of them would only favour the fast-stepping models;
    relative to its own best type every job counts between 0 and w_j.
    """
    throughputs = problem.throughputs
    best = throughputs.max(axis=1) if throughputs.shape[1] else np.zeros(len(throughputs))
    safe = np.where(best > 0, best, 1.0)
    weights = np.where(best > 0, problem.priority_weights / safe, 0.0)
    return throughputs * weights[:, None]


def best_solo_rate(throughputs: np.ndarray, scale: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """The most steps/s each job could get with the whole cluster to itself: its time
    (sum <= 1) greedily on its fastest types, at most capacity_w / sf_j on type w."""
    rates = np.zeros(len(throughputs))
    for j in range(len(throughputs)):
        time_left = 1.0
        for w in np.argsort(-throughputs[j], kind="stable"):
            if time_left <= 0 or throughputs[j, w] <= 0:
                break
            share = min(time_left, capacity[w] / scale[j])
            rates[j] += throughputs[j, w] * share
            time_left -= share
    return rates


def csc(
    num_cols: int, rows: np.ndarray, cols: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Triplets (row, col, value) to HiGHS' column-wise (start, index, value)."""
    order = np.lexsort((rows, cols))
    start = np.zeros(num_cols + 1, dtype=np.int32)
    np.cumsum(np.bincount(cols, minlength=num_cols), out=start[1:])
    return start, rows[order].astype(np.int32), values[order].astype(float)


def base_triplets(
    scale: np.ndarray, n: int, first_row: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The shared constraints' entries for columns x[j, w] = j * n + w: rows first_row + j
    (sum_w x[j, w]) and first_row + m + w (sum_j sf_j x[j, w])."""
    m = len(scale)
    jobs = np.repeat(np.arange(m), n)
    types = np.tile(np.arange(n), m)
    cols = np.arange(m * n)
    rows = np.concatenate([first_row + jobs, first_row + m + types])
    values = np.concatenate([np.ones(m * n), np.repeat(scale, n)])
    return rows, np.concatenate([cols, cols]), values


def rate_triplets(
    coefficients: np.ndarray, rows: np.ndarray, jobs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries sum_w coefficients[k, w] x[jobs[k], w] in row rows[k] (columns j * n + w)."""
    n = coefficients.shape[1]
    cols = (jobs[:, None] * n + np.arange(n)[None, :]).ravel()
    return np.repeat(rows, n), cols, coefficients.ravel()


def matrix_lp(
    cost: np.ndarray,
    col_bounds: tuple[np.ndarray, np.ndarray],
    row_bounds: tuple[np.ndarray, np.ndarray],
    triplets: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> MatrixLP:
    rows = np.concatenate([t[0] for t in triplets])
    cols = np.concatenate([t[1] for t in triplets])
    values = np.concatenate([t[2] for t in triplets])
    start, index, value = csc(len(cost), rows, cols, values)
    return MatrixLP(
        cost=cost,
        col_lower=col_bounds[0],
        col_upper=col_bounds[1],
        row_lower=row_bounds[0],
        row_upper=row_bounds[1],
        a_start=start,
        a_index=index,
        a_value=value,
    )
