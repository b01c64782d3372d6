"""Synthetic policy instances and the timing of one allocation (`shock bench`, benchmarks/).

An instance is the state a policy sees in the middle of a busy run: N active single-GPU jobs
of the table's job types (Gavel's by default), each partly done and arrived some time in the
past, on a cluster of N/4 GPUs of each of the table's worker types (at least one of each).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np

from shock.core.errors import ShockError
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable, default_throughputs

WARM_UP_JOBS = 8


def bench_instance(
    num_jobs: int,
    seed: int = 0,
    table: ThroughputTable | None = None,
    *,
    jitter: float = 0.0,
) -> PolicyInput:
    """N active jobs drawn with a seeded RNG; the same (num_jobs, seed) gives the same input.

    Job types are drawn uniformly from the table's single-GPU keys (job type, 1). A job's
    total steps are its run time (Gavel's duration model: 60 * 10^U(1.5, 4) s) times its
    throughput on the table's fastest worker type (Gavel's: V100), and steps done a uniform
    fraction (below 0.95) of that. Its arrival lies in the past: the time its done steps take
    on its fastest GPU type times U(1, 4) (it shared the cluster), plus up to an hour of
    queueing; `now` is the latest of those times, and job ids follow arrival order.
    `jitter` > 0 multiplies every throughput entry by an independent factor in
    [1 - jitter, 1 + jitter], so that no two jobs are identical (a stand-in for measured,
    noisy throughputs; policies cannot merge identical jobs then).
    """
    if num_jobs < 0:
        raise ValueError("num_jobs must be >= 0")
    table = table or default_throughputs()
    rng = np.random.default_rng(seed)
    job_types = sorted(key[0] for key in table.isolated if key[1] == 1)
    if not job_types:
        raise ShockError("the throughput table has no single-GPU job types")
    worker_types = table.gpu_types  # sorted, as the mechanism orders them
    reference = worker_types.index(table.fastest_first()[0])
    chosen = rng.integers(len(job_types), size=num_jobs)
    base = np.array(
        [[table.throughput(job_types[c], 1, w) for w in worker_types] for c in chosen]
    ).reshape(num_jobs, len(worker_types))
    durations = 60.0 * 10.0 ** rng.uniform(1.5, 4.0, size=num_jobs)
    total_steps = np.maximum(1, (durations * base[:, reference]).astype(int))
    steps_done = np.floor(rng.uniform(0.0, 0.95, size=num_jobs) * total_steps)
    fastest = np.maximum(base.max(axis=1), 1e-9)
    since_arrival = steps_done / fastest * rng.uniform(1.0, 4.0, size=num_jobs)
    since_arrival += rng.uniform(0.0, 3600.0, size=num_jobs)
    throughputs = base
    if jitter > 0:
        throughputs = base * rng.uniform(1 - jitter, 1 + jitter, size=base.shape)
    now = float(np.ceil(since_arrival.max())) if num_jobs else 0.0
    order = np.argsort(-since_arrival, kind="stable")  # earliest arrival first
    jobs = tuple(
        PolicyJob(
            job_id=job_id,
            job_type=job_types[chosen[row]],
            scale_factor=1,
            priority_weight=1.0,
            arrival_time=now - float(since_arrival[row]),
            total_steps=int(total_steps[row]),
            steps_done=float(steps_done[row]),
        )
        for job_id, row in enumerate(order)
    )
    gpus = max(1, num_jobs // 4)
    return PolicyInput(
        now=now,
        jobs=jobs,
        worker_types=worker_types,
        capacity=np.full(len(worker_types), float(gpus)),
        throughputs=throughputs[order],
        table=table,
    )


@dataclass(frozen=True, slots=True)
class Timing:
    """One timed allocation: wall seconds, the policy's objective, 'optimal' or the error."""

    policy: str
    jobs: int
    seconds: float
    objective: float | None
    status: str
    allocation: Allocation | None = None

    def to_document(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "jobs": self.jobs,
            "seconds": self.seconds,
            "objective": self.objective,
            "status": self.status,
        }


def time_allocation(
    policy: Policy, problem: PolicyInput, solver: SolverSpec, *, warm_up: bool = True
) -> Timing:
    """Time one `policy.allocate(problem)`; a warm-up call on a tiny instance comes first (on
    `policy.for_run(0)`, so a stateful policy's timed call sees no history), so imports and
    one-off set-up are not counted. A solver failure is reported in `status`."""
    if warm_up:
        tiny = bench_instance(WARM_UP_JOBS, seed=1, table=problem.table)
        # A copy for the run of a stateful policy, so the timed call sees no history; an
        # error here is the timed call's to report.
        with contextlib.suppress(ShockError):
            policy.for_run(0).allocate(tiny, solver)
    started = time.perf_counter()
    try:
        allocation = policy.allocate(problem, solver)
    except ShockError as exc:
        seconds = time.perf_counter() - started
        return Timing(policy.name, len(problem.jobs), seconds, None, str(exc))
    seconds = time.perf_counter() - started
    return Timing(
        policy.name, len(problem.jobs), seconds, allocation.objective, "optimal", allocation
    )
