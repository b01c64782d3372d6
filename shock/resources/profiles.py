"""Synergy's measured resource sensitivity: how fast a model trains with c CPUs and m GB DRAM
per GPU, as a 9 x 5 matrix of throughput normalised to the fair share (3 CPUs, 62.5 GB per GPU).

Between matrix points the speed is interpolated bilinearly (exact at the points). Above the
largest row/column it stays at the edge (more does not help); below the smallest (1 CPU,
20.83 GB per GPU) it falls linearly towards 0, since a job with no CPU or no memory cannot run.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from shock.core.errors import InputError

PROFILE_FILE = "synergy_model_profiles.json"
# The fair share the matrices are normalised to: Synergy's 3 CPU : 1 GPU default cluster.
FAIR_CPUS_PER_GPU = 3.0
FAIR_MEM_GB_PER_GPU = 62.5
# The profiles give 20 GB (62.5/3 truncated) for the smallest memory cell, labelled 20.83.
_SNAP_GB = 1.0
# Interpolated speeds kept per profile (a bound for placements that ask continuous amounts).
_SPEED_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class ResourceProfile:
    """One model's sensitivity to CPU cores and DRAM per GPU."""

    model: str
    job_class: str  # image, language or speech
    cpu_axis: tuple[float, ...]
    mem_axis: tuple[float, ...]
    matrix: tuple[tuple[float, ...], ...]  # [cpu row][memory column]
    best_cpus_per_gpu: float
    best_mem_gb_per_gpu: float
    speedup: float  # speed at the best-case demand
    iter_time_s: float  # seconds per iteration at the fair share
    # Speeds already interpolated, by (CPUs, GB) per GPU: placements ask for the same few
    # amounts (fair share, best case) for every job in every round.
    _speeds: dict[tuple[float, float], float] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def speed(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        """Throughput relative to the fair share with these resources per GPU."""
        key = (cpus_per_gpu, mem_gb_per_gpu)
        known = self._speeds.get(key)
        if known is not None:
            return known
        speed = self._interpolate(cpus_per_gpu, mem_gb_per_gpu)
        # Positive amounts only: a cached 0.0 must not answer for -0.0 (or the reverse).
        if cpus_per_gpu > 0 and mem_gb_per_gpu > 0:
            if len(self._speeds) >= _SPEED_CACHE_SIZE:
                self._speeds.clear()
            self._speeds[key] = speed
        return speed

    def _interpolate(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        cpu_axis, mem_axis = self.cpu_axis, self.mem_axis
        cpu_scale = mem_scale = 1.0
        if cpus_per_gpu < cpu_axis[0]:
            cpu_scale = max(cpus_per_gpu, 0.0) / cpu_axis[0]
            cpus_per_gpu = cpu_axis[0]
        if mem_gb_per_gpu < mem_axis[0]:
            mem_scale = max(mem_gb_per_gpu, 0.0) / mem_axis[0]
            mem_gb_per_gpu = mem_axis[0]
        row, row_weight = _bracket(cpu_axis, cpus_per_gpu)
        column, column_weight = _bracket(mem_axis, mem_gb_per_gpu)
        m = self.matrix
        low = m[row][column] + (m[row][column + 1] - m[row][column]) * column_weight
        high = m[row + 1][column] + (m[row + 1][column + 1] - m[row + 1][column]) * column_weight
        return (low + (high - low) * row_weight) * cpu_scale * mem_scale

    def best_demand(self, gpus: int) -> tuple[float, float]:
        """(CPUs, GB) of the best-case allocation for a job on `gpus` GPUs."""
        return self.best_cpus_per_gpu * gpus, self.best_mem_gb_per_gpu * gpus

    @property
    def sensitive(self) -> bool:
        return self.speedup > 1.0


def _bracket(axis: tuple[float, ...], value: float) -> tuple[int, float]:
    """Index i and weight w with value = axis[i] + w (axis[i+1] - axis[i]), w in [0, 1]."""
    if value >= axis[-1]:
        return len(axis) - 2, 1.0
    i = bisect_right(axis, value) - 1
    return i, (value - axis[i]) / (axis[i + 1] - axis[i])


def fair_share_profile(model: str = "unprofiled") -> ResourceProfile:
    """A model with no measured profile: the same speed with any resources, and a best-case
    demand equal to the fair share, so resource-aware placements keep its GPU-proportional
    share rather than guess."""
    profiles = synergy_profiles()
    any_profile = next(iter(profiles.values()))
    ones = tuple(tuple(1.0 for _ in any_profile.mem_axis) for _ in any_profile.cpu_axis)
    return ResourceProfile(
        model=model,
        job_class="unknown",
        cpu_axis=any_profile.cpu_axis,
        mem_axis=any_profile.mem_axis,
        matrix=ones,
        best_cpus_per_gpu=FAIR_CPUS_PER_GPU,
        best_mem_gb_per_gpu=FAIR_MEM_GB_PER_GPU,
        speedup=1.0,
        iter_time_s=0.0,
    )


@cache
def synergy_profiles() -> dict[str, ResourceProfile]:
    """The 12 measured profiles bundled from Synergy (see shock/data/NOTICE.md)."""
    ref = resources.files("shock.data").joinpath(PROFILE_FILE)
    return profiles_from_dict(json.loads(ref.read_text()), PROFILE_FILE)


def profiles_from_dict(raw: dict[str, object], source: str) -> dict[str, ResourceProfile]:
    axes = raw.get("matrix_axes")
    models = raw.get("models")
    if not isinstance(axes, dict) or not isinstance(models, dict):
        raise InputError("expected 'matrix_axes' and 'models' objects", path=source)
    cpu_axis = tuple(float(v) for v in axes["row_labels_cpus_per_gpu"])
    mem_axis = tuple(float(v) for v in axes["column_labels_mem_gb_per_gpu"])
    profiles = {}
    for name, fields in models.items():
        try:
            matrix = tuple(tuple(float(v) for v in row) for row in fields["throughput_matrix"])
            if len(matrix) != len(cpu_axis) or any(len(r) != len(mem_axis) for r in matrix):
                raise ValueError("throughput_matrix does not match the axes")
            best_mem = float(fields["best_mem_gb_per_gpu"])
            nearest = min(mem_axis, key=lambda label: abs(label - best_mem))
            profiles[name] = ResourceProfile(
                model=name,
                job_class=str(fields["class"]),
                cpu_axis=cpu_axis,
                mem_axis=mem_axis,
                matrix=matrix,
                best_cpus_per_gpu=float(fields["best_cpus_per_gpu"]),
                best_mem_gb_per_gpu=nearest if abs(nearest - best_mem) < _SNAP_GB else best_mem,
                speedup=float(fields["speedup"]),
                iter_time_s=float(fields["iter_time_s"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"bad profile: {exc}", path=source, field=f"models.{name}") from exc
    return profiles
