"""Optimus (EuroSys'18) with an oracle, as Pollux's artifact runs it: GPUs handed out one at a
time to the job whose remaining training time gains most, each job at its own fixed batch
size.

Each round, every active job (in arrival order) first gets one GPU while GPUs last; then
each further GPU goes to the job with the largest

    gain_j = (T_j(r_j) - T_j(r_j + 1)) x remaining_j

where T_j(r) is the job's step time on r GPUs packed onto nodes of `gpus_per_node` (its
batch size split over them as Pollux's simulator splits it, gradient accumulation
included; at least two micro-batches on one GPU) and remaining_j the steps its validation
run at its batch size still takes from the epoch it is in to the last (the oracle: Optimus
itself estimates both). A job gets at most batch size / smallest per-GPU batch GPUs (one
for NCF, as Pollux's simulator pins it). A job whose GPU count is unchanged keeps its GPUs.

Jobs whose type names no Pollux application cannot be predicted: they get their scale
factor's GPUs, after the elastic jobs' first GPU, and no more.

Options: `gpus_per_node` (4), `worker_type` (the type it schedules; default the one with
the most GPUs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from shock.api import (
    Allocation,
    ElasticGrant,
    Policy,
    PolicyInput,
    PolicyJob,
    Register,
    SolverSpec,
    batch_size_of,
    hookimpl,
    typed_options,
)
from shock.goodput.measured import step_seconds_measured
from shock.goodput.progress import (
    TrainingCurve,
    curve,
    fixed_batch_configuration,
    fixed_batch_grant,
)
from shock.goodput.speedup import application_of
from shock.plugins.policies.pollux.limits import FIXED_BATCH, MAX_GPUS, worker_column


@dataclass(frozen=True, slots=True)
class OptimusOptions:
    gpus_per_node: int = 4
    worker_type: str = ""

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")


def packed_step_seconds(
    training: TrainingCurve, batch_size: int, gpus: int, gpus_per_node: int
) -> float:
    """Seconds per step of a fixed batch size on `gpus` GPUs packed onto full nodes, split
    as Optimus' prediction in Pollux's artifact splits it (at least two micro-batches on a
    single GPU), from the application's measured step times as the artifact's oracle reads
    them (shock.goodput.measured)."""
    limits = training.limits
    nodes = math.ceil(gpus / gpus_per_node)
    config = fixed_batch_configuration(limits, nodes, gpus, batch_size)
    if gpus == 1 and config.accum_steps < 1:
        local = math.ceil(batch_size - 1e-8)
        atomic = max(1, min(math.ceil(local / 2 - 1e-8), int(limits.max_batch_size / 2)))
        config = type(config)(nodes, 1, atomic, 1)
    full, rest = divmod(gpus, gpus_per_node)
    node_gpus = (gpus_per_node,) * full + ((rest,) if rest else ())
    return step_seconds_measured(training.name, node_gpus, config)


class Optimus(Policy):
    name = "optimus"
    description = "Optimus+Oracle as Pollux's artifact runs it: greedy marginal-gain GPUs"
    reallocate_every_round = True

    def __init__(self, options: OptimusOptions | None = None) -> None:
        self.options = options or OptimusOptions()

    def with_options(self, values: Mapping[str, str]) -> Optimus:
        return Optimus(typed_options(self.options, values, self.name))

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        column = worker_column(problem, self.options.worker_type, self.name)
        per_node = self.options.gpus_per_node
        models = {job.job_id: _JobModel.of(job, per_node) for job in problem.jobs}
        # Elastic jobs start from one GPU, jobs Optimus cannot predict from their scale
        # factor (the artifact orders jobs by that minimum, then as they came).
        least = {j.job_id: 1 if models[j.job_id].training else j.scale_factor for j in problem.jobs}
        jobs = sorted(problem.jobs, key=lambda j: (least[j.job_id], j.arrival_time, j.job_id))
        free = int(problem.capacity[column])
        replicas: dict[int, int] = {}
        gains: dict[int, float] = {}
        for job in jobs:
            if least[job.job_id] > free:
                replicas[job.job_id] = 0
                gains[job.job_id] = 0.0
                continue
            replicas[job.job_id] = least[job.job_id]
            free -= least[job.job_id]
            gains[job.job_id] = models[job.job_id].gain(replicas[job.job_id], free)
        while free > 0 and gains and max(gains.values()) > 0:
            best = max(gains, key=lambda j: gains[j])  # the first of equal gains
            replicas[best] += 1
            free -= 1
            gains[best] = models[best].gain(replicas[best], free)
        return grants_allocation(problem, column, replicas, models, per_node)


@dataclass(frozen=True)
class _JobModel:
    """What Optimus' oracle knows of one job."""

    training: TrainingCurve | None
    batch_size: int
    max_gpus: int
    remaining_steps: float
    gpus_per_node: int

    @classmethod
    def of(cls, job: PolicyJob, gpus_per_node: int) -> _JobModel:
        name = application_of(job.job_type)
        if name is None:
            return cls(None, 0, 1, 0.0, gpus_per_node)
        training = curve(name)
        limits = training.limits
        batch = FIXED_BATCH.get(name) or batch_size_of(job.job_type) or limits.init_batch_size
        most = MAX_GPUS.get(name, max(1, batch // limits.min_local_bsz))
        done = training.target * max(job.steps_done, 0.0) / max(job.total_steps, 1)
        epoch = training.epoch_at(done)
        last = training.max_epochs - 1
        if last <= epoch:
            remaining = 1.0
        else:
            remaining = training.iterations_by(batch, last) - training.iterations_by(batch, epoch)
        return cls(training, batch, most, remaining, gpus_per_node)

    def gain(self, gpus: int, free: int) -> float:
        """What one more GPU saves, in seconds of remaining training (0: none may be added)."""
        if self.training is None or gpus + 1 > self.max_gpus or free < 1:
            return 0.0
        now = packed_step_seconds(self.training, self.batch_size, gpus, self.gpus_per_node)
        more = packed_step_seconds(self.training, self.batch_size, gpus + 1, self.gpus_per_node)
        return (now - more) * self.remaining_steps


def grants_allocation(
    problem: PolicyInput,
    column: int,
    replicas: Mapping[int, int],
    models: Mapping[int, _JobModel],
    gpus_per_node: int,
) -> Allocation:
    """Each job's GPU count as a grant at its fixed batch size (nodes: as few as hold the
    GPUs; the engine keeps a job whose count is unchanged where it was)."""
    worker = problem.worker_types[column]
    ids = tuple(job.job_id for job in problem.jobs)
    fractions = np.zeros((len(ids), len(problem.worker_types)))
    elastic: dict[int | tuple[int, int], ElasticGrant] = {}
    for row, job in enumerate(problem.jobs):
        gpus = replicas.get(job.job_id, 0)
        if gpus < 1:
            continue
        fractions[row, column] = min(1.0, gpus / max(job.scale_factor, 1))
        model = models[job.job_id]
        nodes = math.ceil(gpus / gpus_per_node)
        if model.training is None:
            elastic[job.job_id] = ElasticGrant(worker, gpus, nodes)
            continue
        elastic[job.job_id] = fixed_batch_grant(
            worker, gpus, nodes, model.training.limits, model.batch_size
        )
    return Allocation(ids, problem.worker_types, fractions, elastic=elastic)


@hookimpl
def register_policies(register: Register) -> None:
    register(Optimus())
