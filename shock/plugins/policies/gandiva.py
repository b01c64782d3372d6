"""Gandiva (OSDI'18) as Gavel models it: time slicing with introspective packing.

Jobs of the same gang size are paired at random; a pair is kept while its normalised
throughput (each member's co-located throughput over its isolated one, summed, on the type
where the pair does best) is at least 1, and a pair that does worse is never tried again. The
units (kept pairs and single jobs) then share every worker type equally in time, without
regard to which type suits whom (heterogeneity-agnostic).

Option `gavel_packing=true` (set by `--preset gavel`) follows Gavel's simulator instead: jobs
are paired only while their gangs ask for more GPUs than the cluster has; each allocation
draws pairs with `sample(unpaired jobs in id order, 2)`, as many draws as there were unpaired
jobs, a draw of two gang sizes wasted; a pair is kept until a member leaves or its normalised
throughput summed over all worker types falls below 1 (0 if it cannot run on some type), and
its members may be paired again afterwards; each unit gets an equal share of every type's
GPUs (its time fraction is that share over its gang size, capped at 1); and the worker types are
taken in Gavel's fixed order each round (V100, P100, K80), not shuffled.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    Policy,
    PolicyInput,
    Register,
    SolverSpec,
    UnitKey,
    hookimpl,
    job_pairs,
    pairs_of,
    random_state,
    set_random_state,
    typed_options,
)

GOOD_PAIR = 1.0  # a pair must do at least the work of one job alone to be kept


@dataclass(frozen=True, slots=True)
class GandivaOptions:
    # Gavel's simulator's pairing and shares (module docstring).
    gavel_packing: bool = False


class Gandiva(Policy):
    name = "gandiva"
    description = "Gandiva: equal time slices; random pairs kept while packing pays off"
    heterogeneity_aware = False

    def __init__(self, seed: int = 0, options: GandivaOptions | None = None) -> None:
        self.options = options if options is not None else GandivaOptions()
        # The flag only decides whether the mechanism shuffles the worker types each round;
        # Gavel's simulator does not for a policy named "...Packing" (Gandiva_Packing).
        self.heterogeneity_aware = self.options.gavel_packing
        self._seed = seed
        self._rng = random.Random(seed)
        self._kept: set[tuple[int, int]] = set()
        self._rejected: set[tuple[int, int]] = set()

    def for_run(self, seed: int) -> Gandiva:
        return Gandiva(seed, self.options)

    def with_options(self, values: Mapping[str, str]) -> Gandiva:
        return Gandiva(self._seed, typed_options(self.options, values, self.name))

    def snapshot(self) -> dict[str, Any]:
        return {
            "kept": job_pairs(self._kept),
            "rejected": job_pairs(self._rejected),
            "rng": random_state(self._rng),
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._kept = pairs_of(snapshot["kept"])
        self._rejected = pairs_of(snapshot["rejected"])
        set_random_state(self._rng, snapshot["rng"])

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        if self.options.gavel_packing:
            return self._allocate_as_gavel(problem)
        row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
        self._kept = {p for p in self._kept if p[0] in row_of and p[1] in row_of}
        in_pair = {job_id for pair in self._kept for job_id in pair}
        by_size: dict[int, list[int]] = {}
        for job in problem.jobs:
            if job.job_id not in in_pair:
                by_size.setdefault(job.scale_factor, []).append(job.job_id)
        for candidates in by_size.values():
            self._rng.shuffle(candidates)
            for a, b in zip(candidates[::2], candidates[1::2], strict=False):
                pair = (min(a, b), max(a, b))
                if pair in self._rejected:
                    continue
                if _normalised_pair_throughput(problem, pair, row_of) >= GOOD_PAIR:
                    self._kept.add(pair)
                else:
                    self._rejected.add(pair)
        in_pair = {job_id for pair in self._kept for job_id in pair}
        units: list[UnitKey] = [j.job_id for j in problem.jobs if j.job_id not in in_pair]
        units += sorted(self._kept)
        gangs = np.array(
            [problem.jobs[row_of[u if isinstance(u, int) else u[0]]].scale_factor for u in units],
            float,
        )
        # Equal time for every unit on every type, scaled down until the gangs fit.
        share = problem.capacity / problem.capacity.sum()
        scale = min(1.0, float(problem.capacity.sum() / gangs.sum()))
        unit_rows = np.tile(share * scale, (len(units), 1))
        keys: list[UnitKey] = list(units)
        rows = list(unit_rows)
        for job_id in sorted(in_pair):  # paired jobs run only inside their pair
            keys.append(job_id)
            rows.append(np.zeros(len(problem.worker_types)))
        return Allocation(tuple(keys), problem.worker_types, np.array(rows))

    def _allocate_as_gavel(self, problem: PolicyInput) -> Allocation:
        row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
        gang = {job.job_id: job.scale_factor for job in problem.jobs}
        self._kept = {
            p
            for p in self._kept
            if p[0] in row_of
            and p[1] in row_of
            and _summed_pair_throughput(problem, p, row_of) >= GOOD_PAIR
        }
        units: list[UnitKey] = [job.job_id for job in problem.jobs]
        if sum(gang.values()) > problem.capacity.sum():
            in_pair = {job_id for pair in self._kept for job_id in pair}
            unpaired = sorted(j for j in gang if j not in in_pair)
            for _ in range(len(unpaired)):
                if len(unpaired) < 2:
                    break
                a, b = self._rng.sample(unpaired, 2)
                if gang[a] != gang[b]:
                    continue  # a wasted draw, as in Gavel
                unpaired.remove(a)
                unpaired.remove(b)
                self._kept.add((min(a, b), max(a, b)))
            units = [*unpaired, *sorted(self._kept)]
        # Every unit an equal share of each type's GPUs, over its gang size, at most 1 in all.
        gangs = np.array([gang[u if isinstance(u, int) else u[0]] for u in units], float)
        rows = problem.capacity[None, :] / len(units) / gangs[:, None]
        rows /= np.maximum(rows.sum(axis=1), 1.0)[:, None]
        keys: list[UnitKey] = list(units)
        paired = sorted(j for u in units if isinstance(u, tuple) for j in u)
        keys += paired  # paired jobs run only inside their pair
        rows = np.vstack([rows, np.zeros((len(paired), len(problem.worker_types)))])
        return Allocation(tuple(keys), problem.worker_types, rows)


def _summed_pair_throughput(
    problem: PolicyInput, pair: tuple[int, int], row_of: dict[int, int]
) -> float:
    """Gavel's test of a pair: each member's co-located over isolated throughput, summed over
    members and over every worker type; 0 if either member cannot run packed on some type."""
    table = problem.table
    if table is None:
        return 0.0
    first, second = (problem.jobs[row_of[j]] for j in pair)
    total = 0.0
    for column, worker_type in enumerate(problem.worker_types):
        packed = table.pair_throughput(
            (first.job_type, first.scale_factor),
            (second.job_type, second.scale_factor),
            worker_type,
        )
        for job_id, rate in zip(pair, packed, strict=True):
            if rate <= 0:
                return 0.0
            alone = problem.throughputs[row_of[job_id], column]
            if alone > 0:
                total += rate / alone
    return total


def _normalised_pair_throughput(
    problem: PolicyInput, pair: tuple[int, int], row_of: dict[int, int]
) -> float:
    table = problem.table
    if table is None:
        return 0.0
    first, second = (problem.jobs[row_of[j]] for j in pair)
    best = 0.0
    for column, worker_type in enumerate(problem.worker_types):
        a, b = table.pair_throughput(
            (first.job_type, first.scale_factor),
            (second.job_type, second.scale_factor),
            worker_type,
        )
        alone_a = problem.throughputs[row_of[pair[0]], column]
        alone_b = problem.throughputs[row_of[pair[1]], column]
        if min(a, b, alone_a, alone_b) > 0:
            best = max(best, a / alone_a + b / alone_b)
    return best


@hookimpl
def register_policies(register: Register) -> None:
    register(Gandiva())
