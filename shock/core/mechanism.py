"""Gavel's round-based mechanism: realise an allocation over rounds.

Each round, every (job, worker type) gets a priority = allocated share / received share; jobs
are taken per worker type by (priority, deficit, allocation), gangs all-or-nothing, and then
placed on GPUs. Received shares count time since the last allocation reset, starting with a
credit of half a round, as in Gavel. The mechanism knows nothing of clocks or execution: a
backend asks it for a round (`plan_round`) and reports what ran (`credit`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from shock.core.errors import InputError
from shock.core.model import Cluster, JobSpec
from shock.core.placement import Placement, PlacementRequest
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob, UnitKey
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable

# Gavel's order of worker types before any shuffle.
_GAVEL_TYPE_ORDER = ("v100", "p100", "k80")
_NO_FRACTION_PRIORITY = 1e9
SELECTION_RULES = ("deficit", "gavel")


@dataclass(frozen=True, slots=True)
class MechanismConfig:
    round_length_s: float = 360.0
    # Allocations are recomputed only when jobs arrived or left, and at most this often.
    min_allocation_interval_s: float = 0.0
    # Gavel: a job that arrived after the last allocation may be picked but is not placed.
    hold_unallocated_jobs: bool = False
    # Use `<type>_unconsolidated` throughputs for gangs that straddle servers.
    placement_sensitive: bool = False
    # "deficit": one queue of (job, type) pairs by time owed (allocation x elapsed - received),
    # which realises allocations closely; "gavel": Gavel's per-type walk by priority.
    selection: str = "deficit"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.selection not in SELECTION_RULES:
            raise ValueError(f"selection must be one of {', '.join(SELECTION_RULES)}")


@dataclass(slots=True)
class JobState:
    """Mutable per-job state of the mechanism."""

    spec: JobSpec
    job_id: int
    scale_factor: int
    total_steps: int
    rates: list[float]  # isolated steps/s per worker-type column
    unconsolidated_rates: list[float]
    steps_done: float = 0.0
    time_so_far: list[float] = field(default_factory=list)
    deficit: list[float] = field(default_factory=list)
    allocation: list[float] | None = None

    @property
    def remaining(self) -> float:
        return self.total_steps - self.steps_done


class Assignment(NamedTuple):
    """One job's place in a round (a named tuple: built for every job in every round)."""

    job: JobState
    column: int
    worker_type: str
    gpus: tuple[int, ...]
    rate: float  # steps/s it runs at here
    kept_gpus: bool  # ran on exactly these GPUs last round (no checkpoint-restore needed)


@dataclass(slots=True)
class MechanismStats:
    preemptions: int = 0
    lease_extensions: int = 0
    lease_opportunities: int = 0
    allocations: int = 0
    solver_seconds: float = 0.0


class Mechanism:
    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        solver: SolverSpec,
        placement: Placement,
        table: ThroughputTable,
        config: MechanismConfig,
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.solver = solver
        self.placement = placement
        self.table = table
        self.config = config
        self.worker_types = cluster.worker_types
        self.capacity = np.array([cluster.gpus_per_type[w] for w in self.worker_types], float)
        self.servers_by_column: list[list[list[int]]] = [[] for _ in self.worker_types]
        self.server_of_gpu: dict[int, int] = {}
        next_gpu = 0
        for server in cluster.servers():
            gpus = list(range(next_gpu, next_gpu + server.num_gpus))
            next_gpu += server.num_gpus
            self.servers_by_column[self.worker_types.index(server.worker_type)].append(gpus)
            for gpu in gpus:
                self.server_of_gpu[gpu] = server.server_id
        order = [w for w in _GAVEL_TYPE_ORDER if w in self.worker_types]
        order += [w for w in self.worker_types if w not in order]
        self._type_order = [self.worker_types.index(w) for w in order]
        self._shuffler = random.Random(config.seed + 5)
        self.active: dict[int, JobState] = {}
        self.worker_time = [0.0] * len(self.worker_types)
        self.need_allocation = True
        self.last_reset_s = 0.0
        self.allocation: Allocation = Allocation.empty(self.worker_types)
        self.previous_round: dict[int, tuple[int, tuple[int, ...]]] = {}
        self.stats = MechanismStats()

    # Jobs entering and leaving.

    def check_job(self, job: JobSpec, source: str) -> None:
        """Fail early, naming the trace line, when the table cannot run a job anywhere."""
        rates = self._rates(job)
        if max(rates, default=0.0) <= 0:
            raise InputError(
                f"throughput table {self.table.source} has no throughput for "
                f"'{job.job_type}' at scale factor {job.scale_factor} on "
                f"{', '.join(self.worker_types)}",
                path=source,
                line=job.source_line,
                field="job_type",
            )
        if job.scale_factor > int(self.capacity.max(initial=0)):
            raise InputError(
                f"job needs {job.scale_factor} GPUs but no worker type has that many",
                path=source,
                line=job.source_line,
                field="scale_factor",
            )

    def _rates(self, job: JobSpec) -> list[float]:
        return [self.table.throughput(job.job_type, job.scale_factor, w) for w in self.worker_types]

    def admit(self, job: JobSpec) -> JobState:
        n = len(self.worker_types)
        rates = self._rates(job)
        unconsolidated = [
            self.table.throughput(job.job_type, job.scale_factor, f"{w}_unconsolidated") or r
            for w, r in zip(self.worker_types, rates, strict=True)
        ]
        half_round = self.config.round_length_s / 2
        state = JobState(
            spec=job,
            job_id=job.job_id,
            scale_factor=job.scale_factor,
            total_steps=job.total_steps,
            rates=rates,
            unconsolidated_rates=unconsolidated,
            time_so_far=[half_round] * n,
            deficit=[0.0] * n,
        )
        self.active[job.job_id] = state
        self.need_allocation = True
        return state

    def credit(self, assignment: Assignment, steps: float, exec_s: float) -> bool:
        """Record what a unit did in its round; True when the job has finished."""
        job = assignment.job
        job.steps_done += steps
        job.time_so_far[assignment.column] += exec_s
        self.worker_time[assignment.column] += exec_s
        if job.steps_done >= job.total_steps:
            del self.active[job.job_id]
            self.need_allocation = True
            return True
        return False

    # Allocation.

    def maybe_reallocate(self, now: float) -> bool:
        """Recompute the allocation if jobs changed and the minimum interval has passed."""
        if not self.need_allocation:
            return False
        interval_ok = (
            self.last_reset_s == 0
            or now - self.last_reset_s >= self.config.min_allocation_interval_s
        )
        if not interval_ok:
            return False
        self._reset_time_so_far(now)
        started = time.perf_counter()
        self.allocation = self.policy.allocate(self._policy_input(now), self.solver)
        self.stats.solver_seconds += time.perf_counter() - started
        self.stats.allocations += 1
        rows = {key: row for row, key in enumerate(self.allocation.keys)}
        for job in self.active.values():
            row = rows.get(job.job_id)
            job.allocation = None if row is None else self.allocation.fractions[row].tolist()
        self.need_allocation = False
        return True

    def _reset_time_so_far(self, now: float) -> None:
        elapsed = now - self.last_reset_s
        half_round = self.config.round_length_s / 2
        for column in range(len(self.worker_types)):
            self.worker_time[column] = half_round * len(self.active)
        for job in self.active.values():
            for column in range(len(self.worker_types)):
                should = job.allocation[column] * elapsed if job.allocation else 0.0
                job.deficit[column] += should - (job.time_so_far[column] - half_round)
                job.time_so_far[column] = half_round
        self.last_reset_s = now

    def _policy_input(self, now: float) -> PolicyInput:
        jobs = [self.active[j] for j in sorted(self.active)]
        return PolicyInput(
            now=now,
            jobs=tuple(
                PolicyJob(
                    job_id=j.job_id,
                    job_type=j.spec.job_type,
                    scale_factor=j.spec.scale_factor,
                    priority_weight=j.spec.priority_weight,
                    arrival_time=j.spec.arrival_time,
                    total_steps=j.spec.total_steps,
                    steps_done=j.steps_done,
                    slo=j.spec.slo,
                )
                for j in jobs
            ),
            worker_types=self.worker_types,
            capacity=self.capacity,
            throughputs=np.array([j.rates for j in jobs]).reshape(len(jobs), len(self.capacity)),
            table=self.table,
        )

    # One round.

    def plan_round(self, now: float) -> list[Assignment]:
        self.maybe_reallocate(now)
        order = list(self._type_order)
        if not self.policy.heterogeneity_aware:
            self._shuffler.shuffle(order)
        if self.config.selection == "gavel":
            chosen = self._select_by_priority(order)
        else:
            chosen = self._select_by_time_owed(order, now)
        assignments = self._place(order, chosen)
        self._count_leases(assignments)
        return assignments

    def _select_by_time_owed(self, order: list[int], now: float) -> dict[int, list[JobState]]:
        """Greedy walk over all (job, type) pairs by the time each is owed since the last
        reset (plus carried deficit); pairs with no allocation come last (backfill)."""
        half_round = self.config.round_length_s / 2
        elapsed = now - self.last_reset_s
        entries = []
        for job_id in sorted(self.active):
            job = self.active[job_id]
            allocation = job.allocation
            for column in order:
                if job.rates[column] <= 0:
                    continue
                share = allocation[column] if allocation is not None else 0.0
                owed = (
                    job.deficit[column] + share * elapsed - (job.time_so_far[column] - half_round)
                )
                entries.append((share > 0, owed, share, -job_id, column, job))
        entries.sort(key=itemgetter(0, 1, 2, 3), reverse=True)
        backfill = self.policy.backfill
        left = {column: int(self.capacity[column]) for column in order}
        chosen: dict[int, list[JobState]] = {column: [] for column in order}
        selected: set[int] = set()
        for allocated, _, _, _, column, job in entries:
            if not allocated and not backfill:
                break
            size = job.scale_factor
            if size > left[column] or job.job_id in selected:
                continue
            left[column] -= size
            selected.add(job.job_id)
            chosen[column].append(job)
        return chosen

    def _select_by_priority(self, order: list[int]) -> dict[int, list[JobState]]:
        """Gavel's greedy walk over each worker type's jobs by (priority, deficit, allocation)."""
        backfill = self.policy.backfill
        jobs = [self.active[j] for j in sorted(self.active)]
        chosen: dict[int, list[JobState]] = {}
        selected: set[int] = set()
        by_key = itemgetter(0, 1, 2)
        for column in order:
            worker_time = self.worker_time[column]
            entries: list[tuple[float, float, float, JobState]] = []
            append = entries.append
            for job in jobs:
                allocation = job.allocation
                share = allocation[column] if allocation is not None else 0.0
                if share <= 0 or job.rates[column] <= 0:
                    append((0.0, job.deficit[column], share, job))
                    continue
                # Gavel's arithmetic, in its order: allocation / (received / worker time).
                fraction = job.time_so_far[column] / worker_time if worker_time > 0 else 0.0
                priority = share / fraction if fraction > 0 else share * _NO_FRACTION_PRIORITY
                append((priority, job.deficit[column], share, job))
            entries.sort(key=by_key, reverse=True)
            left = int(self.capacity[column])
            picked: list[JobState] = []
            for priority, _, _, job in entries:
                if left == 0:
                    break
                size = job.scale_factor
                if (
                    size > left
                    or job.job_id in selected
                    or job.rates[column] <= 0
                    or (not backfill and priority <= 0)
                ):
                    continue
                left -= size
                selected.add(job.job_id)
                picked.append(job)
            chosen[column] = picked
        return chosen

    def _place(self, order: list[int], chosen: dict[int, list[JobState]]) -> list[Assignment]:
        assignments: list[Assignment] = []
        previous = self.previous_round
        hold = self.config.hold_unallocated_jobs
        sensitive = self.config.placement_sensitive
        server_of = self.server_of_gpu
        extends_leases = getattr(self.placement, "extends_leases", False)
        for column in order:
            runnable = chosen[column]
            if hold:
                runnable = [job for job in runnable if job.allocation is not None]
            if not runnable:
                continue
            kept_gpus: dict[UnitKey, tuple[int, ...]] = {}
            for job in runnable:
                last = previous.get(job.job_id)
                if last is not None and last[0] == column:
                    kept_gpus[job.job_id] = last[1]
            get_kept = kept_gpus.get
            if extends_leases and len(kept_gpus) == len(runnable):
                gpus_of = kept_gpus  # everyone stays where they were; placement would agree
            else:
                requests = [
                    PlacementRequest(job.job_id, job.scale_factor, kept_gpus.get(job.job_id))
                    for job in runnable
                ]
                gpus_of = self.placement.place(self.servers_by_column[column], requests)
            worker_type = self.worker_types[column]
            append = assignments.append
            for job in runnable:
                job_id = job.job_id
                gpus = gpus_of[job_id]
                rate = job.rates[column]
                if sensitive and len(gpus) > 1 and len({server_of[g] for g in gpus}) > 1:
                    rate = job.unconsolidated_rates[column]
                append(Assignment(job, column, worker_type, gpus, rate, get_kept(job_id) == gpus))
        return assignments

    def _count_leases(self, assignments: list[Assignment]) -> None:
        now_running = {a.job.job_id: (a.column, a.gpus) for a in assignments}
        active = self.active
        opportunities = extensions = 0
        for job_id, placement in self.previous_round.items():
            if job_id in active:
                opportunities += 1
                if now_running.get(job_id) == placement:
                    extensions += 1
        self.stats.lease_opportunities += opportunities
        self.stats.lease_extensions += extensions
        self.stats.preemptions += opportunities - extensions
        self.previous_round = now_running
