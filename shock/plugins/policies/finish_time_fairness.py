"""Finish-time fairness (Themis, NSDI'20, as Gavel states it, OSDI'20 section 4.2).

Job j's finish-time ratio under an allocation x is

    rho_j(x) = (t_j + R_j / a_j(x)) / (C_j + R_j / iso_j),    a_j(x) = sum_w T[j, w] x[j, w]

with t_j the time since arrival, R_j the steps remaining, iso_j = a_j(x0) under the isolated
allocation x0 (an equal 1/m share of every type, see isolated.isolated_fractions) and C_j the
isolated time already credited to the job: every call adds (R_prev - R_now) / iso_prev, the
time the steps done since the last call would have taken in isolation (per-run state). The
policy solves

    minimise_x  max_j  w_j rho_j(x)   subject to the shared constraints (time_fraction_lp).

Unlike Gavel, which computes priority weights and leaves them unused, a job's ratio counts
w_j times, so a weight-5 job is held to a 5x smaller finish-time ratio (as max-min fairness
gives it 5x the normalised throughput). With all weights 1 the problem is Gavel's.

Exact LP reformulation: with D_j = (C_j + R_j / iso_j) / w_j,

    w_j rho_j(x) <= rho   <=>   a_j(x) >= R_j / (rho D_j - t_j)   (needs rho D_j > t_j),

so for a fixed rho the question is a linear feasibility problem, and feasibility only grows
with rho. Bisection finds the optimum between max_j t_j / D_j and the ratio the isolated
allocation reaches (it always fits). Steps change only row bounds, so one HiGHS instance
re-solves them with a warm-started dual simplex; a feasible step's vertex x also has its own
max ratio, a tighter upper bound. At a relative gap of 1e-6 the feasibility LP at the upper
bound is solved once more by HiGHS' interior-point method: an interior point of the (thin)
optimal set, as Gavel's ECOS returns, rather than an arbitrary vertex.

Solvers: the problem class is LP. The bisection's one feasibility LP is stated once in matrix
form; only its demand rows' bounds change between steps. HiGHS re-solves it in one instance
(warm-started dual simplex); any other LP solver gets the same LP as one Pyomo model whose
bounds change in place, and reports a step infeasible as HiGHS does. A job with no steps
remaining, or that runs on no type, has a ratio no allocation changes; it gets no time and is
left out of the max.

Option `jobs_without_steps=shockwave` treats a job that has no steps left yet still runs
(Shockwave's simulator keeps one that a batch-size change left without steps, see
`--adaptation-rules artifact-simulator`) as Shockwave's simulator does: with exactly none
left, its fixed ratio t_j / D_j counts in the max and it is given a share like any other job;
with more steps done than its total, Shockwave's model is not convex (R_j / a_j(x) with
R_j < 0), so the allocation is the isolated one, and the steps remembered from the last call
stay those of the call before (the next call credits the steps since then again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    LpSequence,
    LpStatus,
    MatrixLP,
    PartObjectives,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverError,
    SolverSpec,
    by_job,
    hookimpl,
    job_keyed,
    solve_matrix_lp,
    typed_options,
)
from shock.plugins.policies.isolated import isolated_fractions
from shock.plugins.policies.rate_lp import agnostic_throughputs
from shock.plugins.policies.time_fraction_lp import clean_fractions

# Bisection stops when (upper - lower) <= RELATIVE_GAP * upper.
RELATIVE_GAP = 1e-6
_MAX_STEPS = 200


@dataclass(frozen=True, slots=True)
class FinishTimeProblem:
    """The jobs that count, with everything rho_j needs (weights folded into `horizon`)."""

    throughputs: np.ndarray  # T[j, w] as the variant sees it
    scale: np.ndarray
    capacity: np.ndarray
    remaining: np.ndarray  # R_j > 0
    elapsed: np.ndarray  # t_j
    horizon: np.ndarray  # D_j = (C_j + R_j / iso_j) / w_j > 0
    isolated: np.ndarray  # x0 rows of these jobs (a feasible start)

    def ratios(self, fractions: np.ndarray) -> np.ndarray:
        """w_j rho_j(x) per job (inf for a job x gives no throughput)."""
        return self.ratios_at((self.throughputs * fractions).sum(axis=1))

    def ratios_at(self, rates: np.ndarray) -> np.ndarray:
        """w_j rho_j per job when job j makes rates[j] steps/s (a job with no steps left
        needs no time)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            time_left = np.where(
                rates > 0, self.remaining / rates, np.where(self.remaining > 0, np.inf, 0.0)
            )
        return (self.elapsed + time_left) / self.horizon

    def demand(self, rho: float) -> np.ndarray:
        """The throughput each job needs for w_j rho_j <= rho (rho above `lower_bound`; a job
        with no steps left needs none)."""
        if self.remaining.all():
            return self.remaining / (rho * self.horizon - self.elapsed)
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = self.remaining / (rho * self.horizon - self.elapsed)
        return np.where(self.remaining > 0, needed, 0.0)

    @property
    def lower_bound(self) -> float:
        return float(np.max(self.elapsed / self.horizon))

    @property
    def upper_bound(self) -> float:
        return float(np.max(self.ratios(self.isolated)))


JOBS_WITHOUT_STEPS = ("leave_out", "shockwave")


@dataclass(frozen=True, slots=True)
class FinishTimeFairnessOptions:
    # A job with no steps left that still runs: "leave_out" (no share, not in the max) or
    # "shockwave" (as Shockwave's simulator treats it; see the module docstring).
    jobs_without_steps: str = "leave_out"

    def __post_init__(self) -> None:
        if self.jobs_without_steps not in JOBS_WITHOUT_STEPS:
            raise ValueError(
                f"jobs_without_steps must be one of {', '.join(JOBS_WITHOUT_STEPS)}, "
                f"got '{self.jobs_without_steps}'"
            )


class FinishTimeFairness(Policy):

    # Its objective over parts of the cluster (--partitions): the largest part's.
    part_objectives = PartObjectives.MAX
    problem_class = ProblemClass.LP  # the bisection: a sequence of feasibility LPs

    def __init__(
        self, heterogeneity_aware: bool, options: FinishTimeFairnessOptions | None = None
    ) -> None:
        self.options = options or FinishTimeFairnessOptions()
        self.heterogeneity_aware = heterogeneity_aware
        self.name = "finish_time_fairness_perf" if heterogeneity_aware else "finish_time_fairness"
        self.description = (
            "Themis finish-time fairness, min max rho (heterogeneity-aware, Gavel)"
            if heterogeneity_aware
            else "Themis finish-time fairness, every type at the job's V100 throughput"
        )
        self._attained: dict[int, float] = {}  # C_j, kept for every job seen (as Gavel)
        self._previous: dict[int, tuple[float, float]] = {}  # job -> (R_j, iso_j) last call

    def for_run(self, seed: int) -> FinishTimeFairness:
        return FinishTimeFairness(self.heterogeneity_aware, self.options)

    def with_options(self, values: Mapping[str, str]) -> Policy:
        options = typed_options(self.options, values, self.name)
        return FinishTimeFairness(self.heterogeneity_aware, options)

    def snapshot(self) -> dict[str, Any]:
        return {"attained": by_job(self._attained), "previous": by_job(self._previous)}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._attained = job_keyed(snapshot["attained"], float)
        self._previous = job_keyed(
            snapshot["previous"], lambda pair: (float(pair[0]), float(pair[1]))
        )

    @property
    def attained_isolated_time(self) -> dict[int, float]:
        """C_j: the isolated time credited to each job so far in this run."""
        return dict(self._attained)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            self._previous = {}
            return Allocation.empty(problem.worker_types)
        throughputs = (
            problem.throughputs if self.heterogeneity_aware else agnostic_throughputs(problem)
        )
        x0 = isolated_fractions(problem.capacity, problem.scale_factors)
        isolated = (throughputs * x0).sum(axis=1)
        remaining = problem.steps_remaining
        attained = self._credit(keys, remaining, isolated)
        shockwave = self.options.jobs_without_steps == "shockwave"
        if shockwave and (remaining < 0).any():
            # Shockwave's model is not convex then: it falls back to the isolated allocation
            # before it records this call's steps.
            return Allocation(keys, problem.worker_types, x0, None)
        # Updated before solving, as Gavel does, so a failed solve does not skew the next call.
        self._previous = {
            k: (float(r), float(i)) for k, r, i in zip(keys, remaining, isolated, strict=True)
        }

        with np.errstate(divide="ignore", invalid="ignore"):
            horizon = (attained + remaining / isolated) / problem.priority_weights
        counted = (remaining > 0) & (isolated > 0)
        if shockwave:
            # A job with none left counts with its fixed ratio (and gets a share).
            counted |= (remaining == 0) & (isolated > 0) & np.isfinite(horizon) & (horizon != 0)
        fractions = np.zeros_like(throughputs)
        if not counted.any():
            return Allocation(keys, problem.worker_types, fractions, 0.0)
        ftf = FinishTimeProblem(
            throughputs=throughputs[counted],
            scale=problem.scale_factors[counted],
            capacity=problem.capacity,
            remaining=remaining[counted],
            elapsed=problem.times_since_arrival[counted],
            horizon=horizon[counted],
            isolated=x0[counted],
        )
        return self.solve(problem, counted, ftf, solver)

    def solve(
        self, problem: PolicyInput, counted: np.ndarray, ftf: FinishTimeProblem, solver: SolverSpec
    ) -> Allocation:
        """The allocation minimising the largest ratio of the counted jobs (the rest get 0)."""
        keys = tuple(job.job_id for job in problem.jobs)
        fractions = np.zeros_like(problem.throughputs)
        x = bisect(ftf, solver)
        fractions[counted] = x
        return Allocation(keys, problem.worker_types, fractions, float(ftf.ratios(x).max()))

    def _credit(
        self, keys: tuple[int, ...], remaining: np.ndarray, isolated: np.ndarray
    ) -> np.ndarray:
        """C_j += (R_prev - R_now) / iso_prev for jobs seen last call; a new job starts at 0."""
        attained = np.empty(len(keys))
        for row, key in enumerate(keys):
            credit = self._attained.get(key, 0.0)
            previous = self._previous.get(key)
            if previous is not None and previous[1] > 0:
                credit += (previous[0] - remaining[row]) / previous[1]
            self._attained[key] = attained[row] = credit
        return attained


# --------------------------------------------------------------------------- the bisection


def feasibility_lp(ftf: FinishTimeProblem, demand: np.ndarray) -> tuple[MatrixLP, np.ndarray]:
    """a_j(x) >= demand_j plus the shared constraints, columns x[j, w] row-major.

    Rows 0..m-1 hold a_j(x) / iso_rate_j (scaled so both sides are about 1), rows m..2m-1
    sum_w x[j, w] <= 1, rows 2m..2m+n-1 the capacity. Returns the LP and the row scale.
    """
    m, n = ftf.throughputs.shape
    start, index = _feasibility_pattern(m, n)
    scale_rows = (ftf.throughputs * ftf.isolated).sum(axis=1)
    value = np.empty((m, n, 3))
    value[:, :, 0] = ftf.throughputs / scale_rows[:, None]
    value[:, :, 1] = 1.0
    value[:, :, 2] = ftf.scale[:, None]
    lp = MatrixLP(
        cost=np.zeros(m * n),
        col_lower=np.zeros(m * n),
        # No x <= 1 bounds: implied by the rows (and they would move the interior point).
        col_upper=np.full(m * n, np.inf),
        row_lower=np.concatenate([demand / scale_rows, np.full(m + n, -np.inf)]),
        row_upper=np.concatenate([np.full(m, np.inf), np.ones(m), ftf.capacity]),
        a_start=start,
        a_index=index,
        a_value=value.ravel(),
    )
    return lp, scale_rows


@lru_cache(maxsize=64)
def _feasibility_pattern(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Column starts and row indices of feasibility_lp, which depend only on its size."""
    jobs = np.repeat(np.arange(m), n)
    types = np.tile(np.arange(n), m)
    index = np.stack([jobs, m + jobs, 2 * m + types], axis=1).ravel().astype(np.int32)
    start = np.arange(0, 3 * m * n + 1, 3, dtype=np.int32)
    return start, index


def warm_bisection(
    sequence: LpSequence,
    ftf: FinishTimeProblem,
    scale_rows: np.ndarray,
    evaluate: Callable[[np.ndarray], tuple[np.ndarray, float]],
    best: np.ndarray,
    gap: float,
) -> tuple[np.ndarray, float]:
    """Bisection on rho over the LP of `sequence`, whose first m rows are the demand rows
    a_j(x) / scale_rows_j >= demand_j(rho) / scale_rows_j: only their bounds change, so each
    step re-solves from the previous basis (HiGHS). `evaluate(columns)` gives a feasible
    step's allocation and its own worst ratio, a tighter upper bound. Returns (best, upper)."""
    m = len(scale_rows)
    lower, upper = ftf.lower_bound, ftf.upper_bound
    rows = np.arange(m, dtype=np.int32)
    no_upper = np.full(m, np.inf)
    for _ in range(_MAX_STEPS):
        if upper - lower <= gap * upper:
            break
        rho = 0.5 * (lower + upper)
        sequence.set_row_bounds(rows, ftf.demand(rho) / scale_rows, no_upper)
        if sequence.run() is LpStatus.OPTIMAL:
            x, reached = evaluate(sequence.solution)
            # The vertex's own ratio is often below rho; within tolerances it may be a hair
            # above, so the bound moves at least to rho.
            upper = min(rho, reached)
            best = x
        else:
            lower = rho
    return best, upper


def bisect(ftf: FinishTimeProblem, spec: SolverSpec) -> np.ndarray:
    """Bisection on rho over one feasibility LP (HiGHS: warm-started dual simplex), then one
    interior-point solve at the bound it reached."""

    m, n = ftf.throughputs.shape
    best = ftf.isolated
    lp, scale_rows = feasibility_lp(ftf, ftf.demand(ftf.upper_bound))
    sequence = LpSequence(lp, spec)

    def evaluate(columns: np.ndarray) -> tuple[np.ndarray, float]:
        x = columns.reshape(m, n)
        return x, float(ftf.ratios(x).max())

    best, upper = warm_bisection(sequence, ftf, scale_rows, evaluate, best, RELATIVE_GAP)
    best = clean_fractions(best)
    final_lp, _ = feasibility_lp(ftf, ftf.demand(upper))
    try:
        interior = clean_fractions(solve_matrix_lp(final_lp, spec).reshape(m, n))
    except SolverError:
        return best  # the thin set defeated the interior-point method: keep the vertex
    reached = max(upper, float(ftf.ratios(best).max()))
    if ftf.ratios(interior).max() <= reached * (1 + RELATIVE_GAP):
        return interior
    return best


@hookimpl
def register_policies(register: Register) -> None:
    register(FinishTimeFairness(heterogeneity_aware=False))
    register(FinishTimeFairness(heterogeneity_aware=True))
