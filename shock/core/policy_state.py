"""JSON forms of what policies keep between allocations (`Policy.snapshot` / `restore`).

A scheduler journals a policy's snapshot so that, restarted, it goes on with the policy's
memory instead of a fresh one. JSON turns integer dict keys into strings and tuples into
lists, and random generators must be carried over state by state: these helpers do both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def by_job(values: Mapping[int, T]) -> dict[str, T]:
    """A job-keyed dict with JSON's string keys."""
    return {str(job_id): value for job_id, value in values.items()}


def job_keyed(data: Mapping[str, Any], convert: Callable[[Any], T]) -> dict[int, T]:
    """Back from `by_job`, each value through `convert`."""
    return {int(job_id): convert(value) for job_id, value in data.items()}


def job_pairs(pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    return sorted([int(a), int(b)] for a, b in pairs)


def pairs_of(data: Iterable[Iterable[int]]) -> set[tuple[int, int]]:
    pairs = set()
    for pair in data:
        a, b = (int(x) for x in pair)
        pairs.add((a, b))
    return pairs


def random_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_random_state(rng: random.Random, data: list[Any]) -> None:
    version, internal, gauss = data
    rng.setstate((int(version), tuple(int(x) for x in internal), gauss))


def generator_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


def set_generator_state(rng: np.random.Generator, data: Mapping[str, Any]) -> None:
    rng.bit_generator.state = dict(data)
