"""Ordering policies of Synergy's evaluation: each sorts the jobs and gives them, in that order,
a whole worker type (the fastest one with enough free GPUs); a job that fits nowhere is skipped
and later ones may still run. The allocation is recomputed every round, since the order moves
as jobs progress.

As in Synergy's simulator, remaining times are at the job's current speed (`PolicyJob.speed`:
the CPUs and memory of its last grant, or what the placement aims to give it; 1 with GPU-only
placements) and attained service is the time it has held GPUs, whatever speed it ran at.

- `fifo_skip`: arrival order, later jobs running where an earlier one does not fit (Synergy's
  FIFO; shock's `fifo` stops the queue at the first job that does not fit).
- `srtf`: shortest remaining time first.
- `srsf`: shortest remaining service (remaining time x GPUs) first.
- `las`: least attained service (seconds run x GPUs) first.
- `ftf`: finish-time fairness: the largest ratio of (time since arrival + remaining time) to the
  job's isolated run time at the fair share first (the jobs furthest behind);
  `--policy-option synergy_order=true` sorts the other way, as Synergy's simulator does.
- `drf`: dominant resource fairness: the smallest dominant share of the job's best-case demand
  (GPUs, CPUs, memory; CPUs and memory against Synergy's 3 CPUs and 62.5 GB per GPU) first.
- `tetris`: packing: repeatedly the job whose best-case demand vector aligns best with the free
  resources, remaining time breaking ties.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from shock.api import (
    DEFAULT_CPUS_PER_GPU,
    DEFAULT_MEM_GB_PER_GPU,
    Allocation,
    Policy,
    PolicyInput,
    Register,
    SolverSpec,
    hookimpl,
    typed_options,
)
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
        chosen: list[int] = []
        for row in self.order(problem):
            size = problem.jobs[row].scale_factor
            rates = problem.throughputs[row]
            fits = [w for w in range(len(free)) if free[w] >= size and rates[w] > 0]
            if not fits:
                continue
            column = max(fits, key=lambda w: (rates[w], -w))
            fractions[row, column] = 1.0
            free[column] -= size
            chosen.append(row)
        keys = tuple(job.job_id for job in problem.jobs)
        # On one GPU type, the mechanism takes the chosen jobs in this order (the same set), so
        # a resource-aware placement places them in it, as Synergy's schedulers do. With several
        # types its in-order walk could pick another type than the fastest, so it is left out.
        round_order = None
        if len(problem.worker_types) == 1:
            round_order = tuple(keys[row] for row in self.placement_order(problem, chosen))
        return Allocation(keys, problem.worker_types, fractions, round_order=round_order)

    def placement_order(self, problem: PolicyInput, chosen: list[int]) -> list[int]:
        """The order the chosen rows are placed in: the policy's own by default."""
        return chosen


def remaining_time(problem: PolicyInput) -> np.ndarray:
    """Seconds left at the job's best throughput times its current speed."""
    speed = np.fromiter((j.speed for j in problem.jobs), float, len(problem.jobs))
    best = problem.throughputs.max(axis=1, initial=0.0) * speed
    return problem.steps_remaining / np.where(best > 0, best, np.inf)


def attained_time(problem: PolicyInput) -> np.ndarray:
    """Seconds the job has held GPUs (Synergy's `attained_service_time`: time, not work)."""
    return np.fromiter((j.time_run_s for j in problem.jobs), float, len(problem.jobs))


def _sorted_rows(problem: PolicyInput, key: np.ndarray) -> list[int]:
    # Ties go to the earlier arrival, then the lower job id.
    return sorted(
        range(len(problem.jobs)),
        key=lambda row: (key[row], problem.jobs[row].arrival_time, problem.jobs[row].job_id),
    )


class FirstInFirstOutSkip(OrderingPolicy):
    name = "fifo_skip"
    description = "arrival order; a job that does not fit is skipped (Synergy's FIFO)"

    def order(self, problem: PolicyInput) -> list[int]:
        return _sorted_rows(problem, np.zeros(len(problem.jobs)))


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

    def placement_order(self, problem: PolicyInput, chosen: list[int]) -> list[int]:
        # Synergy's LAS places the jobs it picked largest first (`las_synergy_new.py`, with
        # tune), so big gangs find whole servers before small jobs fragment them.
        return sorted(chosen, key=lambda row: -problem.jobs[row].scale_factor)


@dataclass(frozen=True)
class FtfOptions:
    # Synergy's `ftf_synergy_new.py` sorts by rho ascending (least behind first); True
    # reproduces that. The default runs the jobs furthest behind first, as finish-time
    # fairness intends.
    synergy_order: bool = False


class FinishTimeFairnessOrder(OrderingPolicy):
    name = "ftf"
    description = "finish-time fairness order: the jobs furthest behind their isolated time first"

    def __init__(self, options: FtfOptions | None = None) -> None:
        self.options = options or FtfOptions()

    def with_options(self, values: Mapping[str, str]) -> FinishTimeFairnessOrder:
        return FinishTimeFairnessOrder(typed_options(self.options, values, self.name))

    def order(self, problem: PolicyInput) -> list[int]:
        best = problem.throughputs.max(axis=1, initial=0.0)
        totals = np.fromiter((j.total_steps for j in problem.jobs), float, len(problem.jobs))
        isolated = totals / np.where(best > 0, best, np.inf)
        finish = problem.times_since_arrival + remaining_time(problem)
        rho = finish / np.where(isolated > 0, isolated, np.inf)
        return _sorted_rows(problem, rho if self.options.synergy_order else -rho)


def demand_shares(problem: PolicyInput) -> np.ndarray:
    """(GPU, CPU, memory) shares of the cluster each job's best-case demand takes: rows x 3.
    A job whose trace records its requests demands those."""
    gpus = float(problem.capacity.sum()) or 1.0
    shares = np.zeros((len(problem.jobs), 3))
    for row, job in enumerate(problem.jobs):
        cpus, memory = profile_for(job.job_type).best_demand(job.scale_factor)
        cpus = cpus if job.cpus is None else job.cpus
        memory = memory if job.memory_gb is None else job.memory_gb
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
        FirstInFirstOutSkip(),
        ShortestRemainingTime(),
        ShortestRemainingService(),
        LeastAttainedService(),
        FinishTimeFairnessOrder(),
        DominantResourceFairness(),
        Tetris(),
    ):
        register(policy)
