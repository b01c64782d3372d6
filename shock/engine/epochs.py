"""Epochs of a job: dataset sizes, steps per epoch, number of epochs, per-epoch profiles.

The dataset sizes and the rules come from Shockwave's profile generator, bundled in
`shock/data/adaptation_patterns.json` (see data/NOTICE.md). A job's progress is counted in
epochs: when its batch size changes, its steps per epoch change, its epochs do not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable

PATTERNS_FILE = "adaptation_patterns.json"


@cache
def adaptation_data() -> dict[str, Any]:
    """The bundled adaptation-patterns document (read once)."""
    text = resources.files("shock.data").joinpath(PATTERNS_FILE).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@dataclass(frozen=True, slots=True)
class Datasets:
    samples_per_epoch: dict[str, int]
    dataset_of_model: dict[str, str]

    def samples(self, model: str) -> int | None:
        dataset = self.dataset_of_model.get(model)
        return None if dataset is None else self.samples_per_epoch.get(dataset)


@cache
def datasets() -> Datasets:
    raw = adaptation_data()["datasets"]
    return Datasets(
        samples_per_epoch={k: int(v) for k, v in raw["samples_per_epoch"].items()},
        dataset_of_model=dict(raw["dataset_of_model"]),
    )


def job_type_with_batch_size(model: str, batch_size: int) -> str:
    """The Gavel job-type string of a model at a batch size (`LM (batch size 20)`)."""
    return f"{model} (batch size {batch_size})"


def steps_per_epoch(model: str, batch_size: int) -> int:
    """ceil(samples per epoch / batch size): a partial last batch is a step."""
    samples = datasets().samples(model)
    if samples is None:
        raise KeyError(model)
    return math.ceil(samples / batch_size)


def _samples_or_error(job: JobSpec, source: str) -> tuple[int, int]:
    samples = datasets().samples(job.model_family)
    batch_size = job.batch_size
    if samples is None or batch_size is None:
        known = ", ".join(sorted(datasets().dataset_of_model))
        raise InputError(
            f"'{job.job_type}' has no known dataset size or batch size, so its epochs are "
            f"unknown (models with datasets: {known})",
            path=source,
            line=job.source_line,
            field="job_type",
        )
    return samples, batch_size


def num_epochs(job: JobSpec, source: str = "<trace>") -> int:
    """Shockwave's rule: ceil(total_steps / ceil(samples_per_epoch / initial_batch_size))."""
    samples, batch_size = _samples_or_error(job, source)
    return math.ceil(job.total_steps / math.ceil(samples / batch_size))


@dataclass(frozen=True, slots=True)
class EpochProfile:
    """A job's batch size and isolated duration (s) in each epoch on one worker type."""

    batch_sizes: tuple[int, ...]
    durations_s: tuple[float, ...]

    @property
    def total_s(self) -> float:
        return sum(self.durations_s)


def epoch_profile(
    job: JobSpec,
    batch_sizes: Sequence[int],
    table: ThroughputTable,
    worker_type: str = "v100",
    source: str = "<trace>",
) -> EpochProfile:
    """Per-epoch durations by the data file's rule: (samples / bs[e]) / throughput(bs[e]),
    no rounding, throughput the isolated one of the job's model at bs[e] and scale factor."""
    by_size = epoch_durations(job, batch_sizes, table, worker_type, source)
    return EpochProfile(tuple(batch_sizes), tuple(map(by_size.__getitem__, batch_sizes)))


def epoch_durations(
    job: JobSpec,
    batch_sizes: Sequence[int],
    table: ThroughputTable,
    worker_type: str = "v100",
    source: str = "<trace>",
) -> dict[int, float]:
    """The isolated duration (s) of one epoch at each batch size of `batch_sizes`."""
    samples, _ = _samples_or_error(job, source)
    model = job.model_family
    # A job has a few batch sizes over many epochs: each size's duration once, in order of
    # first appearance (so the first size without a throughput is the one reported).
    by_size: dict[int, float] = {}
    for batch_size in dict.fromkeys(batch_sizes):
        job_type = job_type_with_batch_size(model, batch_size)
        rate = table.throughput(job_type, job.scale_factor, worker_type)
        if rate <= 0:
            raise InputError(
                f"throughput table {table.source} has no {worker_type} throughput for "
                f"'{job_type}' at scale factor {job.scale_factor} (the job's {job.mode} "
                "schedule reaches that batch size)",
                path=source,
                line=job.source_line,
                field="job_type",
            )
        by_size[batch_size] = (samples / batch_size) / rate
    return by_size
