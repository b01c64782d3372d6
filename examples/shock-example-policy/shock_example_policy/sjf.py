"""`example_sjf`: shortest job first, as an example of how to write a shock policy plugin.

This module is everything a policy plugin needs:

1. a subclass of `shock.api.Policy` with a unique `name`, a one-line `description`
   (both shown by `shock plugins`) and an `allocate(problem, solver) -> Allocation` method;
2. a module-level function named after the hook, `register_policies`, marked with
   `shock.api.hookimpl`, that hands one instance per policy name to `register`;
3. an entry point in the `shock` group of the package's `pyproject.toml` naming this module.

The policy: jobs are taken in order of their smallest remaining isolated run time, i.e. the
steps still to do (`total_steps - steps_done`) divided by the job's best throughput over all
worker types (ties by job id). Each job gets one whole worker type (time fraction 1.0): the
fastest type for it that still has at least `scale_factor` free GPUs. A job that fits nowhere
is skipped and later, shorter-to-fit jobs may overtake it (backfilling inside the policy).

`backfill = False` (as in FIFO) tells the round-based mechanism to run only what the allocation
gives time to, so idle GPUs are never filled with jobs the policy left out. Like every
heuristic, the policy ignores the solver it is handed.
"""

from __future__ import annotations

import math

import numpy as np

from shock.api import Allocation, Policy, PolicyInput, ProblemClass, Register, SolverSpec, hookimpl


def remaining_isolated_time(problem: PolicyInput, row: int) -> float:
    """Seconds job `row` still needs alone on its fastest worker type (inf if it has none)."""
    job = problem.jobs[row]
    best = float(problem.throughputs[row].max(initial=0.0))
    if best <= 0:
        return math.inf
    return max(job.total_steps - job.steps_done, 0.0) / best


class ShortestJobFirst(Policy):
    """Whole worker types to the jobs closest to finishing, fastest free type first."""

    name = "example_sjf"
    description = (
        "example plugin: shortest remaining job first on the fastest free worker type, "
        "backfilling past jobs that do not fit"
    )
    problem_class = ProblemClass.HEURISTIC
    heterogeneity_aware = True
    backfill = False

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        fractions = np.zeros((len(problem.jobs), len(problem.worker_types)))
        free = problem.capacity.astype(float).copy()
        order = sorted(
            range(len(problem.jobs)),
            key=lambda row: (remaining_isolated_time(problem, row), problem.jobs[row].job_id),
        )
        for row in order:
            size = problem.jobs[row].scale_factor
            rates = problem.throughputs[row]
            fits = [w for w in range(len(free)) if free[w] >= size and rates[w] > 0]
            if not fits:
                continue  # fits nowhere this time: let shorter-to-place jobs go past it
            column = max(fits, key=lambda w: (rates[w], -w))  # fastest; first type on ties
            fractions[row, column] = 1.0
            free[column] -= size
        return Allocation(keys, problem.worker_types, fractions)


@hookimpl
def register_policies(register: Register) -> None:
    """Called once by shock's plugin registry; register one instance per policy name."""
    register(ShortestJobFirst())
