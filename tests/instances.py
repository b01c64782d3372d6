"""Generated policy inputs shared by the policy tests: Gavel's workload model on the bundled
throughputs, part-way through, with SLOs and prices, so that every policy has something to
work with."""

from __future__ import annotations

import math

import numpy as np

from shock.core.policy import PolicyInput, PolicyJob
from shock.core.throughputs import default_throughputs
from shock.traces.generator import WorkloadConfig, generate_jobs

WORKER_TYPES = ("k80", "p100", "v100")
PRICES = np.array([0.9, 1.46, 2.48])  # $ per GPU-hour


def generated_input(
    num_jobs: int, capacity: tuple[int, ...], seed: int, multi_gpu: bool
) -> PolicyInput:
    table = default_throughputs()
    specs = generate_jobs(
        WorkloadConfig(
            num_jobs=num_jobs,
            jobs_per_hour=30.0,
            seed=seed,
            multi_gpu=multi_gpu,
            multi_priority=True,
        ),
        table,
    )
    rng = np.random.default_rng(seed)
    now = max(s.arrival_time for s in specs) + 60.0
    jobs = tuple(
        PolicyJob(
            job_id=s.job_id,
            job_type=s.job_type,
            scale_factor=s.scale_factor,
            priority_weight=s.priority_weight,
            arrival_time=s.arrival_time,
            total_steps=s.total_steps,
            steps_done=float(math.floor(rng.uniform(0.0, 0.8) * s.total_steps)),
            slo=float(rng.uniform(1.2, 4.0)),
        )
        for s in specs
    )
    throughputs = np.array(
        [[table.throughput(s.job_type, s.scale_factor, w) for w in WORKER_TYPES] for s in specs]
    )
    return PolicyInput(
        now=now,
        jobs=jobs,
        worker_types=WORKER_TYPES,
        capacity=np.array(capacity, float),
        throughputs=throughputs,
        table=table,
        prices=PRICES,
    )
