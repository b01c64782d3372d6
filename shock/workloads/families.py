"""Gavel's model families as small CPU workloads, and job-type parsing.

This module imports no torch, so a worker agent or the scheduler can parse job types cheaply.
Batch-size limits come from Shockwave's adaptation tables (bundled `adaptation_patterns.json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from shock.core.errors import ShockError
from shock.traces.templates import gavel_templates

_JOB_TYPE = re.compile(
    r"^\s*(?P<family>[A-Za-z0-9][A-Za-z0-9-]*)\s*(?:\(batch size (?P<bs>\d+)\))?\s*$"
)


class UnknownJobTypeError(ShockError, ValueError):
    """A job type whose family has no workload, or that is not `<Family> (batch size N)`."""


@dataclass(frozen=True, slots=True)
class Family:
    """One Gavel model family and the small synthetic workload that stands in for it."""

    name: str
    task: str
    workload: str
    gavel_dataset: str
    # The Gavel job types of this family (batch sizes in Gavel's job table).
    gavel_batch_sizes: tuple[int, ...]
    # Batch size of job types without "(batch size N)" (A3C, CycleGAN).
    default_batch_size: int
    # Accordion's large batch size; None: Shockwave treats the family as non-adaptive.
    accordion_max_batch_size: int | None
    # GNS never grows the batch size past this; None: no GNS schedule.
    gns_batch_size_limit: int | None

    def job_types(self) -> tuple[str, ...]:
        if not self.gavel_batch_sizes:
            return (self.name,)
        return tuple(f"{self.name} (batch size {bs})" for bs in self.gavel_batch_sizes)


_WORKLOADS = {
    "ResNet-18": (
        "image classification",
        "ResNet-18-style CNN (basic blocks 2-2-2-2, widths 8-64) on synthetic 3x16x16 images, "
        "10 classes",
    ),
    "ResNet-50": (
        "image classification",
        "ResNet-50-style CNN (bottleneck blocks 3-4-6-3, widths 4-32 x4) on synthetic 3x16x16 "
        "images, 10 classes",
    ),
    "Transformer": (
        "translation",
        "encoder-decoder Transformer (d_model 32, 2 heads, 1+1 layers) on synthetic token pairs "
        "(target = reversed source)",
    ),
    "LM": (
        "language modeling",
        "2-layer LSTM language model (embedding 32, hidden 64) on a token stream drawn from a "
        "seeded Markov chain",
    ),
    "Recommendation": (
        "recommendation",
        "autoencoder (256 items -> 64 -> 256) on synthetic low-rank user-item vectors",
    ),
    "CycleGAN": (
        "image-to-image translation",
        "two tiny conv generators and two patch discriminators (CycleGAN losses) on unpaired "
        "synthetic 3x16x16 images of two styles",
    ),
    "A3C": (
        "reinforcement learning",
        "advantage actor-critic (16 -> 64 -> 4 actions + value) on a synthetic contextual bandit",
    ),
}


@cache
def _adaptation_tables() -> dict[str, Any]:
    text = resources.files("shock.data").joinpath("adaptation_patterns.json").read_text()
    tables: dict[str, Any] = json.loads(text)
    return tables


def _smallest_profiled_batch_size(name: str) -> int:
    # A3C and CycleGAN job types name no batch size; Shockwave profiles them from bs 4 and 1.
    memory = _adaptation_tables()["per_epoch_metrics"]["gpu_memory"]["by_model_and_batch_size"]
    return min(int(size) for size in memory[name])


def _build_families() -> Mapping[str, Family]:
    tables = _adaptation_tables()
    accordion_max = tables["accordion"]["max_batch_size"]
    gns_limit = tables["gns"]["batch_size_limit"]
    datasets = tables["datasets"]["dataset_of_model"]
    batch_sizes: dict[str, list[int]] = {}
    for template in gavel_templates():
        if template.batch_size is not None:
            batch_sizes.setdefault(template.model_family, []).append(template.batch_size)
    families = {}
    for name, (task, workload) in _WORKLOADS.items():
        sizes = tuple(sorted(batch_sizes.get(name, ())))
        families[name] = Family(
            name=name,
            task=task,
            workload=workload,
            gavel_dataset=datasets[name],
            gavel_batch_sizes=sizes,
            default_batch_size=sizes[0] if sizes else _smallest_profiled_batch_size(name),
            accordion_max_batch_size=accordion_max.get(name),
            gns_batch_size_limit=gns_limit.get(name),
        )
    return MappingProxyType(families)


FAMILIES: Mapping[str, Family] = _build_families()

# Pollux's applications (its workload CSVs' job types, `bert (batch size 256)`) run as the
# family whose small workload does the same kind of task.
POLLUX_STAND_INS: Mapping[str, str] = MappingProxyType({
    "bert": "Transformer",
    "cifar10": "ResNet-18",
    "deepspeech2": "LM",
    "imagenet": "ResNet-50",
    "ncf": "Recommendation",
    "yolov3": "ResNet-50",
})  # fmt: skip


def parse_job_type(text: str) -> tuple[str, int]:
    """`"ResNet-18 (batch size 32)"` -> `("ResNet-18", 32)`; a Pollux application's type
    names its stand-in (`"bert (batch size 256)"` -> `("Transformer", 256)`); a clear error
    otherwise."""
    match = _JOB_TYPE.match(text)
    if match is None:
        raise UnknownJobTypeError(
            f"job type {text!r} is not '<family> (batch size <N>)'; "
            f"families: {', '.join(FAMILIES)}"
        )
    name = POLLUX_STAND_INS.get(match.group("family"), match.group("family"))
    family = FAMILIES.get(name)
    if family is None:
        raise UnknownJobTypeError(
            f"job type {text!r}: no workload for model family {name!r}; "
            f"families: {', '.join(FAMILIES)}"
        )
    if match.group("bs") is None:
        return name, family.default_batch_size
    batch_size = int(match.group("bs"))
    if batch_size < 1:
        raise UnknownJobTypeError(f"job type {text!r}: batch size must be >= 1")
    return name, batch_size


def all_job_types() -> tuple[str, ...]:
    """Every Gavel job type that has a workload, in family order."""
    return tuple(job_type for family in FAMILIES.values() for job_type in family.job_types())
