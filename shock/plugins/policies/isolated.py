"""Isolated: every job gets its own equal slice of the cluster (Gavel's `isolated`).

With m active jobs, N_w GPUs of worker type w and s_i the scale factor of job i:

    x0[i, w] = (N_w / m) / s_i                (1/m of every type, counted in GPUs)
    x[i, w]  = x0[i, w] / max(1, sum_v x0[i, v])

i.e. each job is given N_w/m GPUs of every type, which for a gang of s_i GPUs is that share
of time divided by s_i; rows that would exceed 1 are scaled down to sum to 1. Capacity holds
by construction: sum_i s_i x[i, w] <= sum_i N_w/m = N_w. Throughputs are not looked at (the
policy is heterogeneity-agnostic; a type a job cannot run on still counts in its share, as in
Gavel). Finish-time fairness measures jobs against this allocation.
"""

from __future__ import annotations

import numpy as np

from shock.api import Allocation, Policy, PolicyInput, Register, SolverSpec, hookimpl


def isolated_fractions(capacity: np.ndarray, scale_factors: np.ndarray) -> np.ndarray:
    """The isolated allocation for jobs with `scale_factors` on `capacity` GPUs per type."""
    m = len(scale_factors)
    if m == 0:
        return np.zeros((0, len(capacity)))
    shares = (capacity[None, :] / m) / scale_factors[:, None]
    # Only rows above 1 shrink; a job whose 1/m share is less than all its time keeps it.
    return shares / np.maximum(shares.sum(axis=1), 1.0)[:, None]


class Isolated(Policy):
    name = "isolated"
    description = "Each job an equal 1/m share of every worker type, in GPUs (Gavel's isolated)"
    # Gavel shuffles worker types for policies named without 'Perf' (this is one).
    heterogeneity_aware = False

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        keys = tuple(job.job_id for job in problem.jobs)
        fractions = isolated_fractions(problem.capacity.astype(float), problem.scale_factors)
        return Allocation(keys, problem.worker_types, fractions)


@hookimpl
def register_policies(register: Register) -> None:
    register(Isolated())
