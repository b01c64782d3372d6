"""Throughput per dollar under SLOs, with space sharing (Gavel's
`max_sum_throughput_normalized_by_cost_packed_SLOs`).

The three LPs of cost.py (SLO level, Charnes-Cooper ratio, most throughput at that ratio)
over units (units.py: every job alone and every pair that may share a gang) instead of jobs.
With x[u, w] the unit fractions, a_j(x) job j's steps/s alone and in its pairs, and
c_j = w_j / max_w T[j, w]:

    f(x) = sum_j c_j a_j(x)                            (normalised throughput)
    g(x) = sum_w price_w sum_u gang_u x[u, w]           (a pair pays for one gang)
    maximise f(x) / g(x)   s.t. per job: time alone and in pairs <= 1,
                                per type: sum_u gang_u x[u, w] <= N_w,
                                SLO jobs: a_j(x) >= level * R_j / (deadline_j - now)

with the SLOs, their common relaxation `level` and the missed ones as in cost.py. Two jobs
sharing a GPU are billed once, so packing raises the ratio whenever a pair's combined
normalised throughput beats either job alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from shock.api import (
    Allocation,
    PolicyInput,
    Register,
    RowBlock,
    SolverError,
    SolverSpec,
    blocks_lp,
    hookimpl,
    lazy_module,
    solve_matrix_lp,
)
from shock.plugins.policies.cost import _MARGIN, CostNormalisedThroughput, slo_targets
from shock.plugins.policies.units import Units, clean_unit_fractions, job_units

if TYPE_CHECKING:
    import scipy.sparse as sparse
else:
    sparse = lazy_module("scipy.sparse")


class CostNormalisedThroughputPacked(CostNormalisedThroughput):
    def __init__(self) -> None:
        super().__init__(slos=True)
        self.name = "max_sum_throughput_normalized_by_cost_packed_SLOs"
        self.description = (
            "maximum normalised throughput per dollar, meeting SLO deadlines, with space sharing"
        )

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        prices = self._prices(problem)
        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        units = job_units(problem, packed=True)
        best = problem.throughputs.max(axis=1)
        value = np.where(best > 0, problem.priority_weights / np.where(best > 0, best, 1.0), 0.0)
        f = np.asarray(units.progress_matrix(value).sum(axis=0)).ravel()
        full_cost = float(prices @ problem.capacity)
        if full_cost <= 0 or not f.any():
            return units.allocation(problem, np.zeros((len(units.keys), units.num_types)), 0.0)
        lps = _PackedLps(units, f, prices / full_cost, problem, solver)
        level = min(1.0, lps.slo_level()) * (1 - _MARGIN) if lps.k else 1.0
        ratio, start = lps.best_ratio(level)
        try:
            x = lps.most_throughput(level, ratio * (1 - _MARGIN))
        except SolverError:
            x = start  # the Charnes-Cooper solution: same ratio, maybe less throughput
        x = clean_unit_fractions(x)
        dollars = float(prices @ (units.gang @ x))
        objective = float(f @ x.ravel()) / dollars if dollars > 0 else 0.0
        return units.allocation(problem, x, objective)


class _PackedLps:
    """Columns x[u, w] (u * n + w), then at most one extra column (the level or s)."""

    def __init__(
        self,
        units: Units,
        f: np.ndarray,
        relative_prices: np.ndarray,
        problem: PolicyInput,
        solver: SolverSpec,
    ) -> None:
        self.units, self.f, self.solver = units, f, solver
        self.g = np.tile(relative_prices, len(units.keys)) * np.repeat(units.gang, units.num_types)
        rows, required = slo_targets(problem)
        self.k = len(rows)
        inverse = np.zeros(units.num_jobs)
        inverse[rows] = 1.0 / required
        self.slo = units.progress_matrix(inverse).tocsr()[rows]  # a_j(x) / required_j
        self.time = units.time_matrix()
        self.capacity = units.capacity_matrix()

    def _with_column(self, matrix: sparse.spmatrix, column: np.ndarray) -> sparse.spmatrix:
        return sparse.hstack([matrix, sparse.csr_matrix(column.reshape(-1, 1))])

    def slo_level(self) -> float:
        """The largest l <= 1 such that every SLO job can get l times its required rate."""
        units, k = self.units, self.k
        m, n = units.num_jobs, units.num_types
        cost = np.zeros(units.num_columns + 1)
        cost[-1] = -1.0
        blocks = [
            RowBlock(
                "time", self._with_column(self.time, np.zeros(m)), np.full(m, -np.inf), np.ones(m)
            ),
            RowBlock(
                "capacity",
                self._with_column(self.capacity, np.zeros(n)),
                np.full(n, -np.inf),
                units.capacity,
            ),
            RowBlock(
                "slo", self._with_column(self.slo, -np.ones(k)), np.zeros(k), np.full(k, np.inf)
            ),
        ]
        upper = np.concatenate([np.full(units.num_columns, np.inf), [1.0]])
        return float(solve_matrix_lp(blocks_lp(cost, blocks, upper), self.solver)[-1])

    def best_ratio(self, level: float) -> tuple[float, np.ndarray]:
        """Charnes-Cooper: max f(y) s.t. g(y) = 1 and the rows scaled by s; x = y / s."""
        units, k = self.units, self.k
        m, n = units.num_jobs, units.num_types
        blocks = [
            RowBlock(
                "time", self._with_column(self.time, -np.ones(m)), np.full(m, -np.inf), np.zeros(m)
            ),
            RowBlock(
                "capacity",
                self._with_column(self.capacity, -units.capacity),
                np.full(n, -np.inf),
                np.zeros(n),
            ),
            RowBlock(
                "unit cost",
                self._with_column(sparse.csr_matrix(self.g.reshape(1, -1)), np.zeros(1)),
                np.ones(1),
                np.ones(1),
            ),
            RowBlock(
                "slo",
                self._with_column(self.slo, -np.full(k, level)),
                np.zeros(k),
                np.full(k, np.inf),
            ),
        ]
        cost = np.concatenate([-self.f, [0.0]])
        upper = np.full(units.num_columns + 1, np.inf)
        solution = solve_matrix_lp(blocks_lp(cost, blocks, upper), self.solver)
        y, s = np.clip(solution[:-1], 0.0, None), float(solution[-1])
        ratio = float(self.f @ y)
        x = units.fractions(y / s) if s > 0 else np.zeros((len(units.keys), n))
        return ratio, x

    def most_throughput(self, level: float, ratio: float) -> np.ndarray:
        """max f(x) s.t. f(x) - ratio g(x) >= 0, the unit and the SLO constraints."""
        units, k = self.units, self.k
        m, n = units.num_jobs, units.num_types
        blocks = [
            RowBlock("time", self.time, np.full(m, -np.inf), np.ones(m)),
            RowBlock("capacity", self.capacity, np.full(n, -np.inf), units.capacity),
            RowBlock("slo", self.slo, np.full(k, level), np.full(k, np.inf)),
            RowBlock(
                "ratio reached",
                sparse.csr_matrix((self.f - ratio * self.g).reshape(1, -1)),
                np.zeros(1),
                np.full(1, np.inf),
            ),
        ]
        upper = np.full(units.num_columns, np.inf)
        return units.fractions(solve_matrix_lp(blocks_lp(-self.f, blocks, upper), self.solver))


@hookimpl
def register_policies(register: Register) -> None:
    register(CostNormalisedThroughputPacked())
