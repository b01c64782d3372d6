"""Shockwave's plan: which jobs run in each of the next T rounds.

    maximise  sum_j w_j log(progress_j) - k * M / (T x round length)
    s.t.      sum_j gpus_j x[j, t] <= G                    every round t (gangs whole)
              M >= remaining_j - round length * n_j        every job (M: largest remaining)
              n_j >= ftf_min_rounds_j                      (tried first, dropped if infeasible)
              n_j = sum_t x[j, t],  x binary

progress_j = min(1, progress now + n_j x progress per round). log is concave and n_j takes
integer values only, so the piecewise-linear function through log(progress) at n = 0..T is
exact at every feasible point: u_j <= each of its T pieces, no extra binaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from shock.core.errors import SolverError
from shock.core.solver import MatrixLP, SolverSpec, solve_matrix_milp

# log(0) is -inf: progress is floored here (a job that has not started).
MIN_PROGRESS = 1e-4


@dataclass(frozen=True, slots=True)
class PlanJob:
    job_id: int
    gpus: int
    progress: float  # fraction of its epochs done
    progress_per_round: float
    remaining_s: float  # predicted run time left, alone
    weight: float  # finish-time-fairness weight of its log utility
    ftf_min_rounds: int = 0


@dataclass(frozen=True, slots=True)
class PlanProblem:
    jobs: tuple[PlanJob, ...]
    num_rounds: int
    capacity: int
    round_length_s: float
    k: float
    # Pieces of each log utility; 0 (or >= num_rounds): one per round, exact at integers.
    log_pieces: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    job_ids: tuple[int, ...]
    rounds: np.ndarray  # [job, round] in {0, 1}
    ftf_enforced: bool
    objective: float = 0.0  # the maximised welfare

    def rounds_of(self, job_id: int) -> int:
        return int(self.rounds[self.job_ids.index(job_id)].sum())


def breakpoints(num_rounds: int, pieces: int) -> list[int]:
    """Round counts where the piecewise-linear log meets the log (chords in between)."""
    if pieces <= 0 or pieces >= num_rounds:
        return list(range(num_rounds + 1))
    return sorted({round(i * num_rounds / pieces) for i in range(pieces + 1)})


def log_progress_points(job: PlanJob, num_rounds: int) -> list[float]:
    """log(progress) after n = 0..T planned rounds (capped at 1, floored at MIN_PROGRESS)."""
    return [
        math.log(max(MIN_PROGRESS, min(1.0, job.progress + n * job.progress_per_round)))
        for n in range(num_rounds + 1)
    ]


def _matrix(problem: PlanProblem, enforce_ftf: bool) -> tuple[MatrixLP, np.ndarray]:
    jobs, t_count = problem.jobs, problem.num_rounds
    n_jobs = len(jobs)
    n_x = n_jobs * t_count
    u0, m_col = n_x, n_x + n_jobs
    n_cols = m_col + 1
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def add_row(entries: Sequence[tuple[int, float]], lo: float, hi: float) -> None:
        row = len(lower)
        for col, val in entries:
            rows.append(row)
            cols.append(col)
            vals.append(val)
        lower.append(lo)
        upper.append(hi)

    for t in range(t_count):
        add_row(
            [(j * t_count + t, float(job.gpus)) for j, job in enumerate(jobs)],
            -math.inf,
            float(problem.capacity),
        )
    for j, job in enumerate(jobs):
        x_cols = range(j * t_count, (j + 1) * t_count)
        points = log_progress_points(job, t_count)
        marks = breakpoints(t_count, problem.log_pieces)
        for a, b in pairwise(marks):
            slope = (points[b] - points[a]) / (b - a)
            # u_j - slope * n_j <= log P(a) - slope * a
            add_row(
                [(u0 + j, 1.0), *((c, -slope) for c in x_cols)],
                -math.inf,
                points[a] - slope * a,
            )
        add_row(
            [(m_col, 1.0), *((c, problem.round_length_s) for c in x_cols)],
            job.remaining_s,
            math.inf,
        )
        if enforce_ftf and job.ftf_min_rounds > 0:
            add_row([(c, 1.0) for c in x_cols], float(min(job.ftf_min_rounds, t_count)), math.inf)
    cost = np.zeros(n_cols)
    cost[u0:m_col] = [-job.weight for job in jobs]
    cost[m_col] = problem.k / (t_count * problem.round_length_s)
    col_lower = np.concatenate([np.zeros(n_x), np.full(n_jobs, -math.inf), [0.0]])
    col_upper = np.concatenate([np.ones(n_x), np.full(n_jobs, math.inf), [math.inf]])
    order = np.lexsort((np.array(rows), np.array(cols)))
    col_array = np.array(cols)[order]
    starts = np.searchsorted(col_array, np.arange(n_cols + 1))
    lp = MatrixLP(
        cost=cost,
        col_lower=col_lower,
        col_upper=col_upper,
        row_lower=np.array(lower),
        row_upper=np.array(upper),
        a_start=starts.astype(np.int32),
        a_index=np.array(rows, dtype=np.int32)[order],
        a_value=np.array(vals, dtype=float)[order],
    )
    integer = np.zeros(n_cols, dtype=bool)
    integer[:n_x] = True
    return lp, integer


def solve_plan(problem: PlanProblem, spec: SolverSpec, try_ftf: bool = True) -> Plan:
    """The plan with the finish-time-fairness constraint if it is feasible, else without."""
    ids = tuple(job.job_id for job in problem.jobs)
    if not problem.jobs:
        return Plan(ids, np.zeros((0, problem.num_rounds)), False)
    wants_ftf = try_ftf and any(job.ftf_min_rounds > 0 for job in problem.jobs)
    attempts = [True, False] if wants_ftf else [False]
    last_error: SolverError | None = None
    for enforce in attempts:
        lp, integer = _matrix(problem, enforce)
        try:
            values = solve_matrix_milp(lp, integer, spec)
        except SolverError as exc:
            last_error = exc
            continue
        n_x = len(problem.jobs) * problem.num_rounds
        rounds = np.rint(values[:n_x]).reshape(len(problem.jobs), problem.num_rounds)
        return Plan(ids, rounds.clip(0, 1), enforce, -float(lp.cost @ values))
    assert last_error is not None
    raise last_error
