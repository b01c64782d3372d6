"""Water filling: the leximin (max-min, then max the second smallest, ...) allocation.

Given each job's weighted progress p_j(x) = sum P[j, c] x[c] over the unit columns (units.py),
repeat until every job is frozen:

1. level LP:  maximise t  s.t.  p_j(x) >= t (unfrozen j),  p_j(x) >= level_j (frozen j),
   the time and capacity rows;
2. find the bottlenecked jobs: those no allocation keeping the LP's constraints at t* can
   raise above t*. With t fixed at t*, maximise sum_{j in C} e_j over slack columns
   0 <= e_j <= t* (p_j(x) - t - e_j >= 0) for the candidates C (initially the unfrozen
   jobs); every job with e_j > 0 can be raised and leaves C; repeat until no e_j is
   positive. What is left of C cannot be raised (any one that could would make the sum
   positive), and C is never empty (t* is the maximum);
3. freeze C at level t* and go on with the rest.

Every job ends at its own level and no job's level can rise without lowering one at or below
it (the definition of water filling). The leximin level vector is unique, so every solver
returns the same levels. Jobs with no progress anywhere are frozen at 0 from the start.

The HiGHS path keeps one LP in one dual-simplex instance for the whole sequence: each step
changes only bounds, costs and a coefficient per frozen job, so every solve is warm-started
from the previous basis. Other solvers run the same sequence on one Pyomo model whose
bounds and objective coefficients are mutable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo
import scipy.sparse as sparse

from shock.core.errors import SolverError
from shock.core.solver import MatrixLP, SolverSpec, highs_lp, solve_pyomo
from shock.plugins.policies.rate_lp import simplex_highs
from shock.plugins.policies.units import Units

# A job counts as raisable when its slack exceeds this fraction of the level; frozen levels
# are kept this much below the level found, so the next LP stays feasible within tolerances.
_RAISE_TOLERANCE = 1e-6
_FREEZE_MARGIN = 1e-9


@dataclass(frozen=True, slots=True)
class WaterFillingResult:
    fractions: np.ndarray  # units x worker types
    levels: np.ndarray  # each job's weighted progress level (0 for jobs not in the objective)
    lp_solves: int


def water_fill(
    units: Units, weights: np.ndarray, solver: SolverSpec, warm_start: bool = True
) -> WaterFillingResult:
    """The water-filling allocation for progress weights (0: the job is not in it).

    `warm_start=False` re-passes the LP to HiGHS for every solve (for the benchmark that
    measures what keeping one instance saves)."""
    progress = units.progress_matrix(weights)
    in_objective = (weights > 0) & (np.asarray(progress.max(axis=1).todense()).ravel() > 0)
    # Levels of O(1) keep the solvers' absolute tolerances relative.
    scale = float(progress.max()) if progress.nnz else 1.0
    progress = progress / (scale if scale > 0 else 1.0)
    if solver.uses_fast_path:
        sequence: _Sequence = _HighsSequence(units, progress, in_objective, solver, warm_start)
    else:
        sequence = _PyomoSequence(units, progress, in_objective, solver)
    levels = _fill(sequence, in_objective)
    return WaterFillingResult(units.fractions(sequence.columns()), levels * scale, sequence.solves)


def _fill(sequence: _Sequence, in_objective: np.ndarray) -> np.ndarray:
    levels = np.zeros(len(in_objective))
    unfrozen = in_objective.copy()
    while unfrozen.any():
        level = sequence.maximise_level()
        candidates = unfrozen.copy()
        while candidates.any():
            slack = sequence.maximise_slack(level, candidates)
            raised = candidates & (slack > _RAISE_TOLERANCE * max(level, 1e-12))
            if not raised.any():
                break
            candidates &= ~raised
        if not candidates.any():
            # Numerically every job looked raisable: freeze the lowest (t* is the maximum).
            progress = sequence.progress()
            lowest = np.min(progress[unfrozen])
            candidates = unfrozen & (progress <= lowest * (1 + _RAISE_TOLERANCE))
        sequence.freeze(candidates, level * (1 - _FREEZE_MARGIN))
        levels[candidates] = level
        unfrozen &= ~candidates
    return levels


class _Sequence:
    """One LP changed in place: columns x (units x types), t, then e (one per job)."""

    solves: int = 0

    def maximise_level(self) -> float:
        raise NotImplementedError

    def maximise_slack(self, level: float, candidates: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def freeze(self, jobs: np.ndarray, level: float) -> None:
        raise NotImplementedError

    def columns(self) -> np.ndarray:
        raise NotImplementedError

    def progress(self) -> np.ndarray:
        raise NotImplementedError


class _HighsSequence(_Sequence):
    def __init__(
        self,
        units: Units,
        progress: sparse.csr_matrix,
        in_objective: np.ndarray,
        solver: SolverSpec,
        warm_start: bool,
    ) -> None:
        m = units.num_jobs
        c = units.num_columns
        self.m, self.c = m, c
        self.t = c
        self.progress_rows = progress
        level_col = sparse.csr_matrix(-in_objective.astype(float)[:, None])
        matrix = sparse.vstack(
            [
                sparse.hstack([progress, level_col, -sparse.identity(m)]),
                sparse.hstack([units.time_matrix(), sparse.csr_matrix((m, 1 + m))]),
                sparse.hstack(
                    [units.capacity_matrix(), sparse.csr_matrix((units.num_types, 1 + m))]
                ),
            ]
        ).tocsc()
        self.cost = np.zeros(c + 1 + m)
        self.col_lower = np.zeros(c + 1 + m)
        self.col_upper = np.concatenate([np.full(c + 1, np.inf), np.zeros(m)])
        self.row_lower = np.concatenate([np.zeros(m), np.full(m + units.num_types, -np.inf)])
        self.row_upper = np.concatenate([np.full(m, np.inf), np.ones(m), units.capacity])
        self.matrix = matrix
        self.warm_start = warm_start
        self.highs = simplex_highs(solver)
        self.solution = np.zeros(c + 1 + m)
        self._pass()

    def _pass(self) -> None:
        lp = MatrixLP(
            cost=self.cost,
            col_lower=self.col_lower,
            col_upper=self.col_upper,
            row_lower=self.row_lower,
            row_upper=self.row_upper,
            a_start=self.matrix.indptr.astype(np.int32),
            a_index=self.matrix.indices.astype(np.int32),
            a_value=self.matrix.data.astype(float),
        )
        self.highs.passModel(highs_lp(lp))

    def _solve(self) -> None:
        import highspy

        highs = self.highs
        if self.warm_start:
            highs.changeColsCost(
                len(self.cost), np.arange(len(self.cost), dtype=np.int32), self.cost
            )
            cols = np.arange(len(self.cost), dtype=np.int32)
            highs.changeColsBounds(len(cols), cols, self.col_lower, self.col_upper)
            rows = np.arange(self.m, dtype=np.int32)
            highs.changeRowsBounds(self.m, rows, self.row_lower[: self.m], self.row_upper[: self.m])
        else:
            self._pass()
        highs.run()
        status = highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(
                f"HiGHS ended with {highs.modelStatusToString(status)} (water-filling step)"
            )
        self.solution = np.asarray(highs.getSolution().col_value)
        self.solves += 1

    def maximise_level(self) -> float:
        self.cost[:] = 0.0
        self.cost[self.t] = -1.0
        self.col_lower[self.t], self.col_upper[self.t] = 0.0, np.inf
        self.col_upper[self.c + 1 :] = 0.0
        self._solve()
        return float(self.solution[self.t])

    def maximise_slack(self, level: float, candidates: np.ndarray) -> np.ndarray:
        e = self.c + 1
        self.cost[:] = 0.0
        self.cost[e:] = -candidates.astype(float)
        self.col_lower[self.t] = self.col_upper[self.t] = level
        self.col_upper[e:] = np.where(candidates, level, 0.0)
        self._solve()
        return np.asarray(self.solution[e:])

    def freeze(self, jobs: np.ndarray, level: float) -> None:
        for j in np.flatnonzero(jobs):
            self.row_lower[j] = level
            self.matrix[j, self.t] = 0.0  # the structure stays; the value is zero
            if self.warm_start:
                self.highs.changeCoeff(int(j), self.t, 0.0)

    def columns(self) -> np.ndarray:
        return np.asarray(self.solution[: self.c])

    def progress(self) -> np.ndarray:
        return np.asarray(self.progress_rows @ self.solution[: self.c]).ravel()


class _PyomoSequence(_Sequence):
    def __init__(
        self,
        units: Units,
        progress: sparse.csr_matrix,
        in_objective: np.ndarray,
        solver: SolverSpec,
    ) -> None:
        self.units, self.solver, self.n = units, solver, units.num_types
        self.progress_rows = progress
        model = units.pyomo_model()
        model.level = pyo.Var(domain=pyo.NonNegativeReals)
        model.headroom = pyo.Var(model.J, domain=pyo.NonNegativeReals)
        model.level_coefficient = pyo.Param(
            model.J, mutable=True, initialize=lambda _, j: float(in_objective[j])
        )
        model.floor = pyo.Param(model.J, mutable=True, initialize=0.0)
        model.headroom_weight = pyo.Param(model.J, mutable=True, initialize=0.0)
        coo = progress.tocoo()
        terms: list[list[tuple[int, float]]] = [[] for _ in range(units.num_jobs)]
        for row, col, value in zip(coo.row, coo.col, coo.data, strict=True):
            terms[int(row)].append((int(col), float(value)))
        n = self.n
        model.fill = pyo.Constraint(
            model.J,
            rule=lambda mo, j: (
                sum(value * mo.x[col // n, col % n] for col, value in terms[j])
                - mo.level_coefficient[j] * mo.level
                - mo.headroom[j]
                >= mo.floor[j]
            ),
        )
        model.max_level = pyo.Objective(expr=model.level, sense=pyo.maximize)
        model.max_slack = pyo.Objective(
            expr=sum(model.headroom_weight[j] * model.headroom[j] for j in model.J),
            sense=pyo.maximize,
        )
        self.model: Any = model

    def _solve(self) -> None:
        solve_pyomo(self.model, self.solver)
        self.solves += 1

    def maximise_level(self) -> float:
        model = self.model
        model.level.unfix()
        for j in model.J:
            model.headroom[j].fix(0.0)
        model.max_slack.deactivate()
        model.max_level.activate()
        self._solve()
        return float(model.level.value or 0.0)

    def maximise_slack(self, level: float, candidates: np.ndarray) -> np.ndarray:
        model = self.model
        model.level.fix(level)
        for j in model.J:
            if candidates[j]:
                model.headroom[j].unfix()
                model.headroom[j].setub(level)
            else:
                model.headroom[j].fix(0.0)
            model.headroom_weight[j] = float(candidates[j])
        model.max_level.deactivate()
        model.max_slack.activate()
        self._solve()
        return np.array([model.headroom[j].value or 0.0 for j in model.J])

    def freeze(self, jobs: np.ndarray, level: float) -> None:
        for j in np.flatnonzero(jobs):
            self.model.level_coefficient[int(j)] = 0.0
            self.model.floor[int(j)] = level

    def columns(self) -> np.ndarray:
        x = self.model.x
        return np.array([x[u, w].value or 0.0 for u in self.model.U for w in self.model.W])

    def progress(self) -> np.ndarray:
        return np.asarray(self.progress_rows @ self.columns()).ravel()
