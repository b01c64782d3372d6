"""Maximum total throughput (Gavel OSDI'20 section 4.2, "maximize total throughput").

    maximise_x  sum_j w_j a_j(x) / T_best_j,   a_j(x) = sum_w T[j, w] x[j, w],
    subject to the shared constraints (time_fraction_lp),

with T_best_j = max_w T[j, w]. Gavel sums raw steps/s, which are not comparable between
models (a recommendation model makes thousands of steps/s, a ResNet-50 a handful), so its sum
is decided by whichever jobs step fastest. Here each job's throughput counts as the fraction
of its best isolated throughput it gets (between 0 and 1), times its priority weight; a gang
spends sf_j GPUs for that, so the LP prefers jobs with a high normalised throughput per GPU.
A job that runs on no type counts 0.

An LP; HiGHS' interior-point method returns the centre of the optimal face, so equally good
jobs share evenly instead of one vertex taking everything.

Option `raw_throughput=true` sums raw steps/s as Gavel and Shockwave do (w_j T[j, w], no
division by T_best_j); `--preset gavel` and `--preset shockwave` set it, as their simulators do.

Option `ecos_point=true` (also set by `--preset gavel` and `--preset shockwave`) answers with
the point ECOS's interior-point method stops at (shock.lp.conic_interior_point), as Gavel's
and Shockwave's simulators do, clipped to [0, 1] as they clip it. The LP's optimum is the
same, but a job the optimum leaves out keeps the tiny share (about 1e-8) the method leaves it,
and Gavel's round mechanism ranks those jobs by it when GPUs are left over (a job never run
gets priority share x 1e9), so which of them fill the spare GPUs follows those tiny numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    conic_interior_point_optimum,
    hookimpl,
    solve_matrix_lp,
    typed_options,
)
from shock.plugins.policies.rate_lp import (
    base_triplets,
    matrix_lp,
    normalised_throughput_coefficients,
)
from shock.plugins.policies.time_fraction_lp import clean_fractions


def throughput_lp(coefficients: np.ndarray, scale: np.ndarray, capacity: np.ndarray) -> MatrixLP:
    """minimise -sum c x; rows 0..m-1 sum_w x[j, w] <= 1, rows m..m+n-1 capacity."""
    m, n = coefficients.shape
    return matrix_lp(
        cost=-coefficients.ravel(),
        col_bounds=(np.zeros(m * n), np.full(m * n, np.inf)),
        row_bounds=(np.full(m + n, -np.inf), np.concatenate([np.ones(m), capacity])),
        triplets=[base_triplets(scale, n, first_row=0)],
    )


@dataclass(frozen=True, slots=True)
class MaxSumThroughputOptions:
    # Sum raw steps/s (Gavel's and Shockwave's objective) instead of normalised throughputs.
    raw_throughput: bool = False
    # Answer with ECOS's interior point, tiny shares of left-out jobs kept (Gavel's solver).
    ecos_point: bool = False


def raw_throughput_coefficients(problem: PolicyInput) -> np.ndarray:
    """c[j, w] = w_j T[j, w]: raw steps/s, weighted, as Gavel's objective sums them."""
    return problem.throughputs * problem.priority_weights[:, None]


class MaxSumThroughput(Policy):

    # Its objective over parts of the cluster (--partitions): the sum of the parts'.
    part_objectives = PartObjectives.SUM
    name = "max_sum_throughput_perf"
    description = "maximum total normalised throughput (heterogeneity-aware, Gavel)"
    problem_class = ProblemClass.LP

    def __init__(self, options: MaxSumThroughputOptions | None = None) -> None:
        self.options = options or MaxSumThroughputOptions()

    def with_options(self, values: Mapping[str, str]) -> MaxSumThroughput:
        return MaxSumThroughput(typed_options(self.options, values, self.name))

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            return Allocation.empty(problem.worker_types)
        if self.options.raw_throughput:
            coefficients = raw_throughput_coefficients(problem)
        else:
            coefficients = normalised_throughput_coefficients(problem)
        m, n = coefficients.shape
        if not coefficients.any():  # nothing runs anywhere: nothing to gain
            return Allocation(keys, problem.worker_types, np.zeros((m, n)), 0.0)
        point = (
            conic_interior_point_optimum(coefficients, problem.scale_factors, problem.capacity)
            if self.options.ecos_point
            else None
        )
        if point is not None:
            fractions = np.clip(point, 0.0, 1.0)  # Gavel clips, and keeps the tiny shares
        else:
            lp = throughput_lp(coefficients, problem.scale_factors, problem.capacity)
            fractions = clean_fractions(solve_matrix_lp(lp, solver).reshape(m, n))
        objective = float((coefficients * fractions).sum())
        return Allocation(keys, problem.worker_types, fractions, objective)


@hookimpl
def register_policies(register: Register) -> None:
    register(MaxSumThroughput())
