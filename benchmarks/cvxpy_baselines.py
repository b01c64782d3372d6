"""Gavel-style cvxpy + ECOS formulations, used as in-run baselines by the benchmarks.

They state the same problems as shock's policies the way Gavel's artifact does (a cvxpy
problem built and solved with ECOS at every allocation), so a benchmark can time both in one
run and compare the simulations they drive.
"""

from __future__ import annotations

import warnings

import numpy as np

from shock.core.hookspecs import Register, hookimpl
from shock.core.policy import Allocation, Policy, PolicyInput, ProblemClass
from shock.core.solver import SolverSpec
from shock.plugins.policies.max_min_fairness import normalised_rates


class CvxpyMaxMinFairness(Policy):
    problem_class = ProblemClass.HEURISTIC  # solved by cvxpy itself, not through --solver

    def __init__(self, heterogeneity_aware: bool) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        suffix = "_perf" if heterogeneity_aware else ""
        self.name = f"cvxpy_max_min_fairness{suffix}"
        self.description = "baseline: max-min fairness as a cvxpy problem solved by ECOS"

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        import cvxpy as cp

        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            return Allocation.empty(problem.worker_types)
        rates = normalised_rates(problem, self.heterogeneity_aware)
        m, n = rates.shape
        x = cp.Variable((m, n))
        scale = np.tile(problem.scale_factors[:, None], (1, n))
        constraints = [
            x >= 0,
            cp.sum(x, axis=1) <= 1,
            cp.sum(cp.multiply(scale, x), axis=0) <= problem.capacity,
        ]
        objective = cp.Maximize(cp.min(cp.sum(cp.multiply(rates, x), axis=1)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cp.Problem(objective, constraints).solve(solver="ECOS")
        fractions = np.clip(np.asarray(x.value), 0.0, 1.0)
        return Allocation(keys, problem.worker_types, fractions)


@hookimpl
def register_policies(register: Register) -> None:
    register(CvxpyMaxMinFairness(heterogeneity_aware=True))
    register(CvxpyMaxMinFairness(heterogeneity_aware=False))
