"""Fit Pollux's step-time model (`model.PerfParams`) to measured step times.

Least squares on the logarithms (root-mean-square log error) of the measured compute time
per atomic batch and the measured step time, with Pollux's two regularisers: gamma is pulled
towards 1 (the other parameters are easier to fit then) and the per-replica growth terms
towards 0 (an optimistic model). Parameters the measurements cannot determine are held fixed:
alpha_c at half the compute time when only one atomic batch size was seen, the inter-node
terms without multi-node measurements, the intra-node terms without single-node multi-GPU
ones, the growth terms without measurements of more than two replicas. Without multi-node
measurements, inter-node costs are then taken as at least 1.1 x the intra-node ones.

Needs scipy (`pip install "shock[goodput]"`): a bounded quasi-Newton search (L-BFGS-B).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shock.core.errors import ShockError
from shock.goodput.model import PerfParams, compute_time, network_time, sync_time

_LOWER = 1e-8  # lower bound of the time parameters (a little above 0, for the logarithms)
_MAX_GAMMA = 10.0


@dataclass(frozen=True, slots=True)
class StepTimes:
    """Measurements: per configuration its nodes, replicas, atomic batch size, the compute
    time of one atomic batch and the whole step time (seconds)."""

    num_nodes: np.ndarray
    num_replicas: np.ndarray
    atomic_bsz: np.ndarray
    compute_time: np.ndarray
    step_time: np.ndarray

    @classmethod
    def from_profile(
        cls,
        nodes: list[int],
        replicas: list[int],
        local_bsz: list[int],
        step_time: list[float],
        sync_time: list[float],
    ) -> StepTimes:
        """From a profile's rows (Pollux's and Sia's measured step and synchronisation times):
        compute time is what the step spends outside synchronisation."""
        steps, syncs = np.array(step_time), np.array(sync_time)
        return cls(
            num_nodes=np.array(nodes),
            num_replicas=np.array(replicas),
            atomic_bsz=np.array(local_bsz),
            compute_time=np.maximum(steps - syncs, 1e-6),
            step_time=steps,
        )

    def __post_init__(self) -> None:
        sizes = {
            len(a)
            for a in (
                self.num_nodes,
                self.num_replicas,
                self.atomic_bsz,
                self.compute_time,
                self.step_time,
            )
        }
        if len(sizes) != 1 or 0 in sizes:
            raise ValueError("step-time measurements need equally long, non-empty columns")
        if np.any(self.compute_time <= 0) or np.any(self.step_time <= 0):
            raise ValueError("measured compute and step times must be positive")


def _objective(x: np.ndarray, data: StepTimes) -> float:
    params = PerfParams(*x)
    compute = compute_time(params, data.atomic_bsz)
    step = sync_time(params, compute, network_time(params, data.num_nodes, data.num_replicas))
    err_compute = np.sqrt(np.mean((np.log(compute) - np.log(data.compute_time)) ** 2))
    err_step = np.sqrt(np.mean((np.log(step) - np.log(data.step_time)) ** 2))
    reg_gamma = 1e-3 * (params.gamma - 1) ** 2
    reg_growth = 1e-2 * (
        (params.beta_n / params.alpha_n) ** 2 + (params.beta_r / params.alpha_r) ** 2
    )
    return float(err_compute + err_step + reg_gamma + reg_growth)


def fit_perf_params(data: StepTimes) -> PerfParams:
    """The step-time model that best explains `data` (see the module docstring)."""
    try:
        from scipy.optimize import minimize
    except ImportError:  # pragma: no cover - scipy is in the goodput extra
        raise ShockError(
            'fitting the goodput model needs scipy: pip install "shock[goodput]"'
        ) from None
    start = np.array([1e-1, 1e-2] * 3 + [1.0 + 1e-3])
    lower = np.array([_LOWER] * 6 + [1.0])
    upper = np.array([np.inf] * 6 + [_MAX_GAMMA])
    fixed = np.zeros(7, dtype=bool)
    nodes, replicas = data.num_nodes, data.num_replicas
    if len(np.unique(data.atomic_bsz)) == 1:
        start[0] = np.mean(data.compute_time) / 2
        fixed[0] = True
    if not np.any(nodes > 1):
        fixed[[2, 3]] = True
    if not np.any((nodes == 1) & (replicas > 1)):
        fixed[[4, 5]] = True
    if not np.any(replicas > 2):
        fixed[[3, 5]] = True
    start[fixed & (np.arange(7) != 0)] = lower[fixed & (np.arange(7) != 0)]
    free = ~fixed
    # The times are searched as logarithms (they span orders of magnitude), gamma as is.
    logged = np.arange(7) < 6

    def to_params(values: np.ndarray) -> np.ndarray:
        x = start.copy()
        x[free] = np.where(logged[free], np.exp(values), values)
        return x

    def objective(values: np.ndarray) -> float:
        return _objective(to_params(values), data)

    def searched(x: np.ndarray) -> np.ndarray:
        return np.where(logged, np.log(np.maximum(x, _LOWER)), x)[free]

    bounds = list(zip(searched(lower), searched(upper), strict=True))
    best = None
    # A few starting points (Pollux's, and slower/faster networks with more overlap): the
    # objective has local minima.
    for scale, gamma in ((1.0, 1.0 + 1e-3), (0.1, 2.0), (10.0, 4.0)):
        begin = start.copy()
        begin[2:6] = np.where(free[2:6], start[2:6] * scale, start[2:6])
        begin[6] = gamma if free[6] else start[6]
        result = minimize(objective, searched(begin), method="L-BFGS-B", bounds=bounds)
        if best is None or result.fun < best.fun:
            best = result
    assert best is not None
    x = to_params(best.x)
    if not np.any(nodes > 1):
        # Prior: crossing nodes costs at least what staying within one does.
        x[2] = max(x[2], 1.1 * x[4])
        x[3] = max(x[3], 1.1 * x[5])
    return PerfParams(*(float(v) for v in x))
