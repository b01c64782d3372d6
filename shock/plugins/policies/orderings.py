"""Ordering policies of Synergy's evaluation: each sorts the jobs and gives them, in that order,
a whole worker type (the fastest one with enough free GPUs); a job that fits nowhere is skipped
and later ones may still run. The allocation is recomputed every round, since the order moves
as jobs progress.

Times are in fair-share-equivalent seconds (steps over the table's throughput on the job's
fastest type), so the order does not depend on the CPUs and memory a placement grants.

- `srtf`: shortest remaining time first.
- `srsf`: shortest remaining service (remaining time x GPUs) first.
- `las`: least attained service (time trained x GPUs) first.
- `ftf`: finish-time fairness: the largest ratio of (time since arrival + remaining time) to the
  job's isolated run time first (the jobs furthest behind).
- `drf`: dominant resource fairness: the smallest dominant share of the job's best-case demand
  (GPUs, CPUs, memory; CPUs and memory against Synergy's 3 CPUs and 62.5 GB per GPU) first.
- `tetris`: packing: repeatedly the job whose best-case demand vector aligns best with the free
  resources, remaining time breaking ties.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from shock.core.hookspecs import Register, hookimpl
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.resource_placement import DEFAULT_CPUS_PER_GPU, DEFAULT_MEM_GB_PER_GPU
from shock.core.solver import SolverSpec
from shock.resources.catalog import profile_for


class OrderingPolicy(Policy):
    backfill = False
    reallocate_every_round = True

    @abstractmethod
    def order(self, problem: PolicyInput) -> list[int]:
        """Row indices of `problem.jobs`, first to run first."""

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        free = problem.capacity.astype(float).copy()
        fractions = np.zeros((len(problem.jobs), len(problem.worker_types)))
        for row in self.order(problem):
            size = problem.jobs[row].scale_factor
            rates = problem.throughputs[row]
            fits = [w for w in range(len(free)) if free[w] >= size and rates[w] > 0]
            if not fits:
                continue
            column = max(fits, key=lambda w: (rates[w], -w))
            fractions[row, column] = 1.0
            free[column] -= size
        keys = tuple(job.job_id for job in problem.jobs)
        return Allocation(keys, problem.worker_types, fractions)


def remaining_time(problem: PolicyInput) -> np.ndarray:
    """Seconds left at the job's best throughput."""
    best = problem.throughputs.max(axis=1, initial=0.0)
    return problem.steps_remaining / np.where(best > 0, best, np.inf)


def attained_time(problem: PolicyInput) -> np.ndarray:
    best = problem.throughputs.max(axis=1, initial=0.0)
    done = np.fromiter((j.steps_done for j in problem.jobs), float, len(problem.jobs))
    return done / np.where(best > 0, best, np.inf)


def _sorted_rows(problem: PolicyInput, key: np.ndarray) -> list[int]:
    # Ties go to the earlier arrival, then the lower job id.
    return sorted(
        range(len(problem.jobs)),
        key=lambda row: (key[row], problem.jobs[row].arrival_time, problem.jobs[row].job_id),
    )


class ShortestRemainingTime(OrderingPolicy):
    name = "srtf"
    description = "shortest remaining time first (whole worker types, skip what does not fit)"

    def order(self, problem: PolicyInput) -> list[int]:
        return _sorted_rows(problem, remaining_time(problem))


class ShortestRemainingService(OrderingPolicy):
    name = "srsf"
    description = "shortest remaining service (remaining time x GPUs) first"

    def order(self, problem: PolicyInput) -> list[int]:
        return _sorted_rows(problem, remaining_time(problem) * problem.scale_factors)


class LeastAttainedService(OrderingPolicy):
    name = "las"
    description = "least attained service (time trained x GPUs) first"

    def order(self, problem: PolicyInput) -> list[int]:
        return _sorted_rows(problem, attained_time(problem) * problem.scale_factors)


class FinishTimeFairnessOrder(OrderingPolicy):
    name = "ftf"
    description = "finish-time fairness order: the jobs furthest behind their isolated time first"

    def order(self, problem: PolicyInput) -> list[int]:
        best = problem.throughputs.max(axis=1, initial=0.0)
        totals = np.fromiter((j.total_steps for j in problem.jobs), float, len(problem.jobs))
        isolated = totals / np.where(best > 0, best, np.inf)
        finish = problem.times_since_arrival + remaining_time(problem)
        rho = finish / np.where(isolated > 0, isolated, np.inf)
        return _sorted_rows(problem, -rho)


def demand_shares(problem: PolicyInput) -> np.ndarray:
    """(GPU, CPU, memory) shares of the cluster each job's best-case demand takes: rows x 3."""
    gpus = float(problem.capacity.sum()) or 1.0
    shares = np.zeros((len(problem.jobs), 3))
    for row, job in enumerate(problem.jobs):
        cpus, memory = profile_for(job.job_type).best_demand(job.scale_factor)
        shares[row] = (
            job.scale_factor / gpus,
            cpus / (DEFAULT_CPUS_PER_GPU * gpus),
            memory / (DEFAULT_MEM_GB_PER_GPU * gpus),
        )
    return shares


class DominantResourceFairness(OrderingPolicy):
    name = "drf"
    description = "smallest dominant share (GPUs, CPUs, memory of the best case) first"

    def order(self, problem: PolicyInput) -> list[int]:
        return _sorted_rows(problem, demand_shares(problem).max(axis=1, initial=0.0))


class Tetris(OrderingPolicy):
    name = "tetris"
    description = "packing: best alignment of demand with free resources, then shortest remaining"

    def order(self, problem: PolicyInput) -> list[int]:
        shares = demand_shares(problem)
        remaining = remaining_time(problem)
        free = np.ones(3)
        left = np.ones(len(problem.jobs), dtype=bool)
        order: list[int] = []
        for _ in range(len(problem.jobs)):
            fits = left & np.all(shares <= free + 1e-12, axis=1)
            pool = fits if fits.any() else left
            # Best alignment; among equals the shortest remaining time.
            score = np.where(pool, shares @ free, -np.inf)
            candidates = np.flatnonzero(score == score.max())
            row = int(candidates[np.argmin(remaining[candidates])])
            order.append(row)
            left[row] = False
            if fits.any():
                free = free - shares[row]
        return order


@hookimpl
def register_policies(register: Register) -> None:
    for policy in (
        ShortestRemainingTime(),
        ShortestRemainingService(),
        LeastAttainedService(),
        FinishTimeFairnessOrder(),
        DominantResourceFairness(),
        Tetris(),
    ):
        register(policy)
