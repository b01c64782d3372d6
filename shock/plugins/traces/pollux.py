"""Built-in plugin: Pollux's workload CSVs, with step rates from its measured applications as
their default throughput table and its 64-GPU testbed as their default cluster."""

from __future__ import annotations

import math

from shock.api import Register, ThroughputTable, Trace, batch_size_of, hookimpl, model_family_of
from shock.traces.pollux import PolluxTraceFormat


def steps_per_second(application: str, scale_factor: int, batch_size: int) -> float:
    """Training steps/s of an application at a fixed GPU count and total batch size, by its
    fitted step-time model, split into atomic batches and accumulation steps as Pollux's
    simulator splits a fixed batch size (4 GPUs per node)."""
    from shock.goodput import applications
    from shock.goodput.model import step_time

    app = applications.application(application)
    limits = app.limits
    local = math.ceil(batch_size / scale_factor - 1e-8)
    accum = math.ceil(local / limits.max_local_bsz - 1e-8) - 1
    if scale_factor == 1 and batch_size > limits.init_batch_size:
        accum = max(accum, 1)
    atomic = math.ceil(local / (accum + 1) - 1e-8)
    nodes = math.ceil(scale_factor / 4)
    return float(1.0 / step_time(app.perf, nodes, scale_factor, atomic, accum))


class PolluxTraces(PolluxTraceFormat):
    def default_throughputs(
        self, trace: Trace, worker_types: tuple[str, ...], base: ThroughputTable
    ) -> ThroughputTable:
        """Each job's samples/s (its trace's steps are samples) from its application's
        measured model, the same on every worker type (Pollux measured one: T4)."""
        table = ThroughputTable(source="Pollux artifact step times (bundled, fitted)")
        for job in trace.jobs:
            batch = batch_size_of(job.job_type)
            if batch is None:
                continue
            rate = batch * steps_per_second(model_family_of(job.job_type), job.scale_factor, batch)
            for worker_type in worker_types:
                table.set(job.job_type, job.scale_factor, worker_type, rate)
        return table

    def default_cluster(self, trace: Trace) -> str:
        return "pollux-64"


@hookimpl
def register_trace_formats(register: Register) -> None:
    register(PolluxTraces())
