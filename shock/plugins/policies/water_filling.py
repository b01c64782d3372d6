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

The sequence is one LP, stated once in matrix form (columns x then t; rows: level rows
p_j(x) - t >= 0 of unfrozen jobs, floor rows p_j(x) >= level_j of frozen jobs, time,
capacity), re-solved with new bounds and costs, never a new matrix. Step 2 reads what the
solver gives. HiGHS (the fast path) gives the duals of the level rows: a job whose row has a
positive dual is tight in every optimal solution (complementary slackness), and the duals sum
to 1, so each step freezes at least one job. Its solves run in one primal-simplex instance
from the previous basis. Through Pyomo, where not every solver gives duals, the same LP asks
the primal question instead: with t fixed at t*, maximise the summed progress of the
candidate jobs; those above t* can rise and leave the candidates, until none rises (any that
could rise would make the sum larger).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shock.api import LpSequence, LpStatus, MatrixLP, SolverError, SolverSpec, lazy_module
from shock.plugins.policies.units import Units

if TYPE_CHECKING:
    import scipy.sparse as sparse
else:
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
    sequence = _FillingLp(units, progress, in_objective, solver, warm_start)
    levels = _fill(sequence, in_objective)
    return WaterFillingResult(units.fractions(sequence.columns()), levels * scale, sequence.solves)


def _fill(sequence: _FillingLp, in_objective: np.ndarray) -> np.ndarray:
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


class _FillingLp:
    """The water-filling LP, changed in place between the steps of the sequence."""

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
        self.level_cost = cost.copy()
        lp = MatrixLP(
            cost=cost,
            col_lower=np.zeros(c + 1),
            col_upper=np.full(c + 1, np.inf),
            row_lower=np.concatenate([np.zeros(m), np.full(2 * m + n, -np.inf)]),
            row_upper=np.concatenate([np.full(2 * m, np.inf), np.ones(m), units.capacity]),
            a_start=matrix.indptr.astype(np.int32),
            a_index=matrix.indices.astype(np.int32),
            a_value=matrix.data.astype(float),
        )
        # Freezing keeps the last solution feasible (a floor at the level it reached, a level
        # row relaxed), so primal simplex continues from it: 17-32x faster than dual simplex
        # at 512-1024 jobs (benchmarks/water_filling_timings.py). `warm_start=False` hands
        # HiGHS the LP afresh for every solve (that benchmark's baseline).
        self.sequence = LpSequence(lp, solver, primal=True, repass=not warm_start)
        self.lp = lp
        self.solution = np.zeros(c + 1)
        self.duals = np.zeros(m)
        self.frozen = np.zeros(m, dtype=bool)
        self.solves = 0

    def _run(self) -> None:
        if self.sequence.run() is LpStatus.INFEASIBLE:
            if not self.frozen.any():
                raise SolverError("the water-filling LP is infeasible")
            # Frozen levels a hair above what the last vertex met within the solver's
            # tolerances: lower them by the feasibility tolerance and solve again.
            rows = (np.flatnonzero(self.frozen) + self.m).astype(np.int32)
            lower = self.lp.row_lower[rows] - _RETRY_RELAXATION
            self.sequence.set_row_bounds(rows, lower, self.lp.row_upper[rows].copy())
            if self.sequence.run() is LpStatus.INFEASIBLE:
                raise SolverError("the water-filling LP is infeasible (a water-filling step)")
        self.solution = self.sequence.solution
        self.solves += 1

    def maximise_level(self) -> float:
        self._run()
        if self.sequence.row_duals is not None:
            self.duals = np.abs(self.sequence.row_duals[: self.m])
        return float(self.solution[self.t])

    def bottlenecks(self, level: float, unfrozen: np.ndarray) -> np.ndarray:
        """Jobs no allocation keeping every unfrozen job at `level` can raise above it.

        From duals: a job whose level row has a positive dual is tight in every optimal
        solution (complementary slackness holds between any optimal primal and any optimal
        dual solution). A job tight everywhere but with a zero dual in this basis is frozen
        at a later step, at the same level."""
        if self.sequence.gives_duals:
            tight = self.progress() <= level * (1 + _RAISE_TOLERANCE) + 1e-12
            return unfrozen & tight & (self.duals > _DUAL_TOLERANCE)
        return self._primal_bottlenecks(level, unfrozen)

    def _primal_bottlenecks(self, level: float, unfrozen: np.ndarray) -> np.ndarray:
        """With t fixed at `level`, maximise the candidates' summed progress; every job
        above the level can rise and leaves the candidates, until none rises."""
        t = np.array([self.t], dtype=np.int32)
        self.sequence.set_col_bounds(t, np.array([level]), np.array([level]))
        candidates = unfrozen.copy()
        while candidates.any():
            cost = np.zeros(self.c + 1)
            cost[: self.c] = -np.asarray(
                self.progress_rows[np.flatnonzero(candidates)].sum(axis=0)
            ).ravel()
            self.sequence.set_costs(cost)
            self._run()
            raised = candidates & (self.progress() > level * (1 + _RAISE_TOLERANCE) + 1e-12)
            if not raised.any():
                break
            candidates &= ~raised
        self.sequence.set_col_bounds(t, np.zeros(1), np.full(1, np.inf))
        self.sequence.set_costs(self.level_cost)
        return candidates

    def freeze(self, jobs: np.ndarray, level: float) -> None:
        # Only bounds change (the level row is switched off, the floor row on), so the
        # basis stays valid for the next solve.
        self.frozen |= jobs
        level_rows = np.flatnonzero(jobs).astype(np.int32)
        rows = np.concatenate([level_rows, level_rows + self.m]).astype(np.int32)
        lower = self.lp.row_lower[rows].copy()
        lower[: len(level_rows)] = -np.inf
        lower[len(level_rows) :] = level
        self.sequence.set_row_bounds(rows, lower, self.lp.row_upper[rows].copy())

    def columns(self) -> np.ndarray:
        return np.asarray(self.solution[: self.c])

    def progress(self) -> np.ndarray:
        return np.asarray(self.progress_rows @ self.solution[: self.c]).ravel()
