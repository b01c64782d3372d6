"""Space sharing: which pairs of jobs may share a GPU gang, and their throughputs.

Two jobs may be co-located when they have the same scale factor and the throughput table
measured the pair with progress for both on some worker type (Gavel's pair entries).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np

from shock.api import PolicyInput, ThroughputTable


@dataclass(frozen=True, slots=True)
class JobClass:
    """Jobs that are interchangeable for a policy: same type, gang size and weight."""

    job_type: str
    scale_factor: int
    priority_weight: float
    rows: tuple[int, ...]  # rows of the PolicyInput's jobs in this class


@dataclass(frozen=True, slots=True)
class ClassPair:
    """A pair of classes whose jobs may share a gang; `rates[w]` = (steps/s of a `first`
    member, of a `second` member) on worker type w."""

    first: int
    second: int
    rates: np.ndarray  # shape (worker types, 2)


def job_classes(problem: PolicyInput, weights: np.ndarray) -> list[JobClass]:
    """Classes in order of first appearance. Jobs are alike only if their isolated throughputs
    and their weights in the objective are the same too."""
    rows_of: dict[tuple[str, int, float, bytes], list[int]] = {}
    for row, job in enumerate(problem.jobs):
        alike = problem.throughputs[row].tobytes() + weights[row].tobytes()
        key = (job.job_type, job.scale_factor, job.priority_weight, alike)
        rows_of.setdefault(key, []).append(row)
    return [JobClass(t, s, w, tuple(rows)) for (t, s, w, _), rows in rows_of.items()]


def pair_rates(
    table: ThroughputTable,
    first: str,
    second: str,
    scale_factor: int,
    worker_types: tuple[str, ...],
) -> np.ndarray:
    rates = np.array(
        [
            table.pair_throughput((first, scale_factor), (second, scale_factor), w)
            for w in worker_types
        ]
    )
    return rates.reshape(len(worker_types), 2)


def class_pairs(problem: PolicyInput, classes: list[JobClass]) -> list[ClassPair]:
    """Pairs of classes (a class with itself when it has two jobs) that can share a gang."""
    table = problem.table
    if table is None:
        return []
    pairs = []
    for i, first in enumerate(classes):
        for j in range(i, len(classes)):
            second = classes[j]
            if first.scale_factor != second.scale_factor:
                continue
            if i == j and len(first.rows) < 2:
                continue
            rates = pair_rates(
                table, first.job_type, second.job_type, first.scale_factor, problem.worker_types
            )
            if i == j:
                # Members of one class are interchangeable: each gets the mean of the two.
                rates = np.repeat(rates.mean(axis=1, keepdims=True), 2, axis=1)
            if np.any((rates[:, 0] > 0) & (rates[:, 1] > 0)):
                pairs.append(ClassPair(i, j, rates))
    return pairs


def concrete_pairs(
    first: JobClass, second: JobClass, same: bool
) -> tuple[list[tuple[int, int]], float]:
    """Pairs of rows that carry a class pair's time, and the factor by which each pair's
    fraction exceeds the per-pair fraction of spreading it over every possible pair.

    Every job keeps the same total time in such pairs and the GPUs used stay the same, so the
    allocation is as good, with far fewer pairs for the mechanism to rotate.
    """
    if same:
        rows = first.rows
        k = len(rows)
        if k == 2:
            return [(rows[0], rows[1])], 1.0
        # A cycle: each job in two pairs; (k - 1) / 2 of the complete graph's share each.
        return [(rows[i], rows[(i + 1) % k]) for i in range(k)], (k - 1) / 2
    # A biregular bipartite graph: rows i and j pair when i = j (mod g).
    a, b = first.rows, second.rows
    g = gcd(len(a), len(b))
    return [(x, y) for i, x in enumerate(a) for j, y in enumerate(b) if (i - j) % g == 0], float(g)
