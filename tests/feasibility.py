"""The feasibility every single-job allocation must have (shared by the policy tests)."""

from __future__ import annotations

import numpy as np

from shock.core.policy import Allocation, PolicyInput


def check_feasible(p: PolicyInput, allocation: Allocation, tolerance: float = 1e-6) -> None:
    """Keys are the jobs in order; fractions finite, >= 0, rows <= 1, capacity respected."""
    x = allocation.fractions
    assert x.shape == (len(p.jobs), len(p.worker_types))
    assert allocation.keys == tuple(j.job_id for j in p.jobs)
    assert allocation.worker_types == p.worker_types
    assert np.all(np.isfinite(x))
    assert np.all(x >= 0)
    assert np.all(x.sum(axis=1) <= 1 + tolerance)
    assert np.all(p.scale_factors @ x <= p.capacity + tolerance)


def check_packed_feasible(p: PolicyInput, allocation: Allocation, tolerance: float = 1e-6) -> None:
    """For allocations with pairs: every job has its own row (in order), fractions are finite
    and >= 0, each job's time alone and in its pairs is <= 1, and a pair uses one gang."""
    x = allocation.fractions
    singles = [k for k in allocation.keys if isinstance(k, int)]
    assert singles == [job.job_id for job in p.jobs]
    assert np.all(np.isfinite(x)) and np.all(x >= 0)
    gang = {job.job_id: job.scale_factor for job in p.jobs}
    used = np.zeros(len(p.worker_types))
    for row, key in enumerate(allocation.keys):
        members = key if isinstance(key, tuple) else (key,)
        assert len({gang[j] for j in members}) == 1  # pairs share one gang size
        used += gang[members[0]] * x[row]
    assert np.all(used <= p.capacity + tolerance)
    for job in p.jobs:
        rows = [
            r
            for r, key in enumerate(allocation.keys)
            if key == job.job_id or (isinstance(key, tuple) and job.job_id in key)
        ]
        assert x[rows].sum() <= 1 + tolerance
