"""Step times read from an application's measurements, as Pollux's simulator reads them.

A placement (GPUs per node, e.g. (4, 4, 2)) that was measured (`placements.csv`, by its
lexicographically smallest rotation) gives its step and synchronisation times linearly
between the measured per-GPU batch sizes; any other placement is interpolated linearly over
(nodes, GPUs, per-GPU batch) between all measurements (placements averaged per point, and
`scalability.csv`), which needs scipy (the `goodput` extra). Where neither answers (scipy
missing, or a point outside the measurements), the fitted step-time model does.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from shock.goodput import applications
from shock.goodput.progress import Configuration, step_seconds


def _folder(name: str) -> Path:
    return Path(str(resources.files("shock") / "data" / "pollux" / "applications" / name))


@cache
def _placements(name: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Measured placement id -> (per-GPU batch sizes ascending, step times, sync times)."""
    rows: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    with (_folder(name) / "placements.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            rows[int(row["placement"])].append(
                (float(row["local_bsz"]), float(row["step_time"]), float(row["sync_time"]))
            )
    result = {}
    for placement, points in rows.items():
        points.sort()
        table = np.array(points)
        result[placement] = (table[:, 0], table[:, 1], table[:, 2])
    return result


@cache
def _scattered(name: str) -> Any:
    """scipy's LinearNDInterpolator over every measurement; None without scipy."""
    try:
        from scipy.interpolate import LinearNDInterpolator
    except ImportError:
        return None
    groups: dict[tuple[int, int, float], list[tuple[float, float]]] = defaultdict(list)
    for placement, (local, step, sync) in _placements(name).items():
        digits = [int(d) for d in str(placement)]
        for b, s, y in zip(local, step, sync, strict=True):
            groups[(len(digits), sum(digits), float(b))].append((s, y))
    xs = [list(key) for key in groups]
    ys = [list(np.mean(values, axis=0)) for values in groups.values()]
    with (_folder(name) / "scalability.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            xs.append([int(row["num_nodes"]), int(row["num_replicas"]), float(row["local_bsz"])])
            ys.append([float(row["step_time"]), float(row["sync_time"])])
    return LinearNDInterpolator(np.array(xs, dtype=float), np.array(ys, dtype=float))


def _placement_id(node_gpus: tuple[int, ...]) -> int:
    used = tuple(g for g in node_gpus if g)
    smallest = min(used[i:] + used[:i] for i in range(len(used)))
    return int("".join(map(str, smallest)))


@cache
def measured_times(name: str, node_gpus: tuple[int, ...], local_bsz: int) -> tuple[float, float]:
    """(step time, sync time) of one micro-batch of `local_bsz` per GPU on this placement,
    from the measurements; NaNs where they do not reach."""
    placements = _placements(name)
    placement = _placement_id(node_gpus)
    if placement in placements:
        local, step, sync = placements[placement]
        if local[0] <= local_bsz <= local[-1]:
            return (
                float(np.interp(local_bsz, local, step)),
                float(np.interp(local_bsz, local, sync)),
            )
        return (float("nan"), float("nan"))
    scattered = _scattered(name)
    if scattered is None:
        return (float("nan"), float("nan"))
    nodes = min(len([g for g in node_gpus if g]), 16)
    value = scattered([[nodes, sum(node_gpus), local_bsz]])[0]
    return (float(value[0]), float(value[1]))


def step_seconds_measured(name: str, node_gpus: tuple[int, ...], config: Configuration) -> float:
    """Seconds per step (all micro-batches and the synchronisation) from the measurements,
    as Pollux's simulator computes them; the fitted model where they do not reach."""
    step, sync = measured_times(name, node_gpus, config.atomic_bsz)
    if not (np.isfinite(step) and np.isfinite(sync)):
        return step_seconds(applications.application(name).perf, config)
    return step + (step - sync) * config.accum_steps
