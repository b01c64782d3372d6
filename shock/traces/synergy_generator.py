"""Synergy's workload model: Poisson arrivals (jobs/hour), a class split of image, language
and speech models, and a GPU-demand mix of 70/10/15/5% for 1/2/4/8 GPUs.

As in Synergy's simulator (`jobs/model_zoo.py`, `ModelAssignment.OVERALL`), classes are
assigned to keep the split exact: each job takes the class furthest below its share so far
(image, language, speech on ties), and within a class the models of the default zoo take turns.
`balanced_classes=False` draws the class at random by the split and the model uniformly instead.
Run times at the fair share come from the Gavel-like distribution Synergy draws from
(`get_gavel_like_iter`: 80% 10^U(1.5, 3) minutes, 20% 10^U(3, 4) minutes, the same as
`shock.traces.generator`); a job's iterations are its run time divided by its model's
iteration time. Gaps between arrivals are rounded up to whole seconds, as Synergy's are.
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
    balanced_classes: bool = True  # Synergy's assignment; False: random draws by the split

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
    assigned = {name: 0 for name in CLASSES}
    jobs = []
    arrival = 0.0
    for job_id in range(workload.num_jobs):
        if workload.balanced_classes:
            job_class = _class_furthest_below_share(assigned, workload.class_split)
            models = zoo[job_class]
            model = models[assigned[job_class] % len(models)]
        else:
            job_class = rng.choices(CLASSES, weights=workload.class_split)[0]
            model = rng.choice(zoo[job_class])
        assigned[job_class] += 1
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
            arrival += math.ceil(-math.log(1.0 - gaps.random()) * mean_gap)
    return jobs


def _class_furthest_below_share(assigned: dict[str, int], split: tuple[float, float, float]) -> str:
    total = sum(assigned.values())
    shares = [part / sum(split) for part in split]

    def deficit(index: int) -> float:
        name = CLASSES[index]
        return shares[index] - (assigned[name] / total if total else 0.0)

    # max() keeps the first of equals: image, then language, then speech, as Synergy's sort.
    return CLASSES[max(range(len(CLASSES)), key=deficit)]
