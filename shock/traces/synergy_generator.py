"""Synergy's workload model: Poisson arrivals (jobs/hour), a class split of image, language
and speech models, and a GPU-demand mix of 70/10/15/5% for 1/2/4/8 GPUs.

Within a class every model of Synergy's default model zoo is equally likely. Run times at the
fair share come from Gavel's Philly-derived distribution (`shock.traces.generator`), which
Synergy's generator also uses when it is given no Philly log; a job's iterations are its run
time divided by its model's iteration time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from shock.core.model import JobSpec
from shock.resources.profiles import synergy_profiles
from shock.traces.generator import _duration

CLASSES = ("image", "language", "speech")
GPU_DEMANDS = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))


@dataclass(frozen=True, slots=True)
class SynergyWorkload:
    num_jobs: int
    jobs_per_hour: float | None = 9.0  # None or 0: every job arrives at t = 0
    class_split: tuple[float, float, float] = (20.0, 70.0, 10.0)  # image, language, speech %
    multi_gpu: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_jobs < 0:
            raise ValueError("number of jobs must be >= 0")
        if len(self.class_split) != 3 or min(self.class_split) < 0 or sum(self.class_split) <= 0:
            raise ValueError("class split must be three shares >= 0 (image, language, speech)")


def zoo_by_class() -> dict[str, list[str]]:
    zoo: dict[str, list[str]] = {name: [] for name in CLASSES}
    for model, profile in synergy_profiles().items():
        if profile.job_class in zoo and model not in ("bert", "vae"):  # not in the default zoo
            zoo[profile.job_class].append(model)
    return zoo


def generate_synergy_jobs(workload: SynergyWorkload) -> list[JobSpec]:
    rng = random.Random(workload.seed)
    gaps = random.Random(workload.seed + 1)
    zoo = zoo_by_class()
    profiles = synergy_profiles()
    mean_gap = 3600.0 / workload.jobs_per_hour if workload.jobs_per_hour else 0.0
    demands = [demand for demand, _ in GPU_DEMANDS]
    weights = [weight for _, weight in GPU_DEMANDS]
    jobs = []
    arrival = 0.0
    for job_id in range(workload.num_jobs):
        job_class = rng.choices(CLASSES, weights=workload.class_split)[0]
        model = rng.choice(zoo[job_class])
        gpus = rng.choices(demands, weights=weights)[0] if workload.multi_gpu else 1
        run_time = _duration(rng)
        iterations = max(1, int(run_time / profiles[model].iter_time_s))
        jobs.append(
            JobSpec(
                job_id=job_id,
                job_type=model,
                total_steps=iterations,
                scale_factor=gpus,
                arrival_time=arrival,
                duration=run_time,
            )
        )
        if mean_gap > 0:
            arrival += -math.log(1.0 - gaps.random()) * mean_gap
    return jobs
