"""From the jobs a production trace recorded to a shock trace: the choices every importer
shares (which jobs to keep, how many, when they arrive, which model each one trains, how many
steps, which entity it belongs to).

Every random choice draws from its own stream seeded from `--seed`, so changing one option
(the arrival rate, say) does not change the others' draws, and the same input and options
give the same trace.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Literal

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable
from shock.resources.profiles import PROFILE_FILE, synergy_profiles
from shock.traces.importers.records import RawJob, ReadCounts
from shock.traces.templates import JobTemplate, gavel_templates

ModelChoice = Literal["gpu-time-class", "random-gavel", "random-synergy"]
SampleChoice = Literal["uniform", "window", "busiest"]
EntityChoice = Literal["user", "vc", "none"]
OddGpus = Literal["down", "one", "drop"]
Fractional = Literal["ceil", "drop"]

MODEL_CHOICES: tuple[str, ...] = ("gpu-time-class", "random-gavel", "random-synergy")
SAMPLE_CHOICES: tuple[str, ...] = ("uniform", "window", "busiest")
ENTITY_CHOICES: tuple[str, ...] = ("user", "vc", "none")

# Pollux's workload classes by GPU-time (GPU-hours): small < 1 <= medium < 10 <= large < 100
# <= xlarge. Each class maps to Gavel's model families closest to the models Pollux gave it
# (small: CIFAR-10 ResNet-18 and MovieLens NCF; medium: BERT and DeepSpeech2, language and
# speech models; large: YOLOv3, which Gavel lacks; xlarge: ImageNet ResNet-50).
GPU_TIME_CLASSES: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("small", 1.0, ("ResNet-18", "Recommendation")),
    ("medium", 10.0, ("LM", "Transformer")),
    ("large", 100.0, ("ResNet-50",)),
    ("xlarge", math.inf, ("ResNet-50",)),
)

# Independent random streams, one per choice.
_SAMPLE_STREAM = 1
_ARRIVAL_STREAM = 2
_MODEL_STREAM = 3


@dataclass(frozen=True, slots=True)
class ShapeOptions:
    num_jobs: int | None = None  # None: every kept job
    seed: int = 0
    sample: SampleChoice = "uniform"
    models: ModelChoice = "gpu-time-class"
    entity: EntityChoice = "none"
    jobs_per_hour: float | None = None  # None: arrivals as recorded; 0: all at t = 0
    min_duration_s: float | None = None
    max_duration_s: float | None = None
    max_gpus: int | None = None
    odd_gpus: OddGpus = "down"
    fractional: Fractional = "ceil"
    worker_type: str = "v100"


@dataclass(slots=True)
class ImportSummary:
    """What an import read, dropped and wrote, for the user to check."""

    read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    kept: int = 0
    written: int = 0
    classes: dict[str, int] = field(default_factory=dict)

    def merge(self, counts: ReadCounts) -> None:
        self.read += counts.read
        for reason, count in counts.dropped.items():
            self.drop(reason, count)

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + count


def check_options(options: ShapeOptions) -> None:
    if options.num_jobs is not None and options.num_jobs < 1:
        raise InputError(f"must be >= 1, got {options.num_jobs}", field="--jobs")
    if options.jobs_per_hour is not None and not options.jobs_per_hour >= 0:
        raise InputError(f"must be >= 0, got {options.jobs_per_hour}", field="--rate")
    low, high = options.min_duration_s, options.max_duration_s
    if low is not None and low < 0:
        raise InputError(f"must be >= 0, got {low}", field="--min-duration")
    if low is not None and high is not None and high < low:
        raise InputError(f"must be >= --min-duration ({low}), got {high}", field="--max-duration")
    if options.max_gpus is not None and options.max_gpus < 1:
        raise InputError(f"must be >= 1, got {options.max_gpus}", field="--max-gpus")


def whole_gpus(gpus: float, options: ShapeOptions) -> tuple[int | None, str]:
    """The job's GPU count in shock, or None and why it is dropped."""
    if gpus <= 0:
        return None, "no GPU"
    if not float(gpus).is_integer():
        if options.fractional == "drop":
            return None, "a fraction of a GPU"
        gpus = math.ceil(gpus)
    count = int(gpus)
    if count & (count - 1):  # not a power of two
        if options.odd_gpus == "drop":
            return None, "GPU count not a power of two"
        count = 1 if options.odd_gpus == "one" else 1 << (count.bit_length() - 1)
    if options.max_gpus is not None and count > options.max_gpus:
        return None, "more GPUs than --max-gpus"
    return count, ""


def keep(job: RawJob, options: ShapeOptions, summary: ImportSummary) -> RawJob | None:
    """The job with a whole GPU count, or None (counted in the summary) when it is dropped."""
    if job.duration_s <= 0:
        summary.drop("no run time")
        return None
    if options.min_duration_s is not None and job.duration_s < options.min_duration_s:
        summary.drop("shorter than --min-duration")
        return None
    if options.max_duration_s is not None and job.duration_s > options.max_duration_s:
        summary.drop("longer than --max-duration")
        return None
    count, reason = whole_gpus(job.gpus, options)
    if count is None:
        summary.drop(reason)
        return None
    if count == job.gpus:
        return job
    return RawJob(
        job.name, job.submit_s, job.duration_s, count, job.user, job.vc, job.cpus, job.memory_gb
    )


def shape_jobs(
    raw_jobs: Iterable[RawJob],
    options: ShapeOptions,
    table: ThroughputTable,
    summary: ImportSummary,
    *,
    known: tuple[str, ...] = ("user", "vc"),
) -> list[JobSpec]:
    """The shock jobs, in arrival order, ids 0, 1, ...; `known`: the entity kinds the trace
    records (an error names the others)."""
    check_options(options)
    if options.entity != "none" and options.entity not in known:
        raise InputError(
            f"this trace records no {options.entity} (it records: "
            f"{', '.join(known) or 'none'}); use --entity none",
            field="--entity",
        )
    kept = [job for job in (keep(raw, options, summary) for raw in raw_jobs) if job is not None]
    kept.sort(key=lambda job: (job.submit_s, job.name))
    summary.kept = len(kept)
    chosen = _sample(kept, options)
    picker = _ModelPicker(options, table)
    arrivals = _arrivals(chosen, options)
    jobs: list[JobSpec] = []
    for job_id, (raw, arrival) in enumerate(zip(chosen, arrivals, strict=True)):
        job = picker.job(job_id, raw, arrival, summary)
        if job is not None:
            jobs.append(job)
    summary.written = len(jobs)
    # Ids stay consecutive where the model choice dropped a job.
    return [job if job.job_id == i else replace(job, job_id=i) for i, job in enumerate(jobs)]


def _sample(jobs: list[RawJob], options: ShapeOptions) -> list[RawJob]:
    count = options.num_jobs
    if count is None or count >= len(jobs):
        return jobs
    if options.sample == "busiest":
        # The `count` consecutive submissions that span the least time; the earliest on ties.
        start = min(
            range(len(jobs) - count + 1),
            key=lambda i: (jobs[i + count - 1].submit_s - jobs[i].submit_s, i),
        )
        return jobs[start : start + count]
    rng = random.Random(options.seed * 10 + _SAMPLE_STREAM)
    if options.sample == "window":
        start = rng.randrange(len(jobs) - count + 1)
        return jobs[start : start + count]
    picked = sorted(rng.sample(range(len(jobs)), count))
    return [jobs[i] for i in picked]


def _arrivals(jobs: list[RawJob], options: ShapeOptions) -> list[float]:
    if not jobs:
        return []
    if options.jobs_per_hour is None:
        first = jobs[0].submit_s
        return [job.submit_s - first for job in jobs]
    if options.jobs_per_hour == 0:
        return [0.0] * len(jobs)
    rng = random.Random(options.seed * 10 + _ARRIVAL_STREAM)
    mean_gap = 3600.0 / options.jobs_per_hour
    arrivals, clock = [], 0.0
    for _ in jobs:
        arrivals.append(clock)
        clock += -math.log(1.0 - rng.random()) * mean_gap
    return arrivals


class _ModelPicker:
    """Chooses each job's model and turns its run time into steps."""

    def __init__(self, options: ShapeOptions, table: ThroughputTable) -> None:
        self.options = options
        self.table = table
        self.rng = random.Random(options.seed * 10 + _MODEL_STREAM)
        self.templates = gavel_templates()
        profiles = synergy_profiles()
        self.synergy_models = tuple(
            sorted(name for name in profiles if name in _default_zoo())
        )
        self.iter_time = {name: profiles[name].iter_time_s for name in self.synergy_models}
        if options.models != "random-synergy" and options.worker_type not in table.worker_types:
            raise InputError(
                f"'{options.worker_type}' is not in the throughput table "
                f"(it has {', '.join(table.worker_types)})",
                field="--worker-type",
            )

    def _runnable(self, template: JobTemplate, gpus: int) -> bool:
        return (
            self.table.has(template.job_type, gpus)
            and self.table.throughput(template.job_type, gpus, self.options.worker_type) > 0
        )

    def job(
        self, job_id: int, raw: RawJob, arrival: float, summary: ImportSummary
    ) -> JobSpec | None:
        gpus = int(raw.gpus)
        entity = None if self.options.entity == "none" else getattr(raw, self.options.entity)
        common = dict(
            job_id=job_id,
            scale_factor=gpus,
            arrival_time=arrival,
            entity=entity,
            cpus=raw.cpus,
            memory_gb=raw.memory_gb,
            duration=raw.duration_s,
        )
        if self.options.models == "random-synergy":
            model = self.rng.choice(self.synergy_models)
            steps = max(1, int(raw.duration_s / self.iter_time[model]))
            summary.classes[model] = summary.classes.get(model, 0) + 1
            return JobSpec(job_type=model, total_steps=steps, **common)  # type: ignore[arg-type]
        if self.options.models == "gpu-time-class":
            label, families = _gpu_time_class(gpus * raw.duration_s / 3600.0)
            candidates = [
                t for t in self.templates if t.model_family in families and self._runnable(t, gpus)
            ]
        else:
            label = "random"
            candidates = [t for t in self.templates if self._runnable(t, gpus)]
        if not candidates:
            summary.drop(f"no model of the table runs on {gpus} GPUs")
            return None
        template = self.rng.choice(candidates)
        summary.classes[label] = summary.classes.get(label, 0) + 1
        rate = self.table.throughput(template.job_type, gpus, self.options.worker_type)
        return JobSpec(
            job_type=template.job_type,
            total_steps=max(1, int(raw.duration_s * rate)),
            command=template.command(),
            working_directory=template.working_directory,
            num_steps_arg=template.num_steps_arg,
            needs_data_dir=template.needs_data_dir,
            **common,  # type: ignore[arg-type]
        )


def _gpu_time_class(gpu_hours: float) -> tuple[str, tuple[str, ...]]:
    for label, upper, families in GPU_TIME_CLASSES:
        if gpu_hours < upper:
            return label, families
    raise AssertionError("the last class has no upper bound")


@cache
def _default_zoo() -> frozenset[str]:
    """Synergy's default model zoo (its profiles also hold bert and vae, outside the zoo)."""
    raw = json.loads(resources.files("shock.data").joinpath(PROFILE_FILE).read_text())
    return frozenset(
        name for name, entry in raw["models"].items() if entry.get("in_default_model_zoo")
    )
