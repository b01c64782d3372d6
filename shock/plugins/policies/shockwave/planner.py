"""Shockwave's plan: how many of the next T rounds each job gets, then which rounds.

The plan (Shockwave's `dynamic_eisenberg_gale_scheduling`), for N jobs, G GPUs, rounds of R s:

    maximise  sum_j w_j u_j / (N T)  -  k M
    s.t.      u_j <= chord_s((e_j + p_j) / E_j)     every piece s of the piecewise-linear log
              d_j p_j <= R n_j                      planned epochs fit the planned rounds
              0 <= p_j <= E_j - e_j
              M >= r_j - d_j p_j,  M >= 0           M: the longest predicted time left
              sum_j gpus_j n_j <= G T               GPU-rounds of the window
              r_j - d_j p_j <= s_j                  finish-time fairness (tried first)
              n_j in {0, ..., T}

e_j, E_j: epochs done and in all; p_j: epochs planned (continuous); d_j: mean epoch duration
so far; r_j: predicted remaining run time; s_j: the most run time that may be left after the
window for the job to finish by its fair-finish target. The log goes through log(base) at
Shockwave's bases (0, 0.2, ..., 1; log(0) is replaced by log(origin)); it is concave, so u_j
below every chord is exact and needs no binaries. The FTF plan has w = 1; when it is
infeasible the plan is solved again without the constraint, with w_j the job's priority.

Which rounds (`rank_rounds`, Shockwave's `rank_in_schedule_jobs`): a second MILP keeps each
job's round count and every round's GPU capacity and minimises
sum_j priority_j x (mean index of its rounds), so high-priority jobs run early in the window.
A greedy placement is the fallback when the MILP finds nothing in its time limit, and the
default (faster): round by round, the jobs that must run in every round left to keep their
count, then the others by priority per planned round.

Deviation from Shockwave: Shockwave's first MILP has a binary per job and round. Its rounds
are interchangeable there (only their count enters the objective), so shock solves for the
counts n_j with the window's GPU-rounds as capacity, and the ranking step places them round
by round. A count that cannot be placed whole (gang fragmentation) is placed as far as it
fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from shock.api import MatrixLP, SolverError, SolverSpec, solve_matrix_milp

# Shockwave's tacc_32gpus configuration and its scheduler's log origin.
DEFAULT_LOG_BASES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
DEFAULT_LOG_ORIGIN = 1e-6


@dataclass(frozen=True, slots=True)
class PlanJob:
    job_id: int
    gpus: int
    epochs: float  # E_j
    epochs_done: float  # e_j
    epoch_s: float  # d_j, mean epoch duration so far
    remaining_s: float  # r_j, predicted run time left (alone)
    priority: float = 1.0  # w_j when the FTF constraint is relaxed
    ftf_slack_s: float = math.inf  # s_j; negative: the FTF constraint cannot hold


@dataclass(frozen=True, slots=True)
class PlanProblem:
    jobs: tuple[PlanJob, ...]
    num_rounds: int
    capacity: int
    round_length_s: float
    k: float
    log_bases: tuple[float, ...] = DEFAULT_LOG_BASES
    log_origin: float = DEFAULT_LOG_ORIGIN


@dataclass(frozen=True, slots=True)
class Plan:
    job_ids: tuple[int, ...]
    rounds: np.ndarray  # [job, round] in {0, 1}
    ftf_enforced: bool
    objective: float = 0.0
    counts: tuple[int, ...] = field(default=())  # rounds the first MILP gave each job
    ranked_by_milp: bool = True

    def rounds_of(self, job_id: int) -> int:
        return int(self.rounds[self.job_ids.index(job_id)].sum())


class _Matrix:
    """Rows of a MILP collected entry by entry, turned into HiGHS's column-wise form."""

    def __init__(self, n_cols: int) -> None:
        self.n_cols = n_cols
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []

    def add(self, entries: Sequence[tuple[int, float]], lo: float, hi: float) -> None:
        row = len(self.lower)
        for col, val in entries:
            self.rows.append(row)
            self.cols.append(col)
            self.vals.append(val)
        self.lower.append(lo)
        self.upper.append(hi)

    def lp(self, cost: np.ndarray, col_lower: np.ndarray, col_upper: np.ndarray) -> MatrixLP:
        order = np.lexsort((np.array(self.rows), np.array(self.cols)))
        col_array = np.array(self.cols, dtype=np.int64)[order]
        starts = np.searchsorted(col_array, np.arange(self.n_cols + 1))
        return MatrixLP(
            cost=cost,
            col_lower=col_lower,
            col_upper=col_upper,
            row_lower=np.array(self.lower, dtype=float),
            row_upper=np.array(self.upper, dtype=float),
            a_start=starts.astype(np.int32),
            a_index=np.array(self.rows, dtype=np.int32)[order],
            a_value=np.array(self.vals, dtype=float)[order],
        )


def log_points(bases: Sequence[float], origin: float) -> list[float]:
    """The piecewise-linear log's value at each base (log(origin) at 0)."""
    return [math.log(origin) if base <= 0 else math.log(base) for base in bases]


def log_utility(progress: float, bases: Sequence[float], origin: float) -> float:
    """The piecewise-linear log at a progress fraction in [0, 1]."""
    values = log_points(bases, origin)
    progress = min(max(progress, 0.0), 1.0)
    for i in range(len(bases) - 1):
        if progress <= bases[i + 1]:
            share = (progress - bases[i]) / (bases[i + 1] - bases[i])
            return values[i] + share * (values[i + 1] - values[i])
    return values[-1]


def _count_model(problem: PlanProblem, with_ftf: bool) -> tuple[MatrixLP, np.ndarray]:
    """Columns: n_j (N), p_j (N), u_j (N), M."""
    jobs, t_count, round_s = problem.jobs, problem.num_rounds, problem.round_length_s
    n = len(jobs)
    n0, p0, u0, m_col = 0, n, 2 * n, 3 * n
    matrix = _Matrix(3 * n + 1)
    bases = problem.log_bases
    values = log_points(bases, problem.log_origin)
    matrix.add(
        [(n0 + j, float(job.gpus)) for j, job in enumerate(jobs)],
        -math.inf,
        float(problem.capacity * t_count),
    )
    for j, job in enumerate(jobs):
        epochs = max(job.epochs, 1e-9)
        done = min(job.epochs_done / epochs, 1.0)
        for i in range(len(bases) - 1):
            slope = (values[i + 1] - values[i]) / (bases[i + 1] - bases[i])
            # u_j - slope / E_j * p_j <= value_i + slope * (e_j / E_j - base_i)
            matrix.add(
                [(u0 + j, 1.0), (p0 + j, -slope / epochs)],
                -math.inf,
                values[i] + slope * (done - bases[i]),
            )
        matrix.add([(p0 + j, job.epoch_s), (n0 + j, -round_s)], -math.inf, 0.0)
        matrix.add([(m_col, 1.0), (p0 + j, job.epoch_s)], job.remaining_s, math.inf)
        if with_ftf:
            matrix.add([(p0 + j, job.epoch_s)], job.remaining_s - job.ftf_slack_s, math.inf)
    cost = np.zeros(3 * n + 1)
    scale = 1.0 / (max(n, 1) * t_count)
    cost[u0 : u0 + n] = [-(1.0 if with_ftf else job.priority) * scale for job in jobs]
    cost[m_col] = problem.k
    col_lower = np.concatenate([np.zeros(2 * n), np.full(n, -math.inf), [0.0]])
    col_upper = np.concatenate(
        [
            np.full(n, float(t_count)),
            [max(job.epochs - job.epochs_done, 0.0) for job in jobs],
            np.full(n, math.inf),
            [math.inf],
        ]
    )
    integer = np.zeros(3 * n + 1, dtype=bool)
    integer[:n] = True
    return matrix.lp(cost, col_lower, col_upper), integer


def solve_counts(
    problem: PlanProblem, spec: SolverSpec, with_ftf: bool
) -> tuple[np.ndarray, float]:
    """Rounds per job in the window, and the plan's objective (the maximised welfare)."""
    lp, integer = _count_model(problem, with_ftf)
    values = solve_matrix_milp(lp, integer, spec)
    counts = np.rint(values[: len(problem.jobs)]).clip(0, problem.num_rounds).astype(int)
    return counts, -float(lp.cost @ values)


def greedy_rounds(
    counts: Sequence[int],
    gpus: Sequence[int],
    priorities: Sequence[float],
    capacity: int,
    num_rounds: int,
    least_slack_first: bool = False,
) -> np.ndarray:
    """Round by round, while GPUs are left: first the jobs that must run in every round left
    to keep their count, then the others by priority per planned round (high first). With
    `least_slack_first`, all jobs by their slack (rounds left in the window minus rounds
    they still need; low first), then by priority per planned round."""
    rounds = np.zeros((len(counts), num_rounds))
    left = list(counts)
    by_weight = sorted(
        (j for j, c in enumerate(counts) if c > 0),
        key=lambda j: (-priorities[j] / counts[j], j),
    )
    for t in range(num_rounds):
        rounds_left = num_rounds - t
        waiting = [j for j in by_weight if left[j] > 0]
        if least_slack_first:
            order = sorted(waiting, key=lambda j: rounds_left - left[j])  # stable: weight next
        else:
            order = sorted(waiting, key=lambda j: left[j] < rounds_left)
        free = capacity
        for j in order:
            if gpus[j] <= free:
                free -= gpus[j]
                rounds[j, t] = 1.0
                left[j] -= 1
    return rounds


def rank_rounds(
    counts: Sequence[int],
    gpus: Sequence[int],
    priorities: Sequence[float],
    capacity: int,
    num_rounds: int,
    spec: SolverSpec,
) -> tuple[np.ndarray, bool]:
    """Place each job's rounds in the window: minimise sum_j priority_j x mean round index,
    keeping counts and capacity (MILP); greedy when the MILP finds nothing. Returns the rounds
    and whether the MILP placed them."""
    planned = [j for j, c in enumerate(counts) if c > 0]
    if not planned:
        return np.zeros((len(counts), num_rounds)), True
    t_count = num_rounds
    matrix = _Matrix(len(planned) * t_count)
    cost = np.zeros(len(planned) * t_count)
    for i, j in enumerate(planned):
        cols = range(i * t_count, (i + 1) * t_count)
        matrix.add([(c, 1.0) for c in cols], float(counts[j]), float(counts[j]))
        cost[i * t_count : (i + 1) * t_count] = priorities[j] / counts[j] * np.arange(t_count)
    for t in range(t_count):
        matrix.add(
            [(i * t_count + t, float(gpus[j])) for i, j in enumerate(planned)],
            -math.inf,
            float(capacity),
        )
    lp = matrix.lp(cost, np.zeros(len(cost)), np.ones(len(cost)))
    try:
        values = solve_matrix_milp(lp, np.ones(len(cost), dtype=bool), spec)
    except SolverError:
        return greedy_rounds(counts, gpus, priorities, capacity, num_rounds), False
    rounds = np.zeros((len(counts), num_rounds))
    placed = np.rint(values).reshape(len(planned), t_count).clip(0, 1)
    for i, j in enumerate(planned):
        rounds[j] = placed[i]
    return rounds, True


def solve_plan(
    problem: PlanProblem, spec: SolverSpec, try_ftf: bool = True, ranking: str = "milp"
) -> Plan:
    """The FTF plan if it is feasible, else the priority-weighted plan; rounds ranked."""
    ids = tuple(job.job_id for job in problem.jobs)
    if not problem.jobs:
        return Plan(ids, np.zeros((0, problem.num_rounds)), False)
    # A job whose fair-finish target is before the window's end cannot meet it: skip the solve.
    ftf_possible = try_ftf and all(job.ftf_slack_s >= 0 for job in problem.jobs)
    enforced = False
    if ftf_possible:
        try:
            counts, objective = solve_counts(problem, spec, with_ftf=True)
            enforced = True
        except SolverError:
            enforced = False
    if not enforced:
        counts, objective = solve_counts(problem, spec, with_ftf=False)
    count_list = [int(c) for c in counts]
    priorities = [1.0 if enforced else job.priority for job in problem.jobs]
    gpus = [job.gpus for job in problem.jobs]
    if ranking == "milp":
        rounds, by_milp = rank_rounds(
            count_list, gpus, priorities, problem.capacity, problem.num_rounds, spec
        )
    else:
        rounds = greedy_rounds(
            count_list,
            gpus,
            priorities,
            problem.capacity,
            problem.num_rounds,
            least_slack_first=ranking == "slack",
        )
        by_milp = False
    return Plan(ids, rounds, enforced, objective, tuple(count_list), by_milp)
