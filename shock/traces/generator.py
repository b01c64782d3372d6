"""Gavel's workload model: Poisson arrivals, Philly-like durations, the 26 job templates.

The random streams and the order of draws follow Gavel's simulator (job draws from
Random(seed + 2), inter-arrival gaps from Random(seed + 3); per job: scale factor, duration,
template, priority), so a trace generated here for a seed holds the jobs Gavel's simulator
generates for that seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable
from shock.traces.templates import JobTemplate, gavel_templates

# Philly-derived facts recorded in gavel_job_templates.json (trace_generation_facts).
_SCALE_FACTOR_BOUNDS = ((0.7, 0.8, 2), (0.8, 0.95, 4))
_LONG_JOB_PROBABILITY = 0.2  # a draw >= 1 - 0.2 (Gavel: random() >= 0.8) makes a long job
_LONG_LOG10_MINUTES = (3.0, 4.0)
_SHORT_LOG10_MINUTES = (1.5, 3.0)
_HIGH_PRIORITY_PROBABILITY = 0.2
_HIGH_PRIORITY_WEIGHT = 5.0


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    num_jobs: int
    jobs_per_hour: float | None = None  # None or 0: every job arrives at t = 0
    seed: int = 0
    multi_gpu: bool = False
    multi_priority: bool = False
    fixed_duration_s: float | None = None
    reference_worker_type: str = "v100"


def _scale_factor(rng: random.Random) -> int:
    draw = rng.uniform(0, 1)
    for low, high, value in _SCALE_FACTOR_BOUNDS:
        if low <= draw <= high:
            return value
    return 8 if draw >= 0.95 else 1


def _duration(rng: random.Random) -> float:
    bounds = (
        _LONG_LOG10_MINUTES if rng.random() >= 1 - _LONG_JOB_PROBABILITY else _SHORT_LOG10_MINUTES
    )
    return 60 * 10 ** rng.uniform(*bounds)


def _template(rng: random.Random, scale_factor: int) -> JobTemplate:
    templates = gavel_templates()
    while True:
        template = rng.choice(templates)
        if scale_factor == 1 or template.distributed:
            return template


def generate_jobs(config: WorkloadConfig, table: ThroughputTable) -> list[JobSpec]:
    if config.num_jobs < 0:
        raise ValueError("number of jobs must be >= 0")
    job_rng = random.Random(config.seed + 2)
    gap_rng = random.Random(config.seed + 3)
    mean_gap = 3600.0 / config.jobs_per_hour if config.jobs_per_hour else 0.0
    jobs: list[JobSpec] = []
    arrival = 0.0
    for job_id in range(config.num_jobs):
        scale_factor = _scale_factor(job_rng)
        run_time = config.fixed_duration_s or _duration(job_rng)
        if not config.multi_gpu:
            scale_factor = 1
        template = _template(job_rng, scale_factor)
        rate = table.throughput(template.job_type, scale_factor, config.reference_worker_type)
        if rate <= 0:
            raise ValueError(
                f"throughput table has no {config.reference_worker_type} throughput for "
                f"{template.job_type} at scale factor {scale_factor}"
            )
        priority = 1.0
        if config.multi_priority and job_rng.uniform(0, 1) <= _HIGH_PRIORITY_PROBABILITY:
            priority = _HIGH_PRIORITY_WEIGHT
        jobs.append(
            JobSpec(
                job_id=job_id,
                job_type=template.job_type,
                total_steps=max(1, int(run_time * rate)),
                scale_factor=scale_factor,
                arrival_time=arrival,
                priority_weight=priority,
                command=template.command(),
                working_directory=template.working_directory,
                num_steps_arg=template.num_steps_arg,
                needs_data_dir=template.needs_data_dir,
                duration=run_time,
            )
        )
        if mean_gap > 0:
            arrival += -math.log(1.0 - gap_rng.random()) * mean_gap
    return jobs
