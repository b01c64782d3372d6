"""First in, first out: jobs take whole worker types in arrival order, with no backfilling.

`fifo` keeps each job on the type it first got and picks a random type that fits for a new
job (heterogeneity-agnostic); `fifo_perf` re-places every job each time on the fastest type
that still fits. Either way the queue stops at the first job that fits nowhere.
"""

from __future__ import annotations

import random

import numpy as np

from shock.core.hookspecs import Register, hookimpl
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.solver import SolverSpec


class Fifo(Policy):
    backfill = False

    def __init__(self, heterogeneity_aware: bool, seed: int = 0) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        self.name = "fifo_perf" if heterogeneity_aware else "fifo"
        self.description = (
            "FIFO; each job on the fastest worker type that is free"
            if heterogeneity_aware
            else "FIFO; each job on a random free worker type, kept until it finishes"
        )
        self._rng = random.Random(seed)
        self._placed: dict[int, int] = {}  # job id -> worker type column (agnostic variant)

    def for_run(self, seed: int) -> Fifo:
        return Fifo(self.heterogeneity_aware, seed)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        free = problem.capacity.astype(float).copy()
        placed = {} if self.heterogeneity_aware else self._placed
        active = {job.job_id for job in problem.jobs}
        for job_id in [j for j in placed if j not in active]:
            del placed[job_id]
        row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
        for job_id, column in placed.items():
            free[column] -= problem.jobs[row_of[job_id]].scale_factor
        for row, job in enumerate(problem.jobs):  # jobs are in arrival (id) order
            if job.job_id in placed:
                continue
            rates = problem.throughputs[row]
            fits = [w for w in range(len(free)) if free[w] >= job.scale_factor and rates[w] > 0]
            if not fits:
                break  # strict FIFO: nobody overtakes the head of the queue
            if self.heterogeneity_aware:
                column = max(fits, key=lambda w: (rates[w], -w))
            else:
                column = fits[self._rng.randrange(len(fits))]
            placed[job.job_id] = column
            free[column] -= job.scale_factor
        fractions = np.zeros((len(problem.jobs), len(problem.worker_types)))
        for job_id, column in placed.items():
            fractions[row_of[job_id], column] = 1.0
        keys = tuple(job.job_id for job in problem.jobs)
        return Allocation(keys, problem.worker_types, fractions)


@hookimpl
def register_policies(register: Register) -> None:
    register(Fifo(heterogeneity_aware=False))
    register(Fifo(heterogeneity_aware=True))
