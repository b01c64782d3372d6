"""Gavel-style cvxpy + ECOS formulations, used as in-run baselines by the benchmarks.

They state the same problems as shock's policies the way Gavel's artifact does (a cvxpy
problem built and solved with ECOS at every allocation), so a benchmark can time both in one
run and compare the simulations they drive.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.core.hookspecs import Register, hookimpl
from shock.core.policy import Allocation, Policy, PolicyInput, UnitKey
from shock.core.solver import ProblemClass, SolverSpec
from shock.plugins.policies.isolated import isolated_fractions
from shock.plugins.policies.max_min_fairness import normalised_rates


def base_constraints(problem: PolicyInput, x: Any) -> list[Any]:
    """Gavel's shared constraints on the time fractions x (jobs x worker types)."""
    import cvxpy as cp

    scale = np.tile(problem.scale_factors[:, None], (1, x.shape[1]))
    return [
        x >= 0,
        cp.sum(x, axis=1) <= 1,
        cp.sum(cp.multiply(scale, x), axis=0) <= problem.capacity,
    ]


class CvxpyMaxMinFairness(Policy):
    problem_class = ProblemClass.HEURISTIC  # solved by cvxpy itself, not through --solver

    def __init__(self, heterogeneity_aware: bool) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        suffix = "_perf" if heterogeneity_aware else ""
        self.name = f"cvxpy_max_min_fairness{suffix}"
        self.description = "baseline: max-min fairness as a cvxpy problem solved by ECOS"

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        import cvxpy as cp

        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            return Allocation.empty(problem.worker_types)
        rates = normalised_rates(problem, self.heterogeneity_aware)
        m, n = rates.shape
        x = cp.Variable((m, n))
        constraints = base_constraints(problem, x)
        objective = cp.Maximize(cp.min(cp.sum(cp.multiply(rates, x), axis=1)))
        program = cp.Problem(objective, constraints)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program.solve(solver="ECOS")
        fractions = np.clip(np.asarray(x.value), 0.0, 1.0)
        return Allocation(keys, problem.worker_types, fractions, _value(program))


def _value(program: object) -> float | None:
    value = getattr(program, "value", None)
    return float(value) if value is not None and np.isfinite(value) else None


class CvxpyFinishTimeFairness(Policy):
    """Gavel's FinishTimeFairness_Perf as cvxpy + ECOS:

    minimise max_i (t_i + R_i * inv_pos(sum_w T[i, w] x[i, w])) / (C_i + R_i / iso_i)

    with the base constraints; C_i (isolated time attained so far) is kept between calls, as
    Gavel does, so `for_run` returns a fresh copy. By default the objective is built the way
    Gavel builds it, one cvxpy expression per job combined with `cp.maximum(*terms)`;
    `vectorised=True` states it as one vector expression instead (same problem, much less
    cvxpy overhead: a stronger baseline than Gavel's own code).
    """

    problem_class = ProblemClass.HEURISTIC

    def __init__(self, vectorised: bool = False) -> None:
        self.vectorised = vectorised
        suffix = "_vectorised" if vectorised else ""
        self.name = f"cvxpy_finish_time_fairness_perf{suffix}"
        self.description = "baseline: finish-time fairness as a cvxpy problem solved by ECOS" + (
            " (vectorised)" if vectorised else " (per-job terms, as Gavel)"
        )
        self._cumulative_isolated: dict[int, float] = {}
        self._remaining_prev: dict[int, float] = {}
        self._isolated_prev: dict[int, float] = {}

    def for_run(self, seed: int) -> CvxpyFinishTimeFairness:
        return CvxpyFinishTimeFairness(self.vectorised)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        import cvxpy as cp

        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            self._remaining_prev.clear()
            self._isolated_prev.clear()
            return Allocation.empty(problem.worker_types)
        throughputs = problem.throughputs
        m, n = throughputs.shape
        x0 = isolated_fractions(problem.capacity, problem.scale_factors)
        isolated = (throughputs * x0).sum(axis=1)
        remaining = problem.steps_remaining
        elapsed = problem.times_since_arrival
        attained = np.empty(m)
        for row, job_id in enumerate(keys):
            attained_so_far = self._cumulative_isolated.get(job_id, 0.0)
            if job_id in self._remaining_prev:
                done = self._remaining_prev[job_id] - remaining[row]
                attained_so_far += done / self._isolated_prev[job_id]
            self._cumulative_isolated[job_id] = attained_so_far
            attained[row] = attained_so_far
        isolated_time = attained + remaining / isolated
        x = cp.Variable((m, n))
        constraints = base_constraints(problem, x)
        worst: Any
        if self.vectorised:
            rate = cp.sum(cp.multiply(throughputs, x), axis=1)
            rho = cp.multiply(remaining / isolated_time, cp.inv_pos(rate))
            worst = cp.max(rho + elapsed / isolated_time)
        else:
            terms = [
                (elapsed[i] + remaining[i] * cp.inv_pos(cp.sum(cp.multiply(throughputs[i], x[i]))))
                / isolated_time[i]
                for i in range(m)
            ]
            worst = terms[0] if m == 1 else cp.maximum(*terms)
        with warnings.catch_warnings():
            # cvxpy warns about the per-job terms: they are the point of this variant.
            warnings.simplefilter("ignore")
            program = cp.Problem(cp.Minimize(worst), constraints)
            with contextlib.suppress(cp.error.SolverError):
                program.solve(solver="ECOS")
        self._remaining_prev = dict(zip(keys, remaining.tolist(), strict=True))
        self._isolated_prev = dict(zip(keys, isolated.tolist(), strict=True))
        if x.value is None:
            return Allocation(keys, problem.worker_types, x0)
        fractions = np.clip(np.asarray(x.value), 0.0, 1.0)
        return Allocation(keys, problem.worker_types, fractions, _value(program))


class CvxpyMaxMinFairnessPacked(Policy):
    """Gavel's MaxMinFairness_Packing as cvxpy + ECOS.

    Rows are every job alone plus every pair of jobs with the same scale factor (with pair
    throughputs from the table); a job's normalised throughput sums its own throughput over
    the rows it is in, over its proportional throughput and priority weight; maximise the
    smallest, with each job's rows summing to at most 1 and capacity per worker type.
    Stated with sparse matrices (one cvxpy vector variable), so building it stays cheap.
    """

    problem_class = ProblemClass.HEURISTIC

    def __init__(self) -> None:
        self.name = "cvxpy_max_min_fairness_packed"
        self.description = "baseline: packed max-min fairness as a cvxpy problem solved by ECOS"

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        import cvxpy as cp
        import scipy.sparse as sp

        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        m, n = problem.throughputs.shape
        units = packing_units(problem)
        c = len(units.keys)
        share = problem.capacity / problem.capacity.sum()
        proportional = problem.throughputs @ share
        proportional[proportional <= 0] = np.inf
        norm = problem.priority_weights * proportional
        columns = np.arange(c * n).reshape(c, n)
        # Column u * n + w is x[unit u, type w]; each unit has a first and maybe a second job.
        paired = units.second >= 0
        rows = np.concatenate([np.repeat(units.first, n), np.repeat(units.second[paired], n)])
        cols = np.concatenate([columns.ravel(), columns[paired].ravel()])
        own = np.concatenate(
            [
                (units.first_rates * (units.scale / norm[units.first])[:, None]).ravel(),
                (
                    units.second_rates[paired]
                    * (units.scale[paired] / norm[units.second[paired]])[:, None]
                ).ravel(),
            ]
        )
        objective_matrix = sp.csr_matrix((own, (rows, cols)), shape=(m, c * n))
        one_matrix = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(m, c * n))
        capacity_matrix = sp.csr_matrix(
            (np.repeat(units.scale, n), (np.tile(np.arange(n), c), columns.ravel())),
            shape=(n, c * n),
        )
        x = cp.Variable(c * n)
        floor = cp.Variable()
        constraints = [
            x >= 0,
            one_matrix @ x <= 1,
            capacity_matrix @ x <= problem.capacity,
            objective_matrix @ x >= floor,
        ]
        program = cp.Problem(cp.Maximize(floor), constraints)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program.solve(solver="ECOS")
        fractions = np.clip(np.asarray(x.value).reshape(c, n), 0.0, 1.0)
        return Allocation(units.keys, problem.worker_types, fractions, _value(program))


@dataclass(frozen=True)
class PackingUnits:
    """Every job alone, then every pair of jobs that may share a GPU.

    `first`/`second`: member rows (second = -1 for a job alone); `*_rates`: each member's
    throughput per worker type inside the unit; `scale`: the unit's scale factor.
    """

    keys: tuple[UnitKey, ...]
    first: np.ndarray
    second: np.ndarray
    first_rates: np.ndarray
    second_rates: np.ndarray
    scale: np.ndarray


def packing_units(problem: PolicyInput) -> PackingUnits:
    """Units as Gavel builds them: singles, then pairs (i < j) with the same scale factor
    whose pair throughputs the table has."""
    jobs = problem.jobs
    m, n = problem.throughputs.shape
    keys: list[UnitKey] = [job.job_id for job in jobs]
    first = list(range(m))
    second = [-1] * m
    first_rates = [problem.throughputs]
    second_rates = [np.zeros((m, n))]
    table = problem.table
    if table is not None:
        job_keys = [(job.job_type, job.scale_factor) for job in jobs]
        kinds = sorted(set(job_keys))
        kind_of = np.array([kinds.index(k) for k in job_keys])
        # Pair rates per (kind, kind, type), NaN where the table has no measurement.
        rates = np.full((len(kinds), len(kinds), n, 2), np.nan)
        for a, key_a in enumerate(kinds):
            for b, key_b in enumerate(kinds):
                pair = table.pairs.get((key_a, key_b))
                if pair is not None and key_a[1] == key_b[1]:
                    for w, worker_type in enumerate(problem.worker_types):
                        rates[a, b, w] = pair.get(worker_type, (0.0, 0.0))
        left, right = np.triu_indices(m, k=1)
        pair_rates = rates[kind_of[left], kind_of[right]]
        ok = ~np.isnan(pair_rates[:, 0, 0])
        left, right, pair_rates = left[ok], right[ok], pair_rates[ok]
        keys.extend((jobs[a].job_id, jobs[b].job_id) for a, b in zip(left, right, strict=True))
        first.extend(left.tolist())
        second.extend(right.tolist())
        first_rates.append(pair_rates[:, :, 0])
        second_rates.append(pair_rates[:, :, 1])
    first_array = np.array(first, dtype=np.intp)
    return PackingUnits(
        tuple(keys),
        first_array,
        np.array(second, dtype=np.intp),
        np.concatenate(first_rates),
        np.concatenate(second_rates),
        problem.scale_factors[first_array],
    )


@hookimpl
def register_policies(register: Register) -> None:
    register(CvxpyMaxMinFairness(heterogeneity_aware=True))
    register(CvxpyMaxMinFairness(heterogeneity_aware=False))
    register(CvxpyFinishTimeFairness())
    register(CvxpyFinishTimeFairness(vectorised=True))
    register(CvxpyMaxMinFairnessPacked())
