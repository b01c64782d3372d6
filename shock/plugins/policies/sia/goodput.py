"""A job's goodput on each of Sia's configurations, as Sia's scheduler estimates it.

Configurations of a worker type with nodes of `g` GPUs: 1, 2, 4, ... GPUs (powers of two
below `g`) on one node, then k whole nodes (k g GPUs) for k = 1 .. its nodes, up to
`max_gpus` (Sia's artifact lists configurations up to 64 GPUs).

A job's goodput on configuration (w, nodes, gpus), in samples per second at its initial
batch size's rate of progress:

- with the run's per-GPU-type measurements (`--goodput-profiles`): its application's goodput
  model on type w (best batch size for the configuration, at the job's current epoch);
- without: its one-GPU throughput on w (the policy input's table) times its goodput speedup
  by its Pollux application's model (linear in the GPUs for a job without one).

With bootstrapping on (Sia's default), a job has a goodput model only where it has run:

- a job that has never run gets the same value, 1, on one GPU of every type (and nothing
  else): it starts on one GPU wherever one is free;
- on a type it has not run on, its goodput is projected from the first type (in column
  order) it has run on: that type's goodput for the same GPU count (on as many of that type's
  nodes as hold them) times the ratio of the two types' one-GPU throughputs;
- it may use at most twice the most GPUs it has run on.

Every job is limited by its application's batch limits (largest batch / smallest per-GPU
batch) and by `max_gpus`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from shock.api import PolicyInput
from shock.goodput.profiles import SiaProfiles
from shock.goodput.speedup import GoodputTable, application_of, epoch_of, table_for
from shock.plugins.policies.sia.state import Config, SiaLedger


def configurations(
    capacity: np.ndarray, gpus_per_node: int | Sequence[int], max_gpus: int = 64
) -> tuple[Config, ...]:
    """Every configuration of every worker type (see the module docstring); `gpus_per_node`
    for all types or per type."""
    configs: list[Config] = []
    for w, total in enumerate(capacity):
        total = int(total)
        per_node = int(gpus_per_node if isinstance(gpus_per_node, int) else gpus_per_node[w])
        limit = min(total, max_gpus)
        size = 1
        while size < per_node and size <= limit:
            configs.append(Config(w, 1, size))
            size *= 2
        k = 1
        while k * per_node <= limit:
            configs.append(Config(w, k, k * per_node))
            k += 1
    return tuple(configs)


@dataclass(frozen=True)
class ConfigArrays:
    worker: np.ndarray
    nodes: np.ndarray
    gpus: np.ndarray

    @classmethod
    def of(cls, configs: tuple[Config, ...]) -> ConfigArrays:
        return cls(
            np.array([c.worker for c in configs], dtype=int),
            np.array([c.num_nodes for c in configs], dtype=int),
            np.array([c.gpus for c in configs], dtype=int),
        )


@lru_cache(maxsize=4096)
def measured_table(
    profiles: SiaProfiles, application: str, suffix: str, epoch: int, gpus_per_node: int, nodes: int
) -> GoodputTable:
    model = profiles.applications[application].model(suffix, epoch)
    return GoodputTable.of(model, nodes, gpus_per_node)


@dataclass
class GoodputEstimator:
    """Fills G[j, c] for one round."""

    problem: PolicyInput
    configs: tuple[Config, ...]
    gpus_per_node: Sequence[int]
    ledger: SiaLedger
    profiles: SiaProfiles | None
    explore: bool
    max_gpus: int

    def __post_init__(self) -> None:
        self.arrays = ConfigArrays.of(self.configs)
        self.suffixes: list[str | None] = [
            self.profiles.suffix_for(w) if self.profiles else None
            for w in self.problem.worker_types
        ]

    def matrix(self) -> np.ndarray:
        result = np.zeros((len(self.problem.jobs), len(self.configs)))
        for j in range(len(self.problem.jobs)):
            result[j] = self.row(j)
        return result

    def row(self, j: int) -> np.ndarray:
        job = self.problem.jobs[j]
        arrays = self.arrays
        limit = min(self.max_gpus, self._batch_limit(job.job_type))
        ran = self.ledger.ran_on.get(job.job_id, set()) if self.explore else None
        if ran is not None:
            limit = min(limit, max(2 * self.ledger.most_gpus.get(job.job_id, 0), 1))
        usable = arrays.gpus <= limit
        if ran is not None and not ran:
            # Never run: no model anywhere yet; one GPU of any type is worth the same.
            return np.where(usable & (arrays.gpus == 1), 1.0, 0.0)
        values = np.zeros(len(self.configs))
        source = min(ran) if ran else None
        for w in range(len(self.problem.worker_types)):
            on_w = arrays.worker == w
            if not on_w.any():
                continue
            if ran is None or w in ran or source is None:
                values[on_w] = self._goodput(j, w, arrays.nodes[on_w], arrays.gpus[on_w])
            else:
                # Projected from the type it ran on: same GPUs there, scaled by one-GPU speed.
                per_node = self.gpus_per_node[source]
                gpus = arrays.gpus[on_w]
                nodes = -(-gpus // per_node)
                ratio = self._one_gpu_rate(j, w) / max(self._one_gpu_rate(j, source), 1e-300)
                values[on_w] = ratio * self._goodput(j, source, nodes, gpus)
        return np.where(usable, values, 0.0)

    # The job's models.

    def _application(self, job_type: str) -> str | None:
        name = application_of(job_type)
        if name is None:
            return None
        if self.profiles is not None and name not in self.profiles.applications:
            return None
        return name

    def _batch_limit(self, job_type: str) -> int:
        name = self._application(job_type)
        if name is None:
            return self.max_gpus
        if self.profiles is not None:
            by_suffix = self.profiles.applications[name].by_suffix.values()
            return max(p.limits.max_gpus for p in by_suffix)
        return table_for(job_type, 0, 1, 1).max_gpus

    def _suffix(self, j: int, w: int) -> str | None:
        name = self._application(self.problem.jobs[j].job_type)
        suffix = self.suffixes[w]
        if name is None or suffix is None or self.profiles is None:
            return None
        return suffix if suffix in self.profiles.applications[name].by_suffix else None

    def _goodput(self, j: int, w: int, nodes: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        job = self.problem.jobs[j]
        per_node = int(self.gpus_per_node[w])
        max_nodes = int(max(1, -(-self.max_gpus // per_node)))
        suffix = self._suffix(j, w)
        if suffix is not None and self.profiles is not None:
            name = self._application(job.job_type)
            assert name is not None
            app = self.profiles.applications[name]
            epoch = _epoch(job.steps_done, job.total_steps, app.max_epochs)
            table = measured_table(self.profiles, name, suffix, epoch, per_node, max_nodes)
            return np.asarray(table.at(nodes, gpus), dtype=float)
        epoch = epoch_of(job.job_type, job.steps_done, job.total_steps)
        table = table_for(job.job_type, epoch, max_nodes, per_node)
        one_gpu = float(table.goodput[1, 1]) or 1.0
        return self._table_rate(j, w) * np.asarray(table.at(nodes, gpus)) / one_gpu

    def _one_gpu_rate(self, j: int, w: int) -> float:
        suffix = self._suffix(j, w)
        if suffix is not None and self.profiles is not None:
            name = self._application(self.problem.jobs[j].job_type)
            assert name is not None
            return self.profiles.applications[name].by_suffix[suffix].one_gpu_rate
        return self._table_rate(j, w)

    def _table_rate(self, j: int, w: int) -> float:
        """The job's one-GPU speed on w from the policy input (1 on every type if none)."""
        rates = self.problem.throughputs[j].astype(float)
        if not np.any(rates > 0):
            return 1.0
        scale = max(int(self.problem.jobs[j].scale_factor), 1)
        return float(rates[w]) / scale


def _epoch(steps_done: float, total_steps: int, epochs: int) -> int:
    if total_steps <= 0:
        return 0
    return min(epochs - 1, int(epochs * max(0.0, steps_done) / total_steps))


def gpus_per_node_of(
    worker_types: Sequence[str], per_type: Mapping[str, int], default: int
) -> list[int]:
    return [int(per_type.get(w, default)) for w in worker_types]
