"""Shockwave-style dynamic workloads: Poisson arrivals, log-uniform run times, a scale-factor
mix and an adaptation-mode mix over Shockwave's 21 job templates (or run times drawn from a
given sample, such as another trace's duration column).

Defaults follow Shockwave's canonical experiment: half Accordion and half GNS jobs, 60/30/9/1%
of jobs on 1/2/4/8 GPUs, and run times from 12 minutes to 5 hours (the range of the bundled
220-job Shockwave trace). A job's total steps are its run time x its isolated throughput at its
initial batch size on the reference worker type, as in Shockwave's traces.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable
from shock.traces.templates import JobTemplate, gavel_templates

MODES = ("static", "accordion", "gns")
SCALE_FACTORS = (1, 2, 4, 8)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class DynamicWorkloadConfig:
    num_jobs: int
    jobs_per_hour: float = 80.0  # 0: every job arrives at t = 0
    min_duration_s: float = 720.0
    max_duration_s: float = 18000.0
    scale_factor_mix: tuple[float, float, float, float] = (0.6, 0.3, 0.09, 0.01)
    mode_mix: tuple[float, float, float] = (0.0, 0.5, 0.5)  # static, accordion, gns
    seed: int = 0
    reference_worker_type: str = "v100"
    # Run times to draw from uniformly (e.g. another trace's duration column) instead of the
    # log-uniform range.
    duration_samples: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.num_jobs < 0:
            raise ValueError("number of jobs must be >= 0")
        if self.jobs_per_hour < 0:
            raise ValueError("arrival rate must be >= 0")
        if any(d <= 0 for d in self.duration_samples):
            raise ValueError("duration samples must be > 0")
        if not 0 < self.min_duration_s <= self.max_duration_s:
            raise ValueError("durations need 0 < min <= max")
        for name, mix in (("scale-factor", self.scale_factor_mix), ("mode", self.mode_mix)):
            if any(p < 0 for p in mix) or sum(mix) <= 0:
                raise ValueError(f"{name} mix needs non-negative shares with a positive sum")


def _pick(rng: random.Random, values: Sequence[V], weights: Sequence[float]) -> V:
    return rng.choices(list(values), weights=list(weights))[0]


def _templates(scale_factor: int) -> list[JobTemplate]:
    return [
        t
        for t in gavel_templates()
        if t.in_shockwave_job_table and (scale_factor == 1 or t.distributed)
    ]


def generate_dynamic_jobs(config: DynamicWorkloadConfig, table: ThroughputTable) -> list[JobSpec]:
    rng = random.Random(config.seed)
    mean_gap = 3600.0 / config.jobs_per_hour if config.jobs_per_hour else 0.0
    log_low, log_high = math.log(config.min_duration_s), math.log(config.max_duration_s)
    jobs: list[JobSpec] = []
    arrival = 0.0
    for job_id in range(config.num_jobs):
        scale_factor = _pick(rng, SCALE_FACTORS, config.scale_factor_mix)
        template = rng.choice(_templates(scale_factor))
        mode = _pick(rng, MODES, config.mode_mix)
        if config.duration_samples:
            duration = rng.choice(config.duration_samples)
        else:
            duration = math.exp(rng.uniform(log_low, log_high))
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
                arrival_time=round(arrival),
                command=template.command(),
                working_directory=template.working_directory,
                num_steps_arg=template.num_steps_arg,
                needs_data_dir=template.needs_data_dir,
                mode=mode,
                duration=round(duration),
            )
        )
        if mean_gap > 0:
            arrival += rng.expovariate(1.0 / mean_gap)
    return jobs
