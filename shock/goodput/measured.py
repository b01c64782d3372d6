"""Step times read from an application's measurements, as Pollux's and Sia's simulators read
them (the step times their simulated jobs run at).

A placement (GPUs per node, e.g. (4, 4, 2)) that was measured (`placements.csv`, by its
lexicographically smallest rotation) gives its step and synchronisation times linearly
between the measured per-GPU batch sizes; any other placement is interpolated linearly over
(nodes, GPUs, per-GPU batch) between all measurements (placements averaged per point, and
`scalability.csv`), which needs scipy (the `goodput` extra). Where neither answers (scipy
missing, or a point outside the measurements), the fitted step-time model does.

The bundled applications are Pollux's measurements (one GPU type); a run's per-GPU-type
profiles (shock.goodput.profiles) are read the same way, one `MeasuredTimes` per type.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from shock.goodput import applications
from shock.goodput.progress import Configuration, step_seconds

# One measured placement: (placement id, per-GPU batch, step time, sync time).
PlacementRow = tuple[int, float, float, float]
ScalabilityRow = tuple[int, int, float, float, float]  # nodes, GPUs, local batch, step, sync


@dataclass(frozen=True, eq=False)
class MeasuredTimes:
    """One application's measured step and sync times on one GPU type."""

    # Measured placement id -> (per-GPU batch sizes ascending, step times, sync times).
    placements: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    scalability: tuple[ScalabilityRow, ...]
    _scattered: list[Any] = field(default_factory=list, repr=False)

    @classmethod
    def from_rows(
        cls, placement_rows: Iterable[PlacementRow], scalability: Iterable[ScalabilityRow]
    ) -> MeasuredTimes:
        rows: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
        for placement, local, step, sync in placement_rows:
            rows[placement].append((local, step, sync))
        result = {}
        for placement, points in rows.items():
            points.sort()
            table = np.array(points)
            result[placement] = (table[:, 0], table[:, 1], table[:, 2])
        return cls(result, tuple(scalability))

    def scattered(self) -> Any:
        """scipy's LinearNDInterpolator over every measurement (built once); None without
        scipy."""
        if not self._scattered:
            self._scattered.append(self._build_scattered())
        return self._scattered[0]

    def _build_scattered(self) -> Any:
        try:
            from scipy.interpolate import LinearNDInterpolator
        except ImportError:
            return None
        groups: dict[tuple[int, int, float], list[tuple[float, float]]] = defaultdict(list)
        for placement, (local, step, sync) in self.placements.items():
            digits = [int(d) for d in str(placement)]
            for b, s, y in zip(local, step, sync, strict=True):
                groups[(len(digits), sum(digits), float(b))].append((s, y))
        xs = [list(key) for key in groups]
        ys = [list(np.mean(values, axis=0)) for values in groups.values()]
        for nodes, replicas, local_bsz, step_time, sync_time in self.scalability:
            xs.append([nodes, replicas, local_bsz])
            ys.append([step_time, sync_time])
        return LinearNDInterpolator(np.array(xs, dtype=float), np.array(ys, dtype=float))

    def times(self, node_gpus: tuple[int, ...], local_bsz: int) -> tuple[float, float]:
        """(step time, sync time) of one micro-batch of `local_bsz` per GPU on this
        placement; NaNs where the measurements do not reach."""
        placement = _placement_id(node_gpus)
        if placement in self.placements:
            local, step, sync = self.placements[placement]
            if local[0] <= local_bsz <= local[-1]:
                return (
                    float(np.interp(local_bsz, local, step)),
                    float(np.interp(local_bsz, local, sync)),
                )
            return (float("nan"), float("nan"))
        scattered = self.scattered()
        if scattered is None:
            return (float("nan"), float("nan"))
        nodes = min(len([g for g in node_gpus if g]), 16)
        value = scattered([[nodes, sum(node_gpus), local_bsz]])[0]
        return (float(value[0]), float(value[1]))

    def step_seconds(self, node_gpus: tuple[int, ...], config: Configuration) -> float:
        """Seconds per step (all micro-batches and the synchronisation); NaN where the
        measurements do not reach."""
        step, sync = self.times(node_gpus, config.atomic_bsz)
        return step + (step - sync) * config.accum_steps


def _folder(name: str) -> Path:
    return Path(str(resources.files("shock") / "data" / "pollux" / "applications" / name))


@cache
def _bundled(name: str) -> MeasuredTimes:
    """A bundled application's measurements (Pollux's `placements.csv`, `scalability.csv`)."""
    with (_folder(name) / "placements.csv").open(newline="") as handle:
        placement_rows = [
            (
                int(row["placement"]),
                float(row["local_bsz"]),
                float(row["step_time"]),
                float(row["sync_time"]),
            )
            for row in csv.DictReader(handle)
        ]
    with (_folder(name) / "scalability.csv").open(newline="") as handle:
        scalability = [
            (
                int(row["num_nodes"]),
                int(row["num_replicas"]),
                float(row["local_bsz"]),
                float(row["step_time"]),
                float(row["sync_time"]),
            )
            for row in csv.DictReader(handle)
        ]
    return MeasuredTimes.from_rows(placement_rows, scalability)


def _placement_id(node_gpus: tuple[int, ...]) -> int:
    used = tuple(g for g in node_gpus if g)
    smallest = min(used[i:] + used[:i] for i in range(len(used)))
    return int("".join(map(str, smallest)))


@cache
def measured_times(name: str, node_gpus: tuple[int, ...], local_bsz: int) -> tuple[float, float]:
    """(step time, sync time) of one micro-batch of `local_bsz` per GPU on this placement,
    from a bundled application's measurements; NaNs where they do not reach."""
    return _bundled(name).times(node_gpus, local_bsz)


def step_seconds_measured(name: str, node_gpus: tuple[int, ...], config: Configuration) -> float:
    """Seconds per step (all micro-batches and the synchronisation) from the measurements,
    as Pollux's simulator computes them; the fitted model where they do not reach."""
    step, sync = measured_times(name, node_gpus, config.atomic_bsz)
    if not (np.isfinite(step) and np.isfinite(sync)):
        return step_seconds(applications.application(name).perf, config)
    return step + (step - sync) * config.accum_steps
