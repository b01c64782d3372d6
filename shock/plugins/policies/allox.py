"""AlloX (Le et al., EuroSys 2020): least average completion time by min-cost matching.

Single GPUs first (AlloX and Gavel's `allox`). Job i has R_i steps left and runs at T[i, w]
steps/s on worker type w, so it takes p[i, w] = R_i / T[i, w] seconds there. Each GPU ("lane")
runs its queue one job after another. A job that is k-th from the *end* of its lane's queue
delays itself and the k - 1 jobs behind it, so it adds k * p to the sum of completion times.
Minimising the sum over all lanes and orders is therefore the assignment problem of Horn
(1973) and Bruno, Coffman and Sethi (1974)

    min  sum_{i, (g, k)} k * p[i, type(g)] * y[i, (g, k)]
    s.t. sum_{(g, k)} y[i, (g, k)] = 1 for every job,  sum_i y[i, (g, k)] <= 1 for every slot,

whose constraint matrix is totally unimodular: the matching is the exact optimum of R||sum C
for the jobs it considers. It is solved with scipy's `linear_sum_assignment` (Jonker-Volgenant)
on the rectangular jobs x slots matrix (loaded without the rest of `scipy.optimize`, see
`_assignment_solver`), so the policy needs no LP solver: problem class
HEURISTIC (also because the gang extension and the start rule below are heuristics).
The job at the *front* of each lane (its largest k) starts now, with fraction 1.0 on that
type; everyone else waits for the next allocation.

Lanes of one type are identical, so (moving a job to a shorter queue of the same type lowers
its k) every optimum keeps their queue lengths within one of each other; positions
k <= ceil(M / L_w) suffice for M jobs on L_w lanes, and slot (w, k) is L_w identical columns.
If c_k jobs of type w sit at level k, c_k - c_{k+1} lanes have their front at level k; jobs of
one level are interchangeable between lanes, so the shorter ones are taken as the fronts.

Multi-GPU jobs (Gavel's AlloX asserts scale factor 1). A type of N_w GPUs is still N_w lanes,
and a gang of s GPUs is matched to one lane with lane time s * p[i, w]: it takes s * p
GPU-seconds from the type, which is what a single-GPU job of length s * p would take, so to
the jobs queued on that type it costs the same. With s = 1 this is exactly AlloX's matching;
for larger gangs it orders a type's queue by GPU-time, smallest first, which would be optimal
if a job's work could be spread over any number of the type's GPUs (one machine of speed
N_w). A type is offered to a gang only if it can run it now (T > 0 and s <= free GPUs of the
type). Since a gang holds one lane but needs s GPUs, the fronts of a type can ask for more
GPUs than it has free; they are started greedily in queue order (fronts first, higher levels
first, then smaller lane time) while they fit, and GPUs still free after that go, in the same
order, to the jobs queued behind them, so no GPU of a type idles while a job matched to that
type fits on it.

Non-preemptive, as in Gavel: a job once started keeps its type until it finishes; each new
allocation matches only the waiting jobs onto the GPUs the running ones leave free.

Fairness knob `alpha` in [0, 1] (Gavel's `allox_alpha=X`): of the M waiting jobs that can
start now, only the longest-waiting max(floor(alpha * M), free GPUs) are matched. alpha = 1
(`allox`) matches them all and minimises average completion time without regard to waiting.
Gavel also adds each job's waiting time to every one of its slot costs; that is the same
constant on a row of the assignment, so it cannot change the matching and is left out.
Priority weights are ignored, as in AlloX. The allocation's objective is the matching's cost.

Option `gavel_gangs=true` (set by `--preset shockwave`) reproduces how Gavel's and Shockwave's
AlloX treat gangs instead: every job's lane time is R_i / T[i, w] whatever its size, a gang at
the front of a lane gets a share 1/s_i of that type (not the s_i GPUs it needs), and since its
shares never add up to 1 it counts as not started: it is matched again at every allocation and
keeps the shares it had. Only started single-GPU jobs hold GPUs out of the matching, so the
shares can ask a type for more GPUs than it has; the mechanism's priorities then decide which
jobs run each round. Jobs are considered longest-waiting first, as there.

Known weakness (shared with Gavel's AlloX): only GPUs free now are offered, so when few are
free a job may start on a slow type rather than wait for a fast one, and then keeps it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    by_job,
    hookimpl,
    job_keyed,
    typed_options,
)


@dataclass(frozen=True, slots=True)
class Matching:
    """The optimal assignment of M waiting jobs to (worker type, level) slots.

    `column[i]` is job i's worker-type column (-1: not matched), `level[i]` its k (1 = last in
    its lane), `front[i]` whether it heads its lane's queue, `cost` the matching's cost.
    """

    column: np.ndarray
    level: np.ndarray
    front: np.ndarray
    cost: float


_Assignment = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@cache
def _assignment_solver() -> _Assignment:
    """scipy's `linear_sum_assignment`, loaded from its own extension module.

    `from scipy.optimize import linear_sum_assignment` first runs `scipy.optimize`'s package
    initialiser, which imports all of scipy's optimisers (about 0.4 CPU-s, most of a short
    AlloX run); the function itself lives in the compiled module `scipy.optimize._lsap`,
    which needs only numpy. It is the same function either way, so the matching is the same;
    where that module is not found (another scipy layout), the public import is used."""
    scipy = importlib.util.find_spec("scipy")
    folders = list(scipy.submodule_search_locations or ()) if scipy is not None else []
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / "optimize" / f"_lsap{suffix}"
            spec = importlib.util.spec_from_file_location("scipy.optimize._lsap", path)
            if not path.is_file() or spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            solver: _Assignment = module.linear_sum_assignment
            return solver
    from scipy.optimize import linear_sum_assignment

    return linear_sum_assignment


def match_jobs(lane_time: np.ndarray, lanes: np.ndarray) -> Matching:
    """Match jobs to lanes minimising sum of level x lane time.

    `lane_time[i, w]` is job i's lane time on type w (s * p), `inf` where it may not go;
    `lanes[w]` the number of lanes (free GPUs) of type w. Every job with a finite entry on a
    type with lanes is matched.
    """
    m, n = lane_time.shape
    column = np.full(m, -1, dtype=np.intp)
    level = np.zeros(m, dtype=np.intp)
    front = np.zeros(m, dtype=bool)
    usable = np.isfinite(lane_time) & (lanes[None, :] > 0)
    rows = np.flatnonzero(usable.any(axis=1))
    if rows.size == 0:
        return Matching(column, level, front, 0.0)
    slot_type: list[int] = []
    slot_level: list[int] = []
    for w in range(n):
        if lanes[w] <= 0:
            continue
        levels = math.ceil(rows.size / lanes[w])
        slot_type.extend([w] * (levels * int(lanes[w])))
        slot_level.extend(np.repeat(np.arange(1, levels + 1), int(lanes[w])).tolist())
    types = np.array(slot_type, dtype=np.intp)
    slot_levels = np.array(slot_level, dtype=np.intp)
    costs = lane_time[np.ix_(rows, types)] * slot_levels[None, :]
    matched_rows, matched_slots = _assignment_solver()(costs)
    jobs = rows[matched_rows]
    column[jobs] = types[matched_slots]
    level[jobs] = slot_levels[matched_slots]
    total = float(costs[matched_rows, matched_slots].sum())
    for w in np.unique(column[jobs]):
        on_type = jobs[column[jobs] == w]
        # Going down from the top level, each level opens c_k - (lanes already open) new
        # lane fronts; jobs of one level are interchangeable, so the shorter ones head.
        opened = 0
        for k in sorted(set(level[on_type].tolist()), reverse=True):
            at_level = on_type[level[on_type] == k]
            at_level = at_level[np.lexsort((at_level, lane_time[at_level, w]))]
            heads = max(at_level.size - opened, 0)
            front[at_level[:heads]] = True
            opened = max(opened, at_level.size)
    return Matching(column, level, front, total)


@dataclass(frozen=True, slots=True)
class AlloXOptions:
    # The fairness knob (module docstring). Gavel's and Shockwave's simulators run the
    # policy they call `allox` with alpha = 0.2.
    alpha: float = 1.0
    # Gavel's and Shockwave's treatment of gangs (see the module docstring).
    gavel_gangs: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"AlloX alpha must be in [0, 1], not {self.alpha}")


class AlloX(Policy):
    problem_class = ProblemClass.HEURISTIC
    # Gavel names it AlloX_Perf: worker types are not shuffled.
    heterogeneity_aware = True

    def __init__(self, alpha: float = 1.0, options: AlloXOptions | None = None) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"AlloX alpha must be in [0, 1], not {alpha}")
        self.options = options if options is not None else AlloXOptions(alpha=alpha)
        self.alpha = self.options.alpha
        self._named_alpha = alpha
        self.may_oversubscribe = self.options.gavel_gangs
        # Gavel-gangs mode: each job's shares from the last allocation, by worker-type column.
        self._shares: dict[int, list[float]] = {}
        self.name = "allox" if alpha == 1.0 else f"allox_alpha={alpha:g}"
        self.description = (
            "AlloX: min-cost matching of jobs to GPUs for least average JCT, non-preemptive"
            + ("" if alpha == 1.0 else f", longest-waiting fraction {alpha:g} considered")
        )
        self._started: dict[int, int] = {}  # job id -> worker-type column it runs on

    def for_run(self, seed: int) -> AlloX:
        return AlloX(self._named_alpha, self.options)

    def with_options(self, values: Mapping[str, str]) -> AlloX:
        return AlloX(self._named_alpha, typed_options(self.options, values, self.name))

    def snapshot(self) -> dict[str, Any]:
        return {"started": by_job(self._started), "shares": by_job(self._shares)}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._started = job_keyed(snapshot["started"], int)
        self._shares = job_keyed(snapshot.get("shares", {}), lambda v: [float(x) for x in v])

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if self.options.gavel_gangs:
            return self._allocate_gavel_gangs(problem)
        if not problem.jobs:
            self._started = {}
            return Allocation.empty(problem.worker_types)
        row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
        started = {j: c for j, c in self._started.items() if j in row_of}
        sizes = problem.scale_factors
        free = problem.capacity.astype(float).copy()
        for job_id, column in started.items():
            free[column] -= sizes[row_of[job_id]]
        waiting = [r for r, job in enumerate(problem.jobs) if job.job_id not in started]
        lane_time = self.lane_times(problem, free)
        # Only jobs that can start somewhere now take part (and count for alpha).
        startable = np.array([r for r in waiting if np.isfinite(lane_time[r]).any()], np.intp)
        objective = 0.0  # the matching's cost; 0 when no job can start
        if startable.size:
            lanes = np.floor(free + 1e-9).clip(min=0).astype(np.intp)
            considered = self._considered(problem, startable, lanes)
            matching = match_jobs(lane_time[considered], lanes)
            objective = matching.cost
            self._start(problem, considered, matching, lane_time[considered], free, started)
        self._started = started
        fractions = np.zeros((len(problem.jobs), len(problem.worker_types)))
        for job_id, column in started.items():
            fractions[row_of[job_id], column] = 1.0
        keys = tuple(job.job_id for job in problem.jobs)
        return Allocation(keys, problem.worker_types, fractions, objective)

    def _allocate_gavel_gangs(self, problem: PolicyInput) -> Allocation:
        """AlloX as Gavel's and Shockwave's simulators run it (module docstring)."""
        keys = tuple(job.job_id for job in problem.jobs)
        m, n = len(keys), len(problem.worker_types)
        fractions = np.zeros((m, n))
        for row, job_id in enumerate(keys):
            if job_id in self._shares:
                fractions[row] = self._shares[job_id]
        # A job whose shares add up to exactly 1 (a started single-GPU job) keeps its GPU.
        started = fractions.sum(axis=1) == 1.0
        free = problem.capacity.astype(float) - (fractions[started] == 1.0).sum(axis=0)
        lanes = np.floor(free + 1e-9).clip(min=0).astype(np.intp)
        waiting = np.flatnonzero(~started)
        objective = 0.0
        if waiting.size and lanes.sum() > 0:
            waited = problem.times_since_arrival[waiting]
            by_wait = waiting[np.lexsort((waiting, -waited))]
            considered = by_wait[: max(int(self.alpha * waiting.size), int(lanes.sum()))]
            remaining = np.maximum(problem.steps_remaining[considered], 0.0)
            # A type a job cannot run on costs as if it ran at 1e-10 steps/s, as there.
            throughputs = np.where(
                problem.throughputs[considered] > 0, problem.throughputs[considered], 1e-10
            )
            matching = match_jobs(remaining[:, None] / throughputs, lanes)
            objective = matching.cost
            for i in np.flatnonzero(matching.front):
                row = considered[i]
                fractions[row, matching.column[i]] = 1.0 / problem.scale_factors[row]
        self._shares = {job_id: fractions[row].tolist() for row, job_id in enumerate(keys)}
        return Allocation(keys, problem.worker_types, fractions, objective)

    @staticmethod
    def lane_times(problem: PolicyInput, free: np.ndarray) -> np.ndarray:
        """s_i * R_i / T[i, w] for every job, `inf` where it cannot start now."""
        sizes = problem.scale_factors
        remaining = np.maximum(problem.steps_remaining, 0.0)
        throughputs = problem.throughputs
        runnable = (throughputs > 0) & (sizes[:, None] <= free[None, :] + 1e-9)
        with np.errstate(divide="ignore"):
            times = (sizes * remaining)[:, None] / np.where(runnable, throughputs, 1.0)
        return np.where(runnable, times, np.inf)

    def _considered(
        self, problem: PolicyInput, waiting: np.ndarray, lanes: np.ndarray
    ) -> np.ndarray:
        """The rows AlloX matches among the M `waiting` ones: all for alpha = 1, else the
        longest-waiting max(floor(alpha * M), free GPUs) of them (ties by arrival order)."""
        if self.alpha >= 1.0:
            return waiting
        waited = problem.times_since_arrival[waiting]
        by_wait = waiting[np.lexsort((waiting, -waited))]
        keep = max(math.floor(self.alpha * waiting.size), int(lanes.sum()))
        return np.sort(by_wait[:keep])

    @staticmethod
    def _start(
        problem: PolicyInput,
        rows: np.ndarray,
        matching: Matching,
        lane_time: np.ndarray,
        free: np.ndarray,
        started: dict[int, int],
    ) -> None:
        """Start matched jobs in queue order while their gangs fit (see module docstring)."""
        sizes = problem.scale_factors
        matched = np.flatnonzero(matching.column >= 0)
        times = lane_time[matched, matching.column[matched]]
        order = matched[
            np.lexsort((rows[matched], times, -matching.level[matched], ~matching.front[matched]))
        ]
        for i in order:
            column = int(matching.column[i])
            size = sizes[rows[i]]
            if size <= free[column] + 1e-9:
                free[column] -= size
                started[problem.jobs[rows[i]].job_id] = column


@hookimpl
def register_policies(register: Register) -> None:
    register(AlloX())
