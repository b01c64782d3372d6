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
