"""Tiresias as Pollux's artifact runs it (`tiresias_pollux`): discretised two-dimensional
least attained service over two queues, each job on its trace's GPU count and batch size.

The artifact's variant differs from shock's `tiresias` (Tiresias' own simulator):

- two queues split at `threshold_gpu_s` GPU-seconds (16 GPU-hours), attained service
  counted as whole seconds the job has been running x its GPU count; a job that crosses it
  moves to the back of the second queue, and no job ever moves back (no starvation rule);
- the first queue in arrival order, the second in the order jobs entered it;
- jobs are taken queue by queue, in order, and each one whose GPUs still fit runs (a job
  that does not fit is skipped, smaller ones behind it may run);
- a job that keeps running keeps its GPUs; a job (re)started goes on the nodes with the
  most free GPUs.

Every job runs on `num_replicas` GPUs at `batch_size` from Pollux's workload CSV (its
scale factor and the batch size in its job type); it is never resized.

Options: `threshold_gpu_s` (57,600), `worker_type` (the type it schedules; default the one
with the most GPUs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    ElasticGrant,
    Policy,
    PolicyInput,
    Register,
    SolverSpec,
    batch_size_of,
    hookimpl,
    typed_options,
)
from shock.goodput.progress import curve, fixed_batch_grant
from shock.goodput.speedup import application_of
from shock.plugins.policies.pollux.limits import worker_column

_GPUS_PER_NODE = 4


@dataclass(frozen=True, slots=True)
class TiresiasPolluxOptions:
    threshold_gpu_s: float = 3600.0 * 16
    worker_type: str = ""

    def __post_init__(self) -> None:
        if self.threshold_gpu_s <= 0:
            raise ValueError("threshold_gpu_s must be positive")


class TiresiasPollux(Policy):
    name = "tiresias_pollux"
    description = "Tiresias as Pollux's artifact runs it: two-queue 2D-LAS, fixed GPUs per job"
    reallocate_every_round = True

    def __init__(self, options: TiresiasPolluxOptions | None = None) -> None:
        self.options = options or TiresiasPolluxOptions()
        self.first: list[int] = []  # queue 0, in arrival order
        self.second: list[int] = []  # queue 1, in the order jobs were demoted
        self.running: set[int] = set()
        self.last_check: dict[int, int] = {}
        self.executed: dict[int, int] = {}

    def with_options(self, values: Mapping[str, str]) -> TiresiasPollux:
        return TiresiasPollux(typed_options(self.options, values, self.name))

    def for_run(self, seed: int) -> TiresiasPollux:
        return TiresiasPollux(self.options)

    def snapshot(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "second": self.second,
            "running": sorted(self.running),
            "last_check": {str(j): t for j, t in self.last_check.items()},
            "executed": {str(j): t for j, t in self.executed.items()},
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.first = [int(j) for j in snapshot["first"]]
        self.second = [int(j) for j in snapshot["second"]]
        self.running = {int(j) for j in snapshot["running"]}
        self.last_check = {int(j): int(t) for j, t in snapshot["last_check"].items()}
        self.executed = {int(j): int(t) for j, t in snapshot["executed"].items()}

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        column = worker_column(problem, self.options.worker_type, self.name)
        now = int(problem.now)
        jobs = {job.job_id: job for job in problem.jobs}
        self.first = [j for j in self.first if j in jobs]
        self.second = [j for j in self.second if j in jobs]
        self.running &= set(jobs)
        queued = set(self.first) | set(self.second)
        for job in sorted(problem.jobs, key=lambda j: (j.arrival_time, j.job_id)):
            if job.job_id not in queued:
                self.first.append(job.job_id)
                self.last_check.setdefault(job.job_id, now)
        for job_id in list(self.first) + list(self.second):
            elapsed = int(now - self.last_check.get(job_id, now))
            self.last_check[job_id] = now
            if job_id not in self.running:
                continue
            self.executed[job_id] = self.executed.get(job_id, 0) + elapsed
            gpu_s = self.executed[job_id] * jobs[job_id].scale_factor
            if job_id in self.first and gpu_s >= self.options.threshold_gpu_s:
                self.first.remove(job_id)
                self.second.append(job_id)
        free = int(problem.capacity[column])
        running: set[int] = set()
        for job_id in self.first + self.second:
            gpus = jobs[job_id].scale_factor
            if gpus <= free:
                running.add(job_id)
                free -= gpus
        self.running = running
        known = set(jobs)
        self.last_check = {j: t for j, t in self.last_check.items() if j in known}
        self.executed = {j: t for j, t in self.executed.items() if j in known}
        return self._allocation(problem, column, running)

    def _allocation(self, problem: PolicyInput, column: int, running: set[int]) -> Allocation:
        worker = problem.worker_types[column]
        ids = tuple(job.job_id for job in problem.jobs)
        fractions = np.zeros((len(ids), len(problem.worker_types)))
        elastic: dict[int | tuple[int, int], ElasticGrant] = {}
        for row, job in enumerate(problem.jobs):
            if job.job_id not in running:
                continue
            gpus = job.scale_factor
            fractions[row, column] = 1.0
            nodes = math.ceil(gpus / _GPUS_PER_NODE)
            name = application_of(job.job_type)
            batch = batch_size_of(job.job_type)
            if name is None or batch is None:
                elastic[job.job_id] = ElasticGrant(worker, gpus, nodes)
                continue
            elastic[job.job_id] = fixed_batch_grant(worker, gpus, nodes, curve(name).limits, batch)
        return Allocation(ids, problem.worker_types, fractions, elastic=elastic)


@hookimpl
def register_policies(register: Register) -> None:
    register(TiresiasPollux())
