"""Scheduling units at job level: every job alone and, with space sharing, every pair of jobs
that may share a gang (packing.pair_rates), with each member's throughput inside the unit.

The LPs over units have columns x[u, w] = u * n + w and three kinds of rows:
    progress  sum_{u containing j} sum_w rate[j, u, w] x[u, w]      (per job)
    time      sum_{u containing j} sum_w x[u, w] <= 1                (a job is in one unit)
    capacity  sum_u gang_u x[u, w] <= capacity_w                     (a pair uses one gang)
Without pairs they are the shared constraints of time_fraction_lp.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from shock.api import Allocation, PolicyInput, UnitKey, lazy_module
from shock.plugins.policies.packing import pair_rates

if TYPE_CHECKING:
    import scipy.sparse as sparse
else:
    sparse = lazy_module("scipy.sparse")


@dataclass(frozen=True, slots=True)
class Units:
    keys: tuple[UnitKey, ...]
    gang: np.ndarray  # GPUs each unit uses
    capacity: np.ndarray  # GPUs of each worker type
    num_jobs: int
    num_types: int
    # One entry per (job, unit containing it): the job's steps/s inside the unit per type.
    entry_job: np.ndarray
    entry_unit: np.ndarray
    entry_rates: np.ndarray  # shape (entries, types)

    @property
    def num_columns(self) -> int:
        return len(self.keys) * self.num_types

    def progress_matrix(self, job_weights: np.ndarray) -> sparse.csr_matrix:
        """Rows: job_weights[j] * the job's steps/s, over columns x[u, w]."""
        return self._per_job(self.entry_rates * job_weights[self.entry_job][:, None])

    def time_matrix(self) -> sparse.csr_matrix:
        return self._per_job(np.ones_like(self.entry_rates))

    def capacity_matrix(self) -> sparse.csr_matrix:
        n = self.num_types
        cols = np.arange(self.num_columns)
        rows = np.tile(np.arange(n), len(self.keys))
        values = np.repeat(self.gang, n)
        return sparse.csr_matrix((values, (rows, cols)), shape=(n, self.num_columns))

    def job_rates(self, fractions: np.ndarray) -> np.ndarray:
        """Each job's steps/s under unit fractions (shape units x types)."""
        per_entry = (self.entry_rates * fractions[self.entry_unit]).sum(axis=1)
        return np.bincount(self.entry_job, weights=per_entry, minlength=self.num_jobs)

    def allocation(
        self, problem: PolicyInput, fractions: np.ndarray, objective: float | None
    ) -> Allocation:
        """Every job's row, then the pairs that got time (the rest are left out)."""
        fractions = clean_unit_fractions(fractions)
        keep = [
            u for u, key in enumerate(self.keys) if isinstance(key, int) or fractions[u].max() > 0
        ]
        return Allocation(
            tuple(self.keys[u] for u in keep),
            problem.worker_types,
            fractions[keep].reshape(len(keep), self.num_types),
            objective,
        )

    def _per_job(self, values: np.ndarray) -> sparse.csr_matrix:
        n = self.num_types
        rows = np.repeat(self.entry_job, n)
        cols = (self.entry_unit[:, None] * n + np.arange(n)[None, :]).ravel()
        return sparse.csr_matrix(
            (values.ravel(), (rows, cols)), shape=(self.num_jobs, self.num_columns)
        )

    def fractions(self, columns: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(columns[: self.num_columns]), 0.0, None).reshape(
            len(self.keys), self.num_types
        )


def clean_unit_fractions(fractions: np.ndarray) -> np.ndarray:
    """Solver noise clipped: fractions in [0, 1], values below 1e-9 set to 0."""
    return np.where(fractions < 1e-9, 0.0, np.clip(fractions, 0.0, 1.0))


def job_units(problem: PolicyInput, packed: bool) -> Units:
    """Every job alone and, if `packed`, every pair that may share a gang. A pair of jobs of
    the same type gives each member the mean of the two measured throughputs, so identical
    jobs stay interchangeable (as in max_min_fairness_packed)."""
    jobs = problem.jobs
    n = len(problem.worker_types)
    keys: list[UnitKey] = [job.job_id for job in jobs]
    gang = [float(job.scale_factor) for job in jobs]
    entry_job = list(range(len(jobs)))
    entry_unit = list(range(len(jobs)))
    entry_rates = [problem.throughputs[row] for row in range(len(jobs))]
    if packed and problem.table is not None:
        cache: dict[tuple[str, str, int], np.ndarray] = {}
        for i, j in combinations(range(len(jobs)), 2):
            a, b = jobs[i], jobs[j]
            if a.scale_factor != b.scale_factor:
                continue
            key = (a.job_type, b.job_type, a.scale_factor)
            rates = cache.get(key)
            if rates is None:
                rates = pair_rates(
                    problem.table, a.job_type, b.job_type, a.scale_factor, problem.worker_types
                )
                if a.job_type == b.job_type:
                    rates = np.repeat(rates.mean(axis=1, keepdims=True), 2, axis=1)
                cache[key] = rates
            if not np.any((rates[:, 0] > 0) & (rates[:, 1] > 0)):
                continue
            unit = len(keys)
            keys.append((a.job_id, b.job_id) if a.job_id < b.job_id else (b.job_id, a.job_id))
            gang.append(float(a.scale_factor))
            entry_job += [i, j]
            entry_unit += [unit, unit]
            entry_rates += [rates[:, 0], rates[:, 1]]
    return Units(
        keys=tuple(keys),
        gang=np.array(gang),
        capacity=np.asarray(problem.capacity, float),
        num_jobs=len(jobs),
        num_types=n,
        entry_job=np.array(entry_job, dtype=np.intp),
        entry_unit=np.array(entry_unit, dtype=np.intp),
        entry_rates=np.array(entry_rates, dtype=float).reshape(len(entry_job), n),
    )
