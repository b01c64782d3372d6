"""Minimum makespan (Gavel OSDI'20 section 4.2, "minimize makespan"), agnostic and -aware.

Finish every active job's remaining steps R_j as early as possible at the current rates:

    minimise_x,T  T   s.t.  a_j(x) = sum_w T[j, w] x[j, w] >= R_j / T   for every job,
                           and the shared constraints (time_fraction_lp).

Gavel bisects over T with a feasibility LP per step (to a 5% bracket). The demands R_j / T all
scale with the same 1 / T, so the bisection is not needed: with l = 1 / T the problem is the
single LP

    maximise l   s.t.  a_j(x) / R_j >= l,

whose optimum l* gives the exact minimum makespan T* = 1 / l*. It is max-min fairness' LP
with rates T[j, w] / R_j, so it uses that policy's matrix form; the rates are scaled by the
isolated allocation's makespan (isolated.isolated_fractions), which puts l* at about 1, where
the solver's tolerances are relative. HiGHS' interior-point method returns the centre of the
optimal face (jobs off the critical path get slack), as Gavel's ECOS returns an interior point
of its last feasible step.

`min_total_duration` is the heterogeneity-agnostic variant: like Gavel's other agnostic
policies it sees every type as fast as the job's V100 (its best type without one), so it
balances the remaining V100-time of the jobs. (Gavel's own `min_total_duration` CLI name is
its heterogeneity-aware class; `min_total_duration_perf` here is that one.)

Option `gavel_bisection=true` (set by `--preset shockwave`) returns the allocation Gavel's and
Shockwave's code returns instead: their bisection over T (from [100 s, 10^6 s], halving until
the bracket is within 5%, widening tenfold if nothing is feasible) stops at some T_b in
[T*, 1.05 T*), and their answer is ECOS's point of the feasibility problem at T_b. With no
objective, that point is whatever ECOS's method stops at, so the bisection is replayed with
the same method (shock.lp.conic_interior_point) as its solver. Below T* nothing is
feasible, so only the midpoints at or above T* are solved; one where the method stops short
of its tolerances is refused, as Gavel refuses every status but "optimal". Where no midpoint
is answered, the analytic centre (shock.lp.analytic_centre) at the analytic T_b stands in.
Every job gets slack beyond its floor R_j / T_b.

A job with no steps left needs no time and gets none; a job that runs on no type could never
finish, so it gets no time and the makespan is over the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from shock.api import (
    Allocation,
    PartObjectives,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    analytic_centre,
    conic_interior_point,
    hookimpl,
    is_strictly_feasible,
    solve_matrix_lp,
    typed_options,
)
from shock.plugins.policies.isolated import isolated_fractions
from shock.plugins.policies.max_min_fairness import MaxMinFairness
from shock.plugins.policies.max_min_fairness_packed import MaxMinFairnessPacked
from shock.plugins.policies.rate_lp import agnostic_throughputs
from shock.plugins.policies.time_fraction_lp import clean_fractions

_Answer = TypeVar("_Answer")


def makespan(throughputs: np.ndarray, remaining: np.ndarray, fractions: np.ndarray) -> float:
    """max_j R_j / a_j(x) over jobs with steps left (inf if one of them gets no throughput)."""
    rates = (throughputs * fractions).sum(axis=1)
    left = remaining > 0
    if not left.any():
        return 0.0
    with np.errstate(divide="ignore"):
        return float(np.max(np.where(rates[left] > 0, remaining[left] / rates[left], np.inf)))


def gavel_bisection_end(best: float) -> float:
    """The T at which Gavel's bisection stops when T is feasible exactly from `best` on."""
    end, _ = gavel_bisection(lambda t: True if t >= best else None)
    assert end is not None
    return end


def gavel_bisection(
    answer: Callable[[float], _Answer | None], widest: float = float("inf")
) -> tuple[float | None, _Answer | None]:
    """Gavel's bisection over T, with `answer(T)` its solver's answer at T (None: refused,
    as Gavel treats every status but "optimal"): the last T answered and its answer; (None,
    None) if no T is answered in the ranges [100 s, 10^6 s], [10^6 s, 10^7 s], ... that
    start below `widest`."""
    low, high, top = 100.0, 1e6, 1e6
    found: tuple[float, _Answer] | None = None
    while found is None:
        if low >= widest:
            return None, None
        while 1.05 * low < high:
            middle = (low + high) / 2.0
            point = answer(middle)
            if point is not None:
                found, high = (middle, point), middle
            else:
                low = middle
        low, high, top = top, top * 10.0, top * 10.0
    return found


@dataclass(frozen=True, slots=True)
class MinTotalDurationOptions:
    # Gavel's and Shockwave's answer: the centre of the feasible set at the bisection's T.
    gavel_bisection: bool = False


class MinTotalDuration(Policy):

    # Its objective over parts of the cluster (--partitions): the slowest part's makespan.
    part_objectives = PartObjectives.MAX
    problem_class = ProblemClass.LP

    def __init__(
        self, heterogeneity_aware: bool, options: MinTotalDurationOptions | None = None
    ) -> None:
        self.options = options or MinTotalDurationOptions()
        self.heterogeneity_aware = heterogeneity_aware
        self.name = "min_total_duration_perf" if heterogeneity_aware else "min_total_duration"
        self.description = (
            "minimum makespan of the active jobs (heterogeneity-aware, Gavel)"
            if heterogeneity_aware
            else "minimum makespan, every type at the job's V100 throughput"
        )

    def with_options(self, values: Mapping[str, str]) -> MinTotalDuration:
        options = typed_options(self.options, values, self.name)
        return MinTotalDuration(self.heterogeneity_aware, options)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            return Allocation.empty(problem.worker_types)
        throughputs = (
            problem.throughputs if self.heterogeneity_aware else agnostic_throughputs(problem)
        )
        remaining = problem.steps_remaining
        x0 = isolated_fractions(problem.capacity, problem.scale_factors)
        isolated = (throughputs * x0).sum(axis=1)
        counted = (remaining > 0) & (isolated > 0)
        fractions = np.zeros_like(throughputs)
        if not counted.any():
            return Allocation(keys, problem.worker_types, fractions, 0.0)
        sub_throughputs = throughputs[counted]
        sub_remaining = remaining[counted]
        # Time unit: the isolated allocation's makespan, so the optimal level is >= 1 and O(1).
        unit = float(np.max(sub_remaining / isolated[counted]))
        rates = sub_throughputs * (unit / sub_remaining)[:, None]
        scale = problem.scale_factors[counted]
        m, n = rates.shape
        solution = solve_matrix_lp(MaxMinFairness.matrix_lp(rates, scale, problem.capacity), solver)
        x = clean_fractions(solution[:-1].reshape(m, n))
        if self.options.gavel_bisection:
            x = centred_at_bisection_end(x, sub_throughputs, sub_remaining, scale, problem)
        fractions[counted] = x
        objective = makespan(sub_throughputs, sub_remaining, x)
        return Allocation(keys, problem.worker_types, fractions, objective)


def centred_at_bisection_end(
    optimum: np.ndarray,
    throughputs: np.ndarray,
    remaining: np.ndarray,
    scale: np.ndarray,
    problem: PolicyInput,
) -> np.ndarray:
    """Gavel's bisection replayed with ECOS's method as its solver: below T* no x exists, so
    only the T >= T* are solved, and a T where the method stops short of its tolerances is
    refused as Gavel refuses it. The analytic centre stands in where no T is answered, the
    optimum where the set has no interior."""
    best = makespan(throughputs, remaining, optimum)
    if not np.isfinite(best) or best <= 0:
        return optimum
    capacity = problem.capacity.astype(float)

    def answer(t: float) -> np.ndarray | None:
        if t < best:
            return None
        return conic_interior_point(throughputs, remaining / t, scale, capacity)

    # Past the decade after T*'s, give up (Gavel's search would widen forever).
    _, point = gavel_bisection(answer, widest=10.0 * max(best, 1e6))
    if point is not None:
        return np.clip(point, 0.0, 1.0)
    end = gavel_bisection_end(best)
    floors = remaining / end
    n = optimum.shape[1]
    # A strictly feasible start: shrink the optimum towards 0 by less than its rate margin
    # (T_b > T*), then add a small even share that keeps rows and capacity below their bounds.
    shrink = 0.5 * (1.0 - best / end)
    even = 0.5 * min(1.0 / n, float(np.min(capacity / max(float(scale.sum()), 1.0))))
    start = (1.0 - shrink) * optimum + shrink * even
    if not is_strictly_feasible(start, throughputs, floors, scale, capacity):
        return optimum
    return np.clip(analytic_centre(start, throughputs, floors, scale, capacity), 0.0, 1.0)


class MinTotalDurationPacked(MaxMinFairnessPacked):
    """Minimum makespan with space sharing: the packed max-min LP with job j's progress
    weighted by 1 / R_j (jobs with no steps left are out of the objective), so its optimum
    l* gives the minimum makespan T* = R_ref / l* (R_ref only scales l* to about 1)."""

    # Its objective over parts of the cluster (--partitions): the slowest part's makespan.
    part_objectives = PartObjectives.MAX

    name = "min_total_duration_packed"
    description = "minimum makespan with space sharing (pairs of jobs on one gang)"

    def progress_weights(self, problem: PolicyInput) -> np.ndarray:
        remaining = problem.steps_remaining
        reference = _reference_steps(remaining)
        with np.errstate(divide="ignore"):
            return np.where(remaining > 0, reference / remaining, 0.0)

    def objective(self, problem: PolicyInput, floor: float) -> float:
        return _reference_steps(problem.steps_remaining) / floor if floor > 0 else float("inf")


def _reference_steps(remaining: np.ndarray) -> float:
    left = remaining[remaining > 0]
    return float(np.median(left)) if len(left) else 1.0


@hookimpl
def register_policies(register: Register) -> None:
    register(MinTotalDuration(heterogeneity_aware=False))
    register(MinTotalDuration(heterogeneity_aware=True))
    register(MinTotalDurationPacked())
