"""Throughput per dollar, optionally under SLOs (Gavel OSDI'20 section 4.2, "minimize cost").

With c[j, w] = w_j T[j, w] / max_v T[j, v] (normalised throughput, see max_sum_throughput)
and the cluster's cost rate  g(x) = sum_w price_w sum_j sf_j x[j, w]  ($ per hour):

    maximise_x  f(x) / g(x),   f(x) = sum_j sum_w c[j, w] x[j, w],
    subject to the shared constraints (time_fraction_lp) and, in the SLO variant,
    a_j(x) = sum_w T[j, w] x[j, w] >= R_j / (deadline_j - now)  for jobs with an SLO.

(Gavel's code maximises the linear sum_w T x / price_w instead; this is the paper's ratio.)

Linear-fractional, so exact as an LP by the Charnes-Cooper transformation: with y = s x and
s = 1 / g(x) > 0,

    maximise  f(y)   s.t.  g(y) = 1,  sum_w y[j, w] <= s,  sum_j sf_j y[j, w] <= capacity_w s,
                            a_j(y) >= (R_j / (deadline_j - now)) s,   y, s >= 0,

whose optimum is the best ratio r*. The ratio alone does not fix the scale (without SLOs,
halving every x keeps it; indeed its optimum then only uses the (job, type) pairs with the
best c[j, w] / (price_w sf_j)), so a second LP picks, among the allocations that reach r*,
the one with the most normalised throughput:

    maximise f(x)   s.t.  f(x) - r* g(x) >= 0 (linear), the shared and the SLO constraints.

SLOs: job j's deadline is arrival_j + slo_j * total_steps_j / max_w T[j, w] (its SLO times its
run time alone on its best type). A deadline that has passed, or that the job could not meet
even with the whole cluster to itself, is missed whatever we do: that job becomes best effort
(no constraint). If the remaining SLOs cannot all be met together, every one of them is
relaxed by the same factor, the largest that fits (an LP: maximise l <= 1 subject to
a_j(x) >= l R_j / (deadline_j - now)), so they fall short in equal proportion.
Gavel instead drops all SLO constraints when they do not fit.

Prices come from the run's --prices; both policies refuse to run without them.
"""

from __future__ import annotations

import numpy as np

from shock.api import (
    Allocation,
    MatrixLP,
    PartObjectives,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    ShockError,
    SolverError,
    SolverSpec,
    hookimpl,
    solve_matrix_lp,
)
from shock.plugins.policies.rate_lp import (
    base_triplets,
    best_solo_rate,
    matrix_lp,
    normalised_throughput_coefficients,
    rate_triplets,
)
from shock.plugins.policies.time_fraction_lp import clean_fractions

# Requirements and the best ratio are used this much below what the LPs found, so that the
# next LP stays feasible within its solver's tolerances.
_MARGIN = 1e-7


def slo_targets(problem: PolicyInput) -> tuple[np.ndarray, np.ndarray]:
    """(rows, required steps/s) of the jobs whose SLO can still be met; the rest are missed."""
    throughputs = problem.throughputs
    best = throughputs.max(axis=1) if throughputs.shape[1] else np.zeros(len(throughputs))
    solo = best_solo_rate(throughputs, problem.scale_factors, problem.capacity)
    remaining = problem.steps_remaining
    rows: list[int] = []
    required: list[float] = []
    for row, job in enumerate(problem.jobs):
        if job.slo is None or best[row] <= 0 or remaining[row] <= 0:
            continue
        deadline = job.arrival_time + job.slo * job.total_steps / best[row]
        if deadline <= problem.now:
            continue  # missed: best effort from now on
        need = remaining[row] / (deadline - problem.now)
        if need > solo[row]:
            continue  # missed even with the cluster to itself
        rows.append(row)
        required.append(need)
    return np.array(rows, dtype=np.intp), np.array(required, dtype=float)


def cost_rate(prices: np.ndarray, scale: np.ndarray, fractions: np.ndarray) -> float:
    """g(x) in $ per hour."""
    return float(prices @ (scale @ fractions))


class CostNormalisedThroughput(Policy):

    # Its objective (a sum over jobs) over parts of the cluster (--partitions): the sum.
    part_objectives = PartObjectives.SUM
    problem_class = ProblemClass.LP

    def __init__(self, slos: bool) -> None:
        self.slos = slos
        self.name = "max_sum_throughput_normalized_by_cost_perf" + ("_SLOs" if slos else "")
        self.description = (
            "maximum normalised throughput per dollar"
            + (", meeting SLO deadlines" if slos else "")
            + " (heterogeneity-aware, Gavel)"
        )

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        prices = self._prices(problem)
        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            return Allocation.empty(problem.worker_types)
        coefficients = normalised_throughput_coefficients(problem)
        m, n = coefficients.shape
        scale = problem.scale_factors
        full_cost = float(prices @ problem.capacity)
        if full_cost <= 0 or not coefficients.any():
            return Allocation(keys, problem.worker_types, np.zeros((m, n)), 0.0)
        # Cost per unit time fraction, as a share of the whole cluster's cost (about 1).
        costs = prices[None, :] * scale[:, None] / full_cost
        slo_rows, required = slo_targets(problem) if self.slos else (np.zeros(0, np.intp), None)
        targets = None
        if required is not None and len(slo_rows):
            # Rows of T / required: a_j(x) / required_j >= level.
            targets = problem.throughputs[slo_rows] / required[:, None]
        lps = _Lps(problem, coefficients, costs, slo_rows, targets, solver)
        level = 1.0
        if targets is not None:
            level = min(1.0, lps.slo_level()) * (1 - _MARGIN)
        ratio, start = lps.best_ratio(level)
        try:
            x = lps.most_throughput(level, ratio * (1 - _MARGIN))
        except SolverError:
            x = start  # keep the Charnes-Cooper solution (same ratio, maybe less throughput)
        dollars = cost_rate(prices, scale, x)
        objective = float((coefficients * x).sum()) / dollars if dollars > 0 else 0.0
        return Allocation(keys, problem.worker_types, x, objective)

    def _prices(self, problem: PolicyInput) -> np.ndarray:
        if problem.prices is None:
            raise ShockError(f"policy '{self.name}' needs prices (--prices)")
        prices = np.asarray(problem.prices, dtype=float)
        if prices.shape != (len(problem.worker_types),) or np.any(prices <= 0):
            raise ShockError(
                f"policy '{self.name}' needs a positive price for each worker type "
                f"({', '.join(problem.worker_types)}); got {problem.prices}"
            )
        return prices


class _Lps:
    """The three LPs of one allocation, in matrix form (HiGHS directly, any other solver
    through Pyomo).

    Columns x[j, w] = j * n + w (or y for Charnes-Cooper) come first; rows 0..m-1 are the
    per-job time rows, m..m+n-1 capacity, then one row per SLO job.
    """

    def __init__(
        self,
        problem: PolicyInput,
        coefficients: np.ndarray,
        costs: np.ndarray,
        slo_rows: np.ndarray,
        targets: np.ndarray | None,
        solver: SolverSpec,
    ) -> None:
        self.problem = problem
        self.c = coefficients
        self.g = costs
        self.slo_rows = slo_rows
        self.targets = targets if targets is not None else np.zeros((0, coefficients.shape[1]))
        self.solver = solver
        self.m, self.n = coefficients.shape
        self.k = len(slo_rows)

    # ---------------------------------------------------------------- level of the SLOs

    def slo_level(self) -> float:
        """The largest l <= 1 such that every SLO job can get l times its required rate."""
        m, n, k = self.m, self.n, self.k
        cost = np.zeros(m * n + 1)
        cost[-1] = -1.0
        lp = self._matrix(
            cost,
            col_upper=np.concatenate([np.full(m * n, np.inf), [1.0]]),
            base_rhs_column=None,
            slo_lower=np.zeros(k),
            slo_column=-np.ones(k),
        )
        return float(solve_matrix_lp(lp, self.solver)[-1])

    # ---------------------------------------------------------------- Charnes-Cooper

    def best_ratio(self, level: float) -> tuple[float, np.ndarray]:
        """r* = max f(x) / g(x) (in units of the cluster's full cost) and x = y / s."""
        m, n, k = self.m, self.n, self.k
        lp = self._matrix(
            np.concatenate([-self.c.ravel(), [0.0]]),
            col_upper=np.full(m * n + 1, np.inf),
            base_rhs_column=np.concatenate([-np.ones(m), -self.problem.capacity]),
            slo_lower=np.zeros(k),
            slo_column=-np.full(k, level),
            cost_row=True,
        )
        solution = solve_matrix_lp(lp, self.solver)
        y, s = solution[:-1].reshape(m, n), float(solution[-1])
        ratio = float((self.c * y).sum())
        x = clean_fractions(y / s) if s > 0 else np.zeros((m, n))
        return ratio, x

    # ---------------------------------------------------------------- most throughput at r*

    def most_throughput(self, level: float, ratio: float) -> np.ndarray:
        """max f(x) s.t. f(x) - ratio g(x) >= 0, the shared and the SLO constraints."""
        m, n, k = self.m, self.n, self.k
        efficiency = self.c - ratio * self.g
        lp = self._matrix(
            -self.c.ravel(),
            col_upper=np.full(m * n, np.inf),
            base_rhs_column=None,
            slo_lower=np.full(k, level),
            slo_column=None,
            efficiency=efficiency,
        )
        return clean_fractions(solve_matrix_lp(lp, self.solver).reshape(m, n))

    # ---------------------------------------------------------------- builders

    def _matrix(
        self,
        cost: np.ndarray,
        col_upper: np.ndarray,
        base_rhs_column: np.ndarray | None,
        slo_lower: np.ndarray,
        slo_column: np.ndarray | None,
        cost_row: bool = False,
        efficiency: np.ndarray | None = None,
    ) -> MatrixLP:
        """The shared rows (capacities moved to an extra column's coefficients when
        `base_rhs_column` is given, as Charnes-Cooper needs), the SLO rows
        a_j(x) / required_j + slo_column * extra >= slo_lower, then optional rows
        g(y) = 1 or efficiency . x >= 0."""
        m, n, k = self.m, self.n, self.k
        extra = m * n  # the extra column (level or s), when there is one
        triplets = [base_triplets(self.problem.scale_factors, n, first_row=0)]
        rhs = np.concatenate([np.ones(m), self.problem.capacity])
        lower = [np.full(m + n, -np.inf)]
        upper = [rhs if base_rhs_column is None else np.zeros(m + n)]
        if base_rhs_column is not None:
            triplets.append((np.arange(m + n), np.full(m + n, extra), base_rhs_column))
        slo_first = m + n
        slo_row_index = slo_first + np.arange(k)
        triplets.append(rate_triplets(self.targets, slo_row_index, self.slo_rows))
        if slo_column is not None and k:
            triplets.append((slo_row_index, np.full(k, extra), slo_column))
        lower.append(slo_lower)
        upper.append(np.full(k, np.inf))
        next_row = slo_first + k
        for row_coefficients, bounds in (
            (self.g if cost_row else None, (1.0, 1.0)),
            (efficiency, (0.0, np.inf)),
        ):
            if row_coefficients is None:
                continue
            triplets.append((np.full(m * n, next_row), np.arange(m * n), row_coefficients.ravel()))
            lower.append(np.array([bounds[0]]))
            upper.append(np.array([bounds[1]]))
            next_row += 1
        return matrix_lp(
            cost,
            col_bounds=(np.zeros(len(cost)), col_upper),
            row_bounds=(np.concatenate(lower), np.concatenate(upper)),
            triplets=triplets,
        )


@hookimpl
def register_policies(register: Register) -> None:
    register(CostNormalisedThroughput(slos=False))
    register(CostNormalisedThroughput(slos=True))
