"""First in, first out: jobs take whole worker types in arrival order, with no backfilling.

`fifo` keeps each job on the type it first got and picks a random type that fits for a new
job (heterogeneity-agnostic); `fifo_perf` re-places every job each time on the fastest type
that still fits. Either way the queue stops at the first job that fits nowhere.
`fifo_packed` then lets the waiting jobs, in order, share a gang with a running job of the same
gang size when the pair's normalised throughput (each member's co-located over isolated
throughput, summed) exceeds 1.5, as Gavel does; the queue stops at the first job with no
partner.

Option `gavel_queue=true` (set for `fifo_perf` by `--preset gavel`) follows Gavel's queue: a
job is offered the worker types with room for its gang whatever its throughput there, takes
the fastest (ties to the first type in name order), and when that one runs it at 0 steps/s it
is passed over until the next allocation instead of stopping the queue.
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
    by_job,
    hookimpl,
    job_keyed,
    random_state,
    set_random_state,
    typed_options,
)


@dataclass(frozen=True, slots=True)
class FifoOptions:
    # Gavel's queue (module docstring): a job that can run nowhere with room is passed over.
    gavel_queue: bool = False


class Fifo(Policy):
    backfill = False

    def __init__(
        self, heterogeneity_aware: bool, seed: int = 0, options: FifoOptions | None = None
    ) -> None:
        self.options = options if options is not None else FifoOptions()
        self.heterogeneity_aware = heterogeneity_aware
        self.name = "fifo_perf" if heterogeneity_aware else "fifo"
        self.description = (
            "FIFO; each job on the fastest worker type that is free"
            if heterogeneity_aware
            else "FIFO; each job on a random free worker type, kept until it finishes"
        )
        self._rng = random.Random(seed)
        self._placed: dict[int, int] = {}  # job id -> worker type column (agnostic variant)

    def for_run(self, seed: int) -> Fifo:
        return Fifo(self.heterogeneity_aware, seed, self.options)

    def with_options(self, values: Mapping[str, str]) -> Fifo:
        options = typed_options(self.options, values, self.name)
        return Fifo(self.heterogeneity_aware, options=options)

    def snapshot(self) -> dict[str, Any]:
        return {"placed": by_job(self._placed), "rng": random_state(self._rng)}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._placed = job_keyed(snapshot["placed"], int)
        set_random_state(self._rng, snapshot["rng"])

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        free = problem.capacity.astype(float).copy()
        placed = {} if self.heterogeneity_aware else self._placed
        active = {job.job_id for job in problem.jobs}
        for job_id in [j for j in placed if j not in active]:
            del placed[job_id]
        row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
        for job_id, column in placed.items():
            free[column] -= problem.jobs[row_of[job_id]].scale_factor
        for row, job in enumerate(problem.jobs):  # jobs are in arrival (id) order
            if job.job_id in placed:
                continue
            rates = problem.throughputs[row]
            if self.options.gavel_queue:
                offered = self._gavel_column(problem, rates, free, job.scale_factor)
                if offered is None:
                    break
                if rates[offered] <= 0:
                    continue  # Gavel drops it from this allocation's queue
                placed[job.job_id] = offered
                free[offered] -= job.scale_factor
                continue
            fits = [w for w in range(len(free)) if free[w] >= job.scale_factor and rates[w] > 0]
            if not fits:
                break  # strict FIFO: nobody overtakes the head of the queue
            if self.heterogeneity_aware:
                column = max(fits, key=lambda w: (rates[w], -w))
            else:
                column = fits[self._rng.randrange(len(fits))]
            placed[job.job_id] = column
            free[column] -= job.scale_factor
        fractions = np.zeros((len(problem.jobs), len(problem.worker_types)))
        for job_id, column in placed.items():
            fractions[row_of[job_id], column] = 1.0
        keys = tuple(job.job_id for job in problem.jobs)
        return Allocation(keys, problem.worker_types, fractions)

    def _gavel_column(
        self, problem: PolicyInput, rates: np.ndarray, free: np.ndarray, gang: int
    ) -> int | None:
        """The type Gavel's FIFO gives a job: among the types with room for the gang, in
        name order, the first fastest (perf) or a random one; None when none has room."""
        in_name_order = sorted(range(len(free)), key=lambda w: problem.worker_types[w])
        fits = [w for w in in_name_order if free[w] >= gang]
        if not fits:
            return None
        if not self.heterogeneity_aware:
            return fits[self._rng.randrange(len(fits))]
        return max(fits, key=lambda w: rates[w])  # max keeps the first of equals


PACKING_THRESHOLD = 1.5  # Gavel's: a pair must do 1.5x the work of one job alone


class FifoPacked(Policy):
    name = "fifo_packed"
    description = (
        "FIFO on the fastest free type; waiting jobs pair with running ones (space sharing)"
    )
    backfill = False

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        alone = Fifo(heterogeneity_aware=True).allocate(problem, solver)
        column_of = {
            key: int(np.argmax(row))
            for key, row in zip(alone.keys, alone.fractions, strict=True)
            if row.max() > 0
        }
        row_of = {job.job_id: row for row, job in enumerate(problem.jobs)}
        pairs: dict[tuple[int, int], int] = {}
        paired: set[int] = set()
        for job in problem.jobs:
            if job.job_id in column_of:
                continue
            partner = self._best_partner(problem, job.job_id, column_of, paired, row_of)
            if partner is None:
                break  # strict FIFO
            partner_id, column = partner
            pairs[(min(job.job_id, partner_id), max(job.job_id, partner_id))] = column
            paired.update((job.job_id, partner_id))
        keys: list[UnitKey] = []
        rows = []
        for job in problem.jobs:
            row = np.zeros(len(problem.worker_types))
            if job.job_id in column_of and job.job_id not in paired:
                row[column_of[job.job_id]] = 1.0
            keys.append(job.job_id)
            rows.append(row)
        for key, column in pairs.items():
            row = np.zeros(len(problem.worker_types))
            row[column] = 1.0
            keys.append(key)
            rows.append(row)
        return Allocation(tuple(keys), problem.worker_types, np.array(rows))

    @staticmethod
    def _best_partner(
        problem: PolicyInput,
        job_id: int,
        column_of: dict[UnitKey, int],
        paired: set[int],
        row_of: dict[int, int],
    ) -> tuple[int, int] | None:
        table = problem.table
        if table is None:
            return None
        job = problem.jobs[row_of[job_id]]
        best: tuple[float, int, int] | None = None
        for other_id, column in column_of.items():
            if not isinstance(other_id, int) or other_id in paired:
                continue
            other = problem.jobs[row_of[other_id]]
            if other.scale_factor != job.scale_factor:
                continue
            worker_type = problem.worker_types[column]
            mine, theirs = table.pair_throughput(
                (job.job_type, job.scale_factor), (other.job_type, other.scale_factor), worker_type
            )
            alone_mine = problem.throughputs[row_of[job_id], column]
            alone_theirs = problem.throughputs[row_of[other_id], column]
            if min(mine, theirs, alone_mine, alone_theirs) <= 0:
                continue
            score = mine / alone_mine + theirs / alone_theirs
            if score > PACKING_THRESHOLD and (best is None or score > best[0]):
                best = (score, other_id, column)
        return None if best is None else (best[1], best[2])


@hookimpl
def register_policies(register: Register) -> None:
    register(Fifo(heterogeneity_aware=False))
    register(Fifo(heterogeneity_aware=True))
    register(FifoPacked())
