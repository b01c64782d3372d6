"""Least attained service as max-min fairness (Gavel section 4.1), agnostic and -aware.

maximise  min_j  (1 / w_j) * sum_w T[j, w] * sf_j * x[j, w] / T_equal[j]
where T_equal[j] = sum_w T[j, w] * capacity_w / total GPUs is the throughput job j would see
with an equal share of every worker type. The heterogeneity-agnostic variant sets every
throughput to 1, so it balances time, not work.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from shock.api import (
    Allocation,
    MatrixLP,
    PartObjectives,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    hookimpl,
    solve_matrix_lp,
)
from shock.plugins.policies.time_fraction_lp import clean_fractions


def normalised_rates(
    problem: PolicyInput, heterogeneity_aware: bool, scale_factors: np.ndarray | None = None
) -> np.ndarray:
    """Coefficient c[j, w]: job j's weighted, normalised progress per unit time on type w
    (`scale_factors`: the problem's, when the caller has them already)."""
    throughputs = problem.throughputs if heterogeneity_aware else np.ones_like(problem.throughputs)
    share = problem.capacity / problem.capacity.sum()
    equal_share = throughputs @ share
    equal_share[equal_share <= 0] = np.inf  # a job that cannot run anywhere gets rate 0
    if scale_factors is None:
        scale_factors = problem.scale_factors
    rates = throughputs * (scale_factors / problem.priority_weights / equal_share)[:, None]
    return rates


class MaxMinFairness(Policy):

    # Its objective over parts of the cluster (--partitions): the smallest part's floor.
    part_objectives = PartObjectives.MIN
    problem_class = ProblemClass.LP

    def __init__(self, heterogeneity_aware: bool) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        self.name = "max_min_fairness_perf" if heterogeneity_aware else "max_min_fairness"
        self.description = (
            "LAS / max-min fairness over normalised throughput (heterogeneity-aware, Gavel)"
            if heterogeneity_aware
            else "LAS / max-min fairness over time shares (heterogeneity-agnostic)"
        )

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = problem.job_ids
        if not keys:
            return Allocation.empty(problem.worker_types)
        scale_factors = problem.scale_factors
        rates = normalised_rates(problem, self.heterogeneity_aware, scale_factors)
        # Identical jobs (same rates and gang size) have interchangeable rows: averaging any
        # optimum over their permutations keeps it optimal, so one row per class, with the
        # class size in the capacity rows, has the same optimum and a smaller LP. Every
        # solver is handed this class LP.
        classes, class_of_job, sizes = _job_classes(rates, scale_factors)
        gang_gpus = scale_factors[classes] * sizes
        lp = self.matrix_lp(rates[classes], gang_gpus, problem.capacity)
        solution = solve_matrix_lp(lp, solver)
        per_class = solution[:-1].reshape(len(classes), rates.shape[1])
        # Cleaning is row by row: each class once, then its jobs.
        fractions = clean_fractions(per_class)[class_of_job]
        objective = float(solution[-1])
        return Allocation(keys, problem.worker_types, fractions, objective)

    @staticmethod
    def matrix_lp(rates: np.ndarray, gang_gpus: np.ndarray, capacity: np.ndarray) -> MatrixLP:
        """The LP: columns x[j, w] (row-major) then the floor t; minimise -t.

        Rows 0..m-1: t - sum_w rates[j, w] x[j, w] <= 0; rows m..2m-1: sum_w x[j, w] <= 1;
        rows 2m..2m+n-1: sum_j gang_gpus_j x[j, w] <= capacity_w (gang_gpus_j: the job's
        scale factor, times the number of jobs a row stands for).
        """
        m, n = rates.shape
        shape = _lp_shape(m, n)
        x_value = np.empty((m * n, 3))
        x_value[:, 0] = -rates.ravel()
        x_value[:, 1] = 1.0
        x_value[:, 2] = np.repeat(gang_gpus, n)
        value = np.concatenate([x_value.ravel(), np.ones(m)])
        row_upper = shape.row_upper.copy()
        row_upper[2 * m :] = capacity
        return MatrixLP(
            cost=shape.cost,
            col_lower=shape.col_lower,
            col_upper=shape.col_upper,
            row_lower=shape.row_lower,
            row_upper=row_upper,
            a_start=shape.a_start,
            a_index=shape.a_index,
            a_value=value,
        )


def _job_classes(
    rates: np.ndarray, scale_factors: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group identical jobs: (first row of each class, each job's class, class sizes), classes
    in order of first appearance, so a problem without duplicates keeps its exact LP."""
    m = len(rates)
    if m == 0:
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty, np.zeros(0)
    # Each job's row (rates, then scale factor) as bytes, numbered in order of appearance
    # (dict.fromkeys keeps the first of equal keys, in order). Adding 0.0 turns -0.0 into
    # 0.0, which compares equal to it.
    rows = np.empty((m, rates.shape[1] + 1))
    rows[:, :-1] = rates
    rows[:, -1] = scale_factors
    rows += 0.0
    keys = rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel().tolist()
    number = {key: index for index, key in enumerate(dict.fromkeys(keys))}
    class_of_job = np.fromiter(map(number.__getitem__, keys), np.intp, m)
    classes = len(number)
    sizes = np.bincount(class_of_job, minlength=classes).astype(float)
    # Each class's first job: where the highest class so far goes up (classes are numbered
    # in order of appearance).
    highest = np.maximum.accumulate(class_of_job)
    new = np.empty(m, dtype=bool)
    new[0] = True
    np.greater(highest[1:], highest[:-1], out=new[1:])
    return np.flatnonzero(new), class_of_job, sizes


@cache
def _lp_shape(m: int, n: int) -> MatrixLP:
    """Everything of the matrix LP that depends only on its size (re-used between rounds)."""
    jobs = np.repeat(np.arange(m), n)
    types = np.tile(np.arange(n), m)
    x_index = np.stack([jobs, m + jobs, 2 * m + types], axis=1).ravel()
    index = np.concatenate([x_index, np.arange(m)]).astype(np.int32)
    start = np.concatenate([np.arange(0, 3 * m * n + 1, 3), [3 * m * n + m]]).astype(np.int32)
    cost = np.zeros(m * n + 1)
    cost[-1] = -1.0
    return MatrixLP(
        cost=cost,
        col_lower=np.concatenate([np.zeros(m * n), [-np.inf]]),
        # No x <= 1 bounds: they are implied, and would move the interior solution.
        col_upper=np.full(m * n + 1, np.inf),
        row_lower=np.full(2 * m + n, -np.inf),
        row_upper=np.concatenate([np.zeros(m), np.ones(m), np.zeros(n)]),
        a_start=start,
        a_index=index,
        a_value=np.zeros(0),
    )


@hookimpl
def register_policies(register: Register) -> None:
    register(MaxMinFairness(heterogeneity_aware=False))
    register(MaxMinFairness(heterogeneity_aware=True))
