"""Proportional: every job gets each worker type in proportion to its share of the cluster.

With N_w GPUs of type w, N = sum_w N_w and s_i the scale factor of job i, Gavel's
ProportionalPolicy gives every job x[i, w] = N_w / N, the same row for every job whatever
their number or size. That ignores capacity: sum_i s_i N_w / N exceeds N_w as soon as the jobs
need more than N GPUs in all (S = sum_i s_i > N). shock's allocations must be feasible, so
every entry is scaled by one common factor:

    x[i, w] = (N_w / N) * min(1, N / S) = N_w / max(N, S)

which gives sum_i s_i x[i, w] = N_w * S / max(N, S) <= N_w, keeps all rows equal and
proportional to the cluster mix, and equals Gavel's allocation whenever that one is feasible
(S <= N). Rows sum to min(1, N / S) <= 1. Throughputs are not looked at (heterogeneity-
agnostic). In Gavel this policy only normalises max-min fairness (the "proportional
throughput" sum_w T[i, w] N_w / N); shock also exposes it as a policy.
"""

from __future__ import annotations

import numpy as np

from shock.api import Allocation, Policy, PolicyInput, Register, SolverSpec, hookimpl


def proportional_fractions(capacity: np.ndarray, scale_factors: np.ndarray) -> np.ndarray:
    """x[i, w] = N_w / max(N, sum_i s_i) for every job i (see the module docstring)."""
    m = len(scale_factors)
    total = max(float(capacity.sum()), float(scale_factors.sum()))
    if m == 0 or total <= 0:
        return np.zeros((m, len(capacity)))
    return np.tile(capacity / total, (m, 1))


class Proportional(Policy):
    name = "proportional"
    description = "Every job each worker type in proportion to the cluster mix (N_w / N)"
    # Named without 'Perf': Gavel would shuffle the worker-type order each round.
    heterogeneity_aware = False

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        keys = tuple(job.job_id for job in problem.jobs)
        fractions = proportional_fractions(problem.capacity.astype(float), problem.scale_factors)
        return Allocation(keys, problem.worker_types, fractions)


@hookimpl
def register_policies(register: Register) -> None:
    register(Proportional())
