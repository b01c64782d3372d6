"""Finish-time fairness with space sharing (Gavel's `finish_time_fairness_packed`).

As finish_time_fairness_perf (same ratios, priority weights and attained isolated time, the
isolated allocation as reference), but a job's throughput a_j(x) sums its throughput alone
and inside every pair it may share a gang with (units.py):

    minimise_x  max_j  w_j rho_j(x),   rho_j = (t_j + R_j / a_j(x)) / (C_j + R_j / iso_j)
    s.t. per job: time alone and in its pairs <= 1;  per type: sum_u gang_u x[u, w] <= N_w

The same exact LP reformulation applies (w_j rho_j <= rho  <=>  a_j(x) >= R_j / (rho D_j -
t_j)), so the policy bisects on rho over feasibility LPs. HiGHS re-solves one LP with a
warm-started dual simplex, changing only the demand rows' bounds; every feasible vertex's own
largest ratio tightens the upper bound, and that vertex is the allocation (a vertex uses few
pairs). Any other LP solver runs the same bisection over the same LP, as one Pyomo model whose
demand bounds change in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from shock.api import (
    Allocation,
    LpSequence,
    MatrixLP,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    UnitKey,
    hookimpl,
    lazy_module,
)
from shock.plugins.policies.finish_time_fairness import (
    FinishTimeFairness,
    FinishTimeProblem,
    warm_bisection,
)
from shock.plugins.policies.rate_lp import subproblem
from shock.plugins.policies.units import Units, clean_unit_fractions, job_units

if TYPE_CHECKING:
    import scipy.sparse as sparse
else:
    sparse = lazy_module("scipy.sparse")

# Tighter than finish_time_fairness' 1e-6: every solver then lands within 1e-8 of the optimum.
RELATIVE_GAP = 1e-8


class FinishTimeFairnessPacked(FinishTimeFairness):
    problem_class = ProblemClass.LP

    def __init__(self) -> None:
        super().__init__(heterogeneity_aware=True)
        self.name = "finish_time_fairness_packed"
        self.description = "Themis finish-time fairness with space sharing (pairs on one gang)"

    def for_run(self, seed: int) -> FinishTimeFairnessPacked:
        return FinishTimeFairnessPacked()

    def with_options(self, values: Mapping[str, str]) -> Policy:
        return Policy.with_options(self, values)  # it takes none

    def solve(
        self, problem: PolicyInput, counted: np.ndarray, ftf: FinishTimeProblem, solver: SolverSpec
    ) -> Allocation:
        units = job_units(subproblem(problem, counted, ftf.throughputs), packed=True)
        fractions = clean_unit_fractions(_bisect(units, ftf, solver))
        objective = float(ftf.ratios_at(units.job_rates(fractions)).max())
        allocation = units.allocation(problem, fractions, objective)
        # Jobs whose ratio no allocation changes are in no unit: give them empty rows.
        rows: dict[UnitKey, np.ndarray] = dict(
            zip(allocation.keys, allocation.fractions, strict=True)
        )
        empty = np.zeros(len(problem.worker_types))
        keys: list[UnitKey] = [job.job_id for job in problem.jobs]
        keys += [k for k in allocation.keys if isinstance(k, tuple)]
        return Allocation(
            tuple(keys),
            problem.worker_types,
            np.array([rows.get(k, empty) for k in keys]).reshape(
                len(keys), len(problem.worker_types)
            ),
            objective,
        )


def _isolated_columns(units: Units, ftf: FinishTimeProblem) -> np.ndarray:
    """The isolated allocation (a feasible start) as unit fractions."""
    fractions = np.zeros((len(units.keys), units.num_types))
    fractions[: units.num_jobs] = ftf.isolated
    return fractions


def _bisect(units: Units, ftf: FinishTimeProblem, spec: SolverSpec) -> np.ndarray:
    m = units.num_jobs
    # Demand rows scaled by the isolated rate, so both sides are about 1.
    scale_rows = (ftf.throughputs * ftf.isolated).sum(axis=1)
    progress = sparse.diags(1.0 / scale_rows) @ units.progress_matrix(np.ones(m))
    matrix = sparse.vstack([progress, units.time_matrix(), units.capacity_matrix()]).tocsc()
    best = _isolated_columns(units, ftf)
    lp = MatrixLP(
        cost=np.zeros(units.num_columns),
        col_lower=np.zeros(units.num_columns),
        col_upper=np.full(units.num_columns, np.inf),
        row_lower=np.concatenate(
            [ftf.demand(ftf.upper_bound) / scale_rows, np.full(m + units.num_types, -np.inf)]
        ),
        row_upper=np.concatenate([np.full(m, np.inf), np.ones(m), units.capacity]),
        a_start=matrix.indptr.astype(np.int32),
        a_index=matrix.indices.astype(np.int32),
        a_value=matrix.data.astype(float),
    )
    sequence = LpSequence(lp, spec)

    def evaluate(columns: np.ndarray) -> tuple[np.ndarray, float]:
        x = units.fractions(columns)
        return x, float(ftf.ratios_at(units.job_rates(x)).max())

    best, _ = warm_bisection(sequence, ftf, scale_rows, evaluate, best, RELATIVE_GAP)
    return best


@hookimpl
def register_policies(register: Register) -> None:
    register(FinishTimeFairnessPacked())
