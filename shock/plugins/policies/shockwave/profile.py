"""A job's epoch profile as Shockwave's scheduler sees it: the batch size its adaptation model
gives each epoch, and each epoch's isolated duration at that batch size.

Shockwave hands its scheduler these profiles (the pickle its profile generator writes); shock
builds the same from the job's trace columns: `num_epochs = ceil(total_steps /
ceil(samples / initial batch size))`, the batch sizes of the job's adaptation plugin, and
duration = (samples / bs) / the fastest isolated throughput at bs and the job's scale factor,
rounded to whole seconds and at least 1 s, as Shockwave's scheduler reads them
(`JobMetaData.convert_epoch_duration_in_seconds`).
"""

from __future__ import annotations

import math

from shock.api import (
    JobSpec,
    PolicyJob,
    ShockError,
    ThroughputTable,
    batch_size_of,
    datasets,
    default_registry,
    job_type_with_batch_size,
    model_family_of,
    num_epochs,
    steps_per_epoch,
)
from shock.plugins.policies.shockwave.predictor import JobProfile

# A job of a model without a known dataset is counted in this many equal pseudo-epochs.
PSEUDO_EPOCHS = 100


def epoch_steps(job: PolicyJob) -> float:
    """Steps per epoch at the job's current batch size (pseudo-epochs without a dataset)."""
    model, size = model_family_of(job.job_type), batch_size_of(job.job_type)
    if size is None or datasets().samples(model) is None:
        return max(job.total_steps / PSEUDO_EPOCHS, 1e-9)
    return float(steps_per_epoch(model, size))


def samples_per_epoch(job: PolicyJob) -> float:
    """Samples in one epoch of the job's dataset; 0 for a model without a known dataset."""
    return float(datasets().samples(model_family_of(job.job_type)) or 0)


def _batch_sizes(job: PolicyJob) -> list[int] | None:
    size = batch_size_of(job.job_type)
    if size is None or datasets().samples(model_family_of(job.job_type)) is None:
        return None
    spec = JobSpec(
        job.job_id,
        job.job_type,
        job.total_steps,
        job.scale_factor,
        job.arrival_time,
        mode=job.mode,
    )
    count = num_epochs(spec)
    try:
        return list(default_registry().get("adaptation", job.mode).batch_sizes(spec, count))
    except ShockError:  # an adaptation mode no plugin provides: the job stays as it is
        return [size] * count


def whole_seconds(duration_s: float) -> float:
    """An epoch duration as Shockwave's scheduler keeps it: rounded (half to even), >= 1 s."""
    return max(1.0, float(round(duration_s)))


def build_profile(
    job: PolicyJob,
    table: ThroughputTable | None,
    worker_types: tuple[str, ...],
    measured_rate: float,
) -> JobProfile:
    """The job's profile, from its state when first seen (initial batch size, total steps)."""
    sizes = _batch_sizes(job)
    if sizes is None or not sizes:
        per_epoch = job.total_steps / PSEUDO_EPOCHS / measured_rate if measured_rate > 0 else 1.0
        return JobProfile((0,) * PSEUDO_EPOCHS, (per_epoch,) * PSEUDO_EPOCHS)
    model = model_family_of(job.job_type)
    samples = datasets().samples(model) or 0
    by_size: dict[int, float] = {}
    for size in set(sizes):
        rate = 0.0
        if table is not None:
            job_type = job_type_with_batch_size(model, size)
            rate = max(table.throughput(job_type, job.scale_factor, w) for w in worker_types)
        if rate <= 0 and size == batch_size_of(job.job_type):
            rate = measured_rate
        by_size[size] = whole_seconds(samples / size / rate) if rate > 0 else math.inf
    if any(math.isinf(d) for d in by_size.values()):  # a batch size the table lacks
        known = [d for d in by_size.values() if not math.isinf(d)]
        fallback = min(known) if known else 1.0
        by_size = {s: fallback if math.isinf(d) else d for s, d in by_size.items()}
    return JobProfile(tuple(sizes), tuple(by_size[s] for s in sizes))
