"""Max-min fairness with space sharing (Gavel's `max_min_fairness_packed`).

Units are single jobs and pairs of jobs sharing a gang. With x[u, w] the time fraction of unit
u on worker type w and A[j, u, w] job j's throughput inside unit u (its isolated throughput
alone, its co-located throughput in a pair):

    maximise  min_j  sf_j / (w_j T_equal[j]) * sum_{u containing j} sum_w A[j, u, w] x[u, w]
    s.t.      sum_{u containing j} sum_w x[u, w] <= 1          (a job is in one unit at a time)
              sum_u sf_u x[u, w] <= capacity_w                  (a pair uses one gang)

T_equal[j] is the isolated throughput under an equal share of every type, as in
`max_min_fairness_perf`. A job paired with an identical job (same type) gets the mean of the
pair's two measured throughputs, so identical jobs stay interchangeable.

Every solver is handed this LP over classes of identical jobs (same type, gang size and
weight): by symmetry the optimum is the job-level LP's, and the LP has one row per class
instead of one per job and one column per class pair instead of one per job pair (quadratic in
jobs). The class solution is then carried by few concrete pairs with the same per-job totals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    UnitKey,
    hookimpl,
    lazy_module,
    solve_matrix_lp,
)
from shock.plugins.policies.packing import (
    ClassPair,
    JobClass,
    class_pairs,
    concrete_pairs,
    job_classes,
)

if TYPE_CHECKING:
    import scipy.sparse as sparse
else:
    sparse = lazy_module("scipy.sparse")


def _equal_share_throughput(problem: PolicyInput) -> np.ndarray:
    share = problem.capacity / problem.capacity.sum()
    equal = problem.throughputs @ share
    equal[equal <= 0] = np.inf
    return np.asarray(equal)


class MaxMinFairnessPacked(Policy):

    # Its objective over parts of the cluster (--partitions): the smallest part's floor.
    part_objectives = PartObjectives.MIN
    name = "max_min_fairness_packed"
    description = "LAS / max-min fairness with space sharing (pairs of jobs on one gang)"
    problem_class = ProblemClass.LP

    def progress_weights(self, problem: PolicyInput) -> np.ndarray:
        """Each job's weight in the max-min objective (0: the job is not in it)."""
        return np.asarray(
            problem.scale_factors / problem.priority_weights / _equal_share_throughput(problem)
        )

    def objective(self, problem: PolicyInput, floor: float) -> float:
        """The reported objective, from the optimal max-min level."""
        return floor

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        weights = self.progress_weights(problem)
        units, fractions, floor = self._solve_by_class(problem, weights, solver)
        return _allocation(problem, units, fractions, self.objective(problem, floor))

    # The class-level LP (every solver).

    def _solve_by_class(
        self, problem: PolicyInput, weights: np.ndarray, solver: SolverSpec
    ) -> tuple[list[UnitKey], np.ndarray, float]:
        classes = job_classes(problem, weights)
        pairs = class_pairs(problem, classes)
        lp = _class_lp(problem, classes, pairs, weights[[c.rows[0] for c in classes]])
        solution = solve_matrix_lp(lp, solver)
        n = len(problem.worker_types)
        k = len(classes)
        single = np.clip(solution[: k * n].reshape(k, n), 0.0, None)
        paired = np.clip(solution[k * n : -1].reshape(len(pairs), n), 0.0, None)
        units: list[UnitKey] = []
        rows: list[np.ndarray] = []
        for job_class, fractions in zip(classes, single, strict=True):
            for row in job_class.rows:
                units.append(problem.jobs[row].job_id)
                rows.append(fractions)
        for pair, fractions in zip(pairs, paired, strict=True):
            if fractions.max() <= 1e-9:
                continue
            first, second = classes[pair.first], classes[pair.second]
            carriers, factor = concrete_pairs(first, second, pair.first == pair.second)
            for a, b in carriers:
                ids = sorted((problem.jobs[a].job_id, problem.jobs[b].job_id))
                units.append((ids[0], ids[1]))
                rows.append(fractions * factor)
        return units, np.array(rows), float(solution[-1])


def _class_lp(
    problem: PolicyInput, classes: list[JobClass], pairs: list[ClassPair], weight: np.ndarray
) -> MatrixLP:
    """Columns: x[class, w], then y[class pair, w] (per concrete pair), then the floor t.
    Rows: fairness per class (t - progress <= 0), time per class (<= 1), capacity per type."""
    n = len(problem.worker_types)
    k = len(classes)
    size = np.array([len(c.rows) for c in classes], float)
    gang = np.array([c.scale_factor for c in classes], float)
    first_rows = [c.rows[0] for c in classes]
    isolated = problem.throughputs[first_rows]
    row_index: list[int] = []
    col_index: list[int] = []
    values: list[float] = []

    def put(row: int, col: int, value: float) -> None:
        row_index.append(row)
        col_index.append(col)
        values.append(value)

    fair, time, cap = 0, k, 2 * k
    for c in range(k):
        for w in range(n):
            column = c * n + w
            put(fair + c, column, -weight[c] * isolated[c, w])
            put(time + c, column, 1.0)
            put(cap + w, column, size[c] * gang[c])
    for p, pair in enumerate(pairs):
        same = pair.first == pair.second
        a, b = pair.first, pair.second
        count = size[a] * (size[a] - 1) / 2 if same else size[a] * size[b]
        for w in range(n):
            column = k * n + p * n + w
            if same:
                # Each job of the class is in (size - 1) of the class's pairs.
                put(fair + a, column, -weight[a] * (size[a] - 1) * pair.rates[w, 0])
                put(time + a, column, size[a] - 1)
            else:
                put(fair + a, column, -weight[a] * size[b] * pair.rates[w, 0])
                put(fair + b, column, -weight[b] * size[a] * pair.rates[w, 1])
                put(time + a, column, size[b])
                put(time + b, column, size[a])
            put(cap + w, column, count * gang[a])
    floor = k * n + len(pairs) * n
    for c in range(k):
        if weight[c] > 0:  # a class with weight 0 is not in the max-min objective
            put(fair + c, floor, 1.0)
    num_rows = 2 * k + n
    matrix = sparse.csc_matrix((values, (row_index, col_index)), shape=(num_rows, floor + 1))
    matrix.sum_duplicates()
    cost = np.zeros(floor + 1)
    cost[-1] = -1.0
    return MatrixLP(
        cost=cost,
        col_lower=np.concatenate([np.zeros(floor), [-np.inf]]),
        col_upper=np.full(floor + 1, np.inf),
        row_lower=np.full(num_rows, -np.inf),
        row_upper=np.concatenate([np.zeros(k), np.ones(k), problem.capacity.astype(float)]),
        a_start=matrix.indptr.astype(np.int32),
        a_index=matrix.indices.astype(np.int32),
        a_value=matrix.data.astype(float),
    )


def _allocation(
    problem: PolicyInput, units: list[UnitKey], fractions: np.ndarray, objective: float
) -> Allocation:
    fractions = np.where(fractions < 1e-9, 0.0, fractions)
    keep = [i for i, u in enumerate(units) if isinstance(u, int) or fractions[i].max() > 0]
    return Allocation(
        tuple(units[i] for i in keep),
        problem.worker_types,
        fractions[keep].reshape(len(keep), len(problem.worker_types)),
        objective,
    )


@hookimpl
def register_policies(register: Register) -> None:
    register(MaxMinFairnessPacked())
