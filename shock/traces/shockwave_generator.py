"""Shockwave-style dynamic workloads, drawn as Shockwave's own trace generator draws them.

For each job, in this order: a template uniformly from Shockwave's 21-template job table; a
scale factor from the 1/2/4/8-GPU mix, for distributed templates only (the others run on one
GPU); a run time from Shockwave's four duration classes; an adaptation mode from the mode mix.
An Accordion job shorter than 1000 s becomes static (Shockwave's rule: it would adapt into a
very short job). Arrivals are Poisson: the first job at t = 0, then exponential gaps with the
given mean. A job's total steps are its run time x its isolated throughput at its initial batch
size on the reference worker type.

Run times come from `num_durations` values evenly spaced between the shortest and the longest
(or spaced as powers of 1.5, `duration_spacing="log"`); a job draws its class first, 72% small
(the shortest 20% of the values), 20% medium (the next 30%), 5% large (the next 40%), 3%
extra large (the longest 10%), then a value of its class uniformly.

The random streams are Shockwave's too (seed for templates, seed+1 for gaps, seed+2 for
duration classes, seed+3 for scale factors, seed+4 for modes, numpy's legacy generator seeded
with seed for the value within a class), so with the same parameters and throughput table the
generator reproduces Shockwave's traces job for job: its bundled
`220_0.2_5_100_25_4_...` trace is seed 4, a 25 s mean gap, 220 jobs (tested), and its
canonical `120_0.2_5_100_40_25_...` trace is seed 25, a 40 s mean gap, 120 jobs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable
from shock.traces.templates import JobTemplate, gavel_templates

MODES = ("static", "accordion", "gns")
SCALE_FACTORS = (1, 2, 4, 8)
# Shockwave's duration classes: the share of jobs in each, and the fraction of the sorted
# duration values each class ends at.
DURATION_CLASS_SHARES = (0.72, 0.2, 0.05, 0.03)
DURATION_CLASS_ENDS = (0.2, 0.5, 0.9, 1.0)
# Shockwave turns Accordion jobs shorter than this into static ones.
MIN_ACCORDION_DURATION_S = 1000.0
LOG_SPACING_BASE = 1.5

DurationSpacing = Literal["linear", "log"]


@dataclass(frozen=True, slots=True)
class DynamicWorkloadConfig:
    num_jobs: int
    mean_interarrival_s: float = 40.0  # Shockwave's lambda; 0: every job arrives at t = 0
    min_duration_s: float = 720.0
    max_duration_s: float = 18000.0
    num_durations: int = 100
    duration_spacing: DurationSpacing = "linear"
    scale_factor_mix: tuple[float, float, float, float] = (0.6, 0.3, 0.09, 0.01)
    mode_mix: tuple[float, float, float] = (0.0, 0.5, 0.5)  # static, accordion, gns
    seed: int = 0
    reference_worker_type: str = "v100"
    # Run times to draw from uniformly (e.g. another trace's duration column) instead of
    # Shockwave's duration classes.
    duration_samples: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.num_jobs < 0:
            raise ValueError("number of jobs must be >= 0")
        if self.mean_interarrival_s < 0:
            raise ValueError("mean inter-arrival time must be >= 0")
        if any(d <= 0 for d in self.duration_samples):
            raise ValueError("duration samples must be > 0")
        if not 0 < self.min_duration_s <= self.max_duration_s:
            raise ValueError("durations need 0 < min <= max")
        if self.num_durations < 2:
            raise ValueError("number of durations must be >= 2")
        if self.duration_spacing not in ("linear", "log"):
            raise ValueError("duration spacing must be 'linear' or 'log'")
        for name, mix in (("scale-factor", self.scale_factor_mix), ("mode", self.mode_mix)):
            if any(p < 0 for p in mix) or sum(mix) <= 0:
                raise ValueError(f"{name} mix needs non-negative shares with a positive sum")


def duration_values_h(config: DynamicWorkloadConfig) -> np.ndarray:
    """The run times (hours) jobs draw from, shortest first."""
    low, high = config.min_duration_s / 3600.0, config.max_duration_s / 3600.0
    n = config.num_durations
    if config.duration_spacing == "linear":
        return np.linspace(low, high, n)
    # Powers of 1.5 from 1 to n (n - 1 of them) after a 0, scaled onto [low, high].
    powers = np.insert(LOG_SPACING_BASE ** np.linspace(1, n, n - 1), 0, 0.0)
    return np.round(powers / powers.max() * (high - low) + low, 2)


def _cumulative(mix: Sequence[float]) -> list[float]:
    total = sum(mix)
    bounds, running = [], 0.0
    for share in mix:
        running += share / total
        bounds.append(running)
    return bounds


def _scale_factor(draw: float, bounds: Sequence[float]) -> int:
    # Shockwave's comparisons: the first class includes its upper bound.
    for size, bound in zip(SCALE_FACTORS, bounds[:-1], strict=False):
        if draw <= bound:
            return size
    return SCALE_FACTORS[-1]


def _mode(draw: float, bounds: Sequence[float]) -> str:
    for mode, bound in zip(MODES, bounds[:-1], strict=False):
        if draw < bound:
            return mode
    return MODES[-1]


def _duration_h(
    values: np.ndarray, class_draw: float, value_rng: np.random.RandomState
) -> float:
    n = len(values)
    starts = [0] + [round(n * end) for end in DURATION_CLASS_ENDS[:-1]]
    ends = [*starts[1:], n]
    for share_end, start, end in zip(_cumulative(DURATION_CLASS_SHARES), starts, ends, strict=True):
        if class_draw < share_end or end == n:
            return float(value_rng.choice(values[start:end]))
    raise AssertionError("unreachable: the last class takes every draw")


def shockwave_templates() -> list[JobTemplate]:
    return [t for t in gavel_templates() if t.in_shockwave_job_table]


def generate_dynamic_jobs(config: DynamicWorkloadConfig, table: ThroughputTable) -> list[JobSpec]:
    template_rng = random.Random(config.seed)
    gap_rng = random.Random(config.seed + 1)
    duration_rng = random.Random(config.seed + 2)
    scale_rng = random.Random(config.seed + 3)
    mode_rng = random.Random(config.seed + 4)
    value_rng = np.random.RandomState(config.seed)
    values = duration_values_h(config)
    scale_bounds = _cumulative(config.scale_factor_mix)
    mode_bounds = _cumulative(config.mode_mix)
    templates = shockwave_templates()
    jobs: list[JobSpec] = []
    arrival = 0.0
    for job_id in range(config.num_jobs):
        template = template_rng.choice(templates)
        scale_factor = (
            _scale_factor(scale_rng.uniform(0, 1), scale_bounds) if template.distributed else 1
        )
        if config.duration_samples:
            duration = float(round(duration_rng.choice(config.duration_samples)))
        else:
            hours = _duration_h(values, duration_rng.uniform(0, 1), value_rng)
            duration = float(round(3600 * hours))
        mode = _mode(mode_rng.uniform(0, 1), mode_bounds)
        if mode == "accordion" and duration < MIN_ACCORDION_DURATION_S:
            mode = "static"
        if job_id > 0 and config.mean_interarrival_s > 0:
            arrival += -math.log(1.0 - gap_rng.random()) * config.mean_interarrival_s
        rate = table.throughput(template.job_type, scale_factor, config.reference_worker_type)
        if rate <= 0:
            raise ValueError(
                f"throughput table has no {config.reference_worker_type} throughput for "
                f"{template.job_type} at scale factor {scale_factor}"
            )
        jobs.append(
            JobSpec(
                job_id=job_id,
                job_type=template.job_type,
                total_steps=max(1, int(duration * rate)),
                scale_factor=scale_factor,
                arrival_time=int(arrival),
                command=template.shockwave_command(),
                working_directory=template.working_directory,
                num_steps_arg=template.num_steps_arg,
                needs_data_dir=template.needs_data_dir,
                mode=mode,
                duration=int(duration),
            )
        )
    return jobs
