"""Pollux's goodput model: throughput x statistical efficiency, and its best batch size.

Per-step time of data-parallel SGD with all-reduce, for `r` replicas on `n` nodes, each
computing an atomic (local) batch of `b` samples, `s` times accumulated before a sync:

    T_compute(b)  = alpha_c + beta_c b
    T_network(n, r) = alpha_n + beta_n max(r - 2, 0)   if n > 1 (inter-node)
                    = alpha_r + beta_r max(r - 2, 0)   if n = 1, r > 1 (intra-node)
                    = 0                                if r = 1
    T_sync        = (T_compute^gamma + T_network^gamma)^(1/gamma)   (overlap; gamma in [1, 10])
    T_step        = s T_compute + T_sync

so a step processes M = r b (s + 1) samples and the throughput is M / T_step samples/s.

Statistical efficiency of a batch of M samples relative to the initial batch size M0, from
the gradient noise scale phi = M0 var / sqr (var, sqr: the gradient's variance and squared
norm measured at M0):

    EFF(M) = (phi + M0) / (phi + M)

Goodput = throughput x EFF: the samples per second that count at M0's rate of progress.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

import numpy as np
from numpy.typing import ArrayLike

# Tolerance for the ceilings of batch-size arithmetic (a batch exactly divisible stays so).
_EPS = 1e-8
# Total batch sizes tried per GPU count, spaced geometrically (Pollux samples 50).
BATCH_SIZE_SAMPLES = 50


@dataclass(frozen=True, slots=True)
class PerfParams:
    """The step-time model's parameters (seconds; gamma dimensionless)."""

    alpha_c: float  # constant compute time per atomic batch
    beta_c: float  # compute time per sample
    alpha_n: float  # inter-node network time
    beta_n: float  # its growth per replica beyond two
    alpha_r: float  # intra-node network time
    beta_r: float  # its growth per replica beyond two
    gamma: float  # overlap of compute and network (1: none; 10: almost max())

    def as_array(self) -> np.ndarray:
        return np.array(astuple(self), dtype=float)


@dataclass(frozen=True, slots=True)
class GradParams:
    """The gradient's squared norm and variance, measured at the initial batch size."""

    sqr: float
    var: float

    def noise_scale(self, init_batch_size: int) -> float:
        """phi = M0 var / sqr (infinite when the gradient's norm is 0: no batch size helps)."""
        return float("inf") if self.sqr <= 0 else init_batch_size * self.var / self.sqr


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """The batch sizes a job may use: its initial (and smallest) total batch size, the largest
    total batch size, and the atomic batch size one GPU can hold."""

    init_batch_size: int
    max_batch_size: int
    min_local_bsz: int
    max_local_bsz: int

    def __post_init__(self) -> None:
        if not 1 <= self.init_batch_size <= self.max_batch_size:
            raise ValueError(
                f"batch limits need 1 <= init_batch_size ({self.init_batch_size}) <= "
                f"max_batch_size ({self.max_batch_size})"
            )
        if not 1 <= self.min_local_bsz <= self.max_local_bsz:
            raise ValueError(
                f"batch limits need 1 <= min_local_bsz ({self.min_local_bsz}) <= "
                f"max_local_bsz ({self.max_local_bsz})"
            )

    @property
    def max_gpus(self) -> int:
        """The most GPUs the job can use: each needs at least `min_local_bsz` samples."""
        return max(1, self.max_batch_size // self.min_local_bsz)


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """The best configuration for a GPU count: its goodput, atomic batch size per GPU and
    accumulation steps (arrays where the query was one)."""

    goodput: np.ndarray
    atomic_bsz: np.ndarray
    accum_steps: np.ndarray
    num_replicas: np.ndarray

    @property
    def batch_size(self) -> np.ndarray:
        return self.num_replicas * self.atomic_bsz * (self.accum_steps + 1)


def compute_time(params: PerfParams, atomic_bsz: ArrayLike) -> np.ndarray:
    return params.alpha_c + params.beta_c * np.asarray(atomic_bsz, dtype=float)


def network_time(params: PerfParams, num_nodes: ArrayLike, num_replicas: ArrayLike) -> np.ndarray:
    nodes = np.asarray(num_nodes)
    replicas = np.asarray(num_replicas)
    extra = np.maximum(replicas - 2, 0)
    inter = params.alpha_n + params.beta_n * extra
    intra = params.alpha_r + params.beta_r * extra
    return np.where(nodes > 1, inter, np.where(replicas > 1, intra, 0.0))


def sync_time(params: PerfParams, compute: ArrayLike, network: ArrayLike) -> np.ndarray:
    """(T_compute^gamma + T_network^gamma)^(1/gamma), computed in log space to stay finite."""
    g = params.gamma
    return np.exp(np.logaddexp(g * np.log(compute), g * np.log(np.maximum(network, 1e-300))) / g)


def step_time(
    params: PerfParams,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_steps: ArrayLike,
) -> np.ndarray:
    compute = compute_time(params, atomic_bsz)
    sync = sync_time(params, compute, network_time(params, num_nodes, num_replicas))
    return np.asarray(accum_steps) * compute + sync


def efficiency(grad: GradParams, init_batch_size: int, batch_size: ArrayLike) -> np.ndarray:
    """(phi + M0) / (phi + M): 1 at M0, falling towards M0 / M as M passes the noise scale."""
    phi = grad.noise_scale(init_batch_size)
    m = np.asarray(batch_size, dtype=float)
    if np.isinf(phi):
        return np.ones_like(m)
    return (phi + init_batch_size) / (phi + m)


@dataclass(frozen=True, slots=True)
class GoodputModel:
    """One job's goodput as a function of its placement and batch size."""

    perf: PerfParams
    grad: GradParams
    limits: BatchLimits

    def throughput(
        self,
        num_nodes: ArrayLike,
        num_replicas: ArrayLike,
        atomic_bsz: ArrayLike,
        accum_steps: ArrayLike,
    ) -> np.ndarray:
        """Samples per second."""
        samples = np.asarray(num_replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
        return samples / step_time(self.perf, num_nodes, num_replicas, atomic_bsz, accum_steps)

    def efficiency(self, batch_size: ArrayLike) -> np.ndarray:
        return efficiency(self.grad, self.limits.init_batch_size, batch_size)

    def goodput(
        self,
        num_nodes: ArrayLike,
        num_replicas: ArrayLike,
        atomic_bsz: ArrayLike,
        accum_steps: ArrayLike,
    ) -> np.ndarray:
        batch = np.asarray(num_replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
        throughput = self.throughput(num_nodes, num_replicas, atomic_bsz, accum_steps)
        return throughput * self.efficiency(batch)

    def best_config(
        self, num_nodes: ArrayLike, num_replicas: ArrayLike, accumulation: bool = True
    ) -> BatchConfig:
        """The batch size (atomic size and accumulation steps) of highest goodput for each
        (nodes, replicas) pair, searched over `BATCH_SIZE_SAMPLES` total batch sizes from
        max(M0, min_local_bsz r) to the largest allowed. A pair with no valid batch size (r
        GPUs cannot each get `min_local_bsz` samples within the largest batch) gets goodput 0.
        """
        limits = self.limits
        nodes, replicas = np.broadcast_arrays(
            np.atleast_1d(np.asarray(num_nodes, dtype=int)),
            np.atleast_1d(np.asarray(num_replicas, dtype=int)),
        )
        if np.any(replicas < 1) or np.any(nodes < 1) or np.any(nodes > replicas):
            raise ValueError("best_config needs 1 <= num_nodes <= num_replicas")
        low = np.maximum(limits.init_batch_size, limits.min_local_bsz * replicas).astype(float)
        high = np.maximum(low, float(limits.max_batch_size))
        batch = np.geomspace(low, high, BATCH_SIZE_SAMPLES)  # samples x pairs
        local = batch / replicas
        if accumulation:
            accum = np.ceil(local / limits.max_local_bsz - _EPS) - 1
            # One replica above M0 accumulates at least once: the gradient statistics need
            # two micro-batches to be estimated (Pollux's rule).
            accum = np.where(
                (replicas == 1) & (local > limits.init_batch_size + _EPS),
                np.maximum(accum, 1),
                accum,
            )
        else:
            accum = np.zeros_like(local)
        accum = accum.astype(int)
        atomic = np.ceil(local / (accum + 1) - _EPS).astype(int)
        goodput = self.goodput(nodes, replicas, atomic, accum)
        valid = (
            (atomic >= limits.min_local_bsz)
            & (atomic <= limits.max_local_bsz)
            & (limits.min_local_bsz * replicas <= limits.max_batch_size)
        )
        goodput = np.where(valid, goodput, 0.0)
        best = np.argmax(goodput, axis=0)
        columns = np.arange(goodput.shape[1])
        return BatchConfig(
            goodput=goodput[best, columns],
            atomic_bsz=atomic[best, columns],
            accum_steps=accum[best, columns],
            num_replicas=replicas,
        )
