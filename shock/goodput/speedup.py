"""A job's goodput over (nodes, GPUs) placements, as the goodput-aware policies search it.

`GoodputTable.of(model, ...)` evaluates the best batch size of every placement of up to
`max_nodes` nodes of `gpus_per_node` GPUs once; a policy then reads goodput (and the batch
size that gives it) by index, for whole populations of candidate allocations at a time. A job
without a goodput model (no measurements) gets `GoodputTable.linear`: goodput = GPU count,
its batch size unknown, as Pollux treats a job it has not profiled yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from shock.goodput import applications, progress
from shock.goodput.model import GoodputModel


@dataclass(frozen=True)
class GoodputTable:
    """goodput[n, r] for n nodes and r GPUs (0 where n = 0, r < n, r > n x gpus_per_node or
    the job cannot use r GPUs), with the atomic batch size and accumulation steps of each."""

    goodput: np.ndarray
    atomic_bsz: np.ndarray
    accum_steps: np.ndarray
    # The most GPUs the job can use (its batch limits).
    max_gpus: int

    @classmethod
    def of(
        cls, model: GoodputModel, max_nodes: int, gpus_per_node: int, accumulation: bool = True
    ) -> GoodputTable:
        max_replicas = max_nodes * gpus_per_node
        shape = (max_nodes + 1, max_replicas + 1)
        n, r = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
        valid = (n >= 1) & (r >= n) & (r <= n * gpus_per_node)
        goodput = np.zeros(shape)
        atomic = np.zeros(shape, dtype=int)
        accum = np.zeros(shape, dtype=int)
        if valid.any():
            best = model.best_config(n[valid], r[valid], accumulation=accumulation)
            goodput[valid] = best.goodput
            atomic[valid] = best.atomic_bsz
            accum[valid] = best.accum_steps
        return cls(goodput, atomic, accum, model.limits.max_gpus)

    @classmethod
    def linear(cls, max_nodes: int, gpus_per_node: int) -> GoodputTable:
        max_replicas = max_nodes * gpus_per_node
        n, r = np.meshgrid(np.arange(max_nodes + 1), np.arange(max_replicas + 1), indexing="ij")
        valid = (n >= 1) & (r >= n) & (r <= n * gpus_per_node)
        zeros = np.zeros(n.shape, dtype=int)
        return cls(np.where(valid, r, 0).astype(float), zeros, zeros, max_replicas)

    def at(self, num_nodes: np.ndarray, num_replicas: np.ndarray) -> np.ndarray:
        """Goodput of each (nodes, GPUs) pair; 0 for pairs outside the table."""
        n = np.asarray(num_nodes)
        r = np.asarray(num_replicas)
        inside = (n < self.goodput.shape[0]) & (r < self.goodput.shape[1])
        return np.where(
            inside,
            self.goodput[
                np.minimum(n, self.goodput.shape[0] - 1), np.minimum(r, self.goodput.shape[1] - 1)
            ],
            0.0,
        )

    def base_goodput(self, num_replicas: int) -> float:
        """The goodput a job would have on its fair share: `num_replicas` GPUs on as few nodes
        as hold them (capped at what the job can use); the best one-GPU goodput if that is 0."""
        gpn = max(1, (self.goodput.shape[1] - 1) // max(1, self.goodput.shape[0] - 1))
        r = int(min(max(num_replicas, 1), self.max_gpus, self.goodput.shape[1] - 1))
        n = -(-r // gpn)
        value = float(self.goodput[n, r]) if n < self.goodput.shape[0] else 0.0
        if value <= 0:
            value = float(self.goodput[1, 1])
        return value if value > 0 else 1.0


def application_of(job_type: str) -> str | None:
    """The bundled Pollux application a job type names (`cifar10 (batch size 2048)` ->
    `cifar10`), or None."""
    family = job_type.split(" ", 1)[0].lower()
    return family if family in applications.MAX_EPOCHS else None


@lru_cache(maxsize=512)
def table_for(job_type: str, epoch: int, max_nodes: int, gpus_per_node: int) -> GoodputTable:
    """The goodput table of a job type at an epoch: from its Pollux application's measured
    model where it names one, else linear."""
    name = application_of(job_type)
    if name is None:
        return GoodputTable.linear(max_nodes, gpus_per_node)
    model = applications.application(name).goodput_model(epoch)
    return GoodputTable.of(model, max_nodes, gpus_per_node)


def epoch_of(job_type: str, steps_done: float, total_steps: int) -> int:
    """The epoch a job is in, from the fraction of its steps done: that fraction of its
    application's target progress, placed among its epochs' ends (0 for unknown types)."""
    name = application_of(job_type)
    if name is None or total_steps <= 0:
        return 0
    training = progress.curve(name)
    done = training.target * max(0.0, steps_done) / total_steps
    return min(training.max_epochs - 1, training.epoch_at(done))
