"""Water filling: the leximin (max-min, then max the second smallest, ...) allocation.

Given each job's weighted progress p_j(x) = sum P[j, c] x[c] over the unit columns (units.py),
repeat until every job is frozen:

1. level LP:  maximise t  s.t.  p_j(x) >= t (unfrozen j),  p_j(x) >= level_j (frozen j),
   the time and capacity rows;
2. find bottlenecked jobs: unfrozen jobs no optimal solution of that LP raises above t*;
3. freeze them at level t* and go on with the rest.

Every job ends at its own level and no job's level can rise without lowering one at or below
it (the definition of water filling). The leximin level vector is unique, so every solver
returns the same levels. Jobs with no progress anywhere are frozen at 0 from the start.

Step 2 differs by path. HiGHS (the fast path) reads the duals of the progress rows: a job
whose row has a positive dual is tight in every optimal solution (complementary slackness),
and the duals sum to 1, so each step freezes at least one job. The whole sequence is one LP
in one primal-simplex instance; a step changes only row bounds (a frozen job's level row is
switched off, its floor row on), so every solve starts from the previous basis. Other
solvers run on one Pyomo model with mutable parameters and ask the primal question
instead: with t fixed at t*, maximise the summed headroom e_j (p_j(x) - t - e_j >= 0,
0 <= e_j <= t*) of candidate jobs; those with e_j > 0 can rise and leave the candidates,
until no candidate has headroom (any that could rise would make the sum positive).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from shock.api import MatrixLP, SolverError, SolverSpec, highs_lp, lazy_module, solve_pyomo
from shock.plugins.policies.rate_lp import simplex_highs
from shock.plugins.policies.units import Units

if TYPE_CHECKING:
    import pyomo.environ as pyo
    import scipy.sparse as sparse
else:
    pyo = lazy_module("pyomo.environ")
    sparse = lazy_module("scipy.sparse")

# A job counts as raisable when its headroom exceeds this fraction of the level (and as
# tight when its progress is within it); frozen levels are kept this much below the level
# found, so the next LP stays feasible within the solver's tolerances.
_RAISE_TOLERANCE = 1e-6
_FREEZE_MARGIN = 1e-9
# A progress row's dual above this (the duals sum to 1) marks its job as a bottleneck.
_DUAL_TOLERANCE = 1e-9
# HiGHS' primal feasibility tolerance: how far frozen levels drop if a step is infeasible.
_RETRY_RELAXATION = 1e-7


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
        stuck = sequence.bottlenecks(level, unfrozen) & unfrozen
        if not stuck.any():
            # Numerically no job looked stuck: freeze the lowest (t* is the maximum).
            progress = sequence.progress()
            lowest = np.min(progress[unfrozen])
            stuck = unfrozen & (progress <= lowest * (1 + _RAISE_TOLERANCE))
        sequence.freeze(stuck, level * (1 - _FREEZE_MARGIN))
        levels[stuck] = level
        unfrozen &= ~stuck
    return levels


class _Sequence:
    """One LP changed in place between the steps of the sequence."""

    solves: int = 0

    def maximise_level(self) -> float:
        raise NotImplementedError

    def bottlenecks(self, level: float, unfrozen: np.ndarray) -> np.ndarray:
        """Jobs no allocation keeping every unfrozen job at `level` can raise above it."""
        raise NotImplementedError

    def freeze(self, jobs: np.ndarray, level: float) -> None:
        raise NotImplementedError

    def columns(self) -> np.ndarray:
        raise NotImplementedError

    def progress(self) -> np.ndarray:
        raise NotImplementedError


class _HighsSequence(_Sequence):
    """Columns x then t; rows: level rows p_j(x) - t >= 0 (unfrozen jobs), floor rows
    p_j(x) >= level_j (frozen jobs; free before), time, capacity. Bottlenecks come from the
    duals: a job whose level row has a positive dual is tight in every optimal solution
    (complementary slackness holds between any optimal primal and any optimal dual
    solution), so it cannot rise above t*. Those duals sum to 1 (t's cost), so every step
    freezes at least one job; a job that is tight everywhere but has a zero dual in this
    basis is frozen at a later step, at the same level."""

    def __init__(
        self,
        units: Units,
        progress: sparse.csr_matrix,
        in_objective: np.ndarray,
        solver: SolverSpec,
        warm_start: bool,
    ) -> None:
        m, c = units.num_jobs, units.num_columns
        self.m, self.c, self.t = m, c, c
        self.progress_rows = progress
        level_col = sparse.csr_matrix(-in_objective.astype(float)[:, None])
        n = units.num_types
        matrix = sparse.vstack(
            [
                sparse.hstack([progress, level_col]),
                sparse.hstack([progress, sparse.csr_matrix((m, 1))]),
                sparse.hstack([units.time_matrix(), sparse.csr_matrix((m, 1))]),
                sparse.hstack([units.capacity_matrix(), sparse.csr_matrix((n, 1))]),
            ]
        ).tocsc()
        cost = np.zeros(c + 1)
        cost[self.t] = -1.0
        self.lp = MatrixLP(
            cost=cost,
            col_lower=np.zeros(c + 1),
            col_upper=np.full(c + 1, np.inf),
            row_lower=np.concatenate([np.zeros(m), np.full(2 * m + n, -np.inf)]),
            row_upper=np.concatenate([np.full(2 * m, np.inf), np.ones(m), units.capacity]),
            a_start=matrix.indptr.astype(np.int32),
            a_index=matrix.indices.astype(np.int32),
            a_value=matrix.data.astype(float),
        )
        self.warm_start = warm_start
        # Freezing keeps the last solution feasible (a floor at the level it reached, a level
        # row relaxed), so primal simplex continues from it: 17-32x faster than dual simplex
        # at 512-1024 jobs (benchmarks/water_filling_timings.py).
        self.highs = simplex_highs(solver, primal=True)
        self.highs.passModel(highs_lp(self.lp))
        self.solution = np.zeros(c + 1)
        self.duals = np.zeros(m)
        self.frozen = np.zeros(m, dtype=bool)

    def maximise_level(self) -> float:
        import highspy

        highs = self.highs
        if not self.warm_start:
            # The same LP passed afresh (the benchmark's baseline): no basis to start from.
            highs.passModel(highs_lp(self.lp))
        highs.run()
        status = highs.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible and self.frozen.any():
            # Frozen levels a hair above what the last vertex met within HiGHS' tolerances:
            # lower them by the feasibility tolerance and solve again.
            rows = (np.flatnonzero(self.frozen) + self.m).astype(np.int32)
            self.lp.row_lower[rows] -= _RETRY_RELAXATION
            highs.changeRowsBounds(
                len(rows), rows, self.lp.row_lower[rows], self.lp.row_upper[rows]
            )
            highs.run()
            status = highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(
                f"HiGHS ended with {highs.modelStatusToString(status)} (water-filling step)"
            )
        solution = highs.getSolution()
        self.solution = np.asarray(solution.col_value)
        self.duals = np.abs(np.asarray(solution.row_dual)[: self.m])
        self.solves += 1
        return float(self.solution[self.t])

    def bottlenecks(self, level: float, unfrozen: np.ndarray) -> np.ndarray:
        tight = self.progress() <= level * (1 + _RAISE_TOLERANCE) + 1e-12
        return unfrozen & tight & (self.duals > _DUAL_TOLERANCE)

    def freeze(self, jobs: np.ndarray, level: float) -> None:
        # Only bounds change (the level row is switched off, the floor row on), so the
        # basis stays valid for the next solve.
        self.frozen |= jobs
        level_rows = np.flatnonzero(jobs).astype(np.int32)
        rows = np.concatenate([level_rows, level_rows + self.m]).astype(np.int32)
        self.lp.row_lower[level_rows] = -np.inf
        self.lp.row_lower[level_rows + self.m] = level
        if self.warm_start:
            self.highs.changeRowsBounds(
                len(rows), rows, self.lp.row_lower[rows], self.lp.row_upper[rows]
            )

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
        model.max_headroom = pyo.Objective(
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
        model.max_headroom.deactivate()
        model.max_level.activate()
        self._solve()
        return float(model.level.value or 0.0)

    def bottlenecks(self, level: float, unfrozen: np.ndarray) -> np.ndarray:
        """With t fixed at the level, maximise the candidates' summed headroom; every job
        with headroom can rise and leaves the candidates, until none has any. Solvers'
        duals are not all available through Pyomo, so this asks the primal question."""
        candidates = unfrozen.copy()
        while candidates.any():
            headroom = self.maximise_headroom(level, candidates)
            raised = candidates & (headroom > _RAISE_TOLERANCE * max(level, 1e-12))
            if not raised.any():
                break
            candidates &= ~raised
        return candidates

    def maximise_headroom(self, level: float, candidates: np.ndarray) -> np.ndarray:
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
        model.max_headroom.activate()
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
