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
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain, compress, count, filterfalse, repeat
from operator import attrgetter, eq, itemgetter, not_
from typing import Any, NamedTuple, cast

import numpy as np

from shock.core.errors import InputError
from shock.core.model import Cluster, JobSpec
from shock.core.placement import Placement, PlacementRequest
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob, UnitKey
from shock.core.resource_placement import (
    ResourceGrant,
    ResourcePlacement,
    ResourceRequest,
    ServerResources,
    requested_per_gpu,
)
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable
from shock.engine.allocation_check import (
    allocate_checked,
    check_resource_placement,
    placed_in_order,
)
from shock.engine.greedy_walk import descending_order, take_at_first_entries, take_jobs_alone
from shock.engine.unit_counters import (
    DEFICIT,
    RATES,
    SHARES,
    TIME_SO_FAR,
    Counters,
    UnitCounters,
    UnitRates,
)

_NO_FRACTION_PRIORITY = 1e9
# Below this many jobs in a round, the worker types' totals are cheaper summed in a loop.
_FEW_CREDITED = 64
# Below this many units, Gavel's priorities are cheaper as a Python loop than as arrays.
_FEW_UNITS = 14
# Below this many (unit, type) entries, the deficit walk is cheaper as a Python loop.
_FEW_ENTRIES = 900
# Up to this many units of a type, their assignments are cheaper built in a Python loop.
_FEW_PLACED = 24


def _gavel_entry_order(unit: Unit) -> tuple[int, int, int]:
    """Where Gavel's priority table has a unit: job j, then pairs (i, j) for i < j by i."""
    ids = unit.member_ids
    return (ids[-1], len(ids), ids[0])






class _Counted:
    """A unit's counters per worker type, read from the mechanism's `UnitCounters` (copies;
    the mechanism changes them)."""

    __slots__ = ()
    rates: list[float]
    slot: int
    counters: UnitCounters | None
    final_counters: Counters | None

    def _counters(self) -> Counters:
        if self.counters is None:
            return self.final_counters or ([], [], None)
        return self.counters.of(self)

    @property
    def time_so_far(self) -> list[float]:
        """Seconds received since the last allocation reset (which restarts it at half a
        round)."""
        return self._counters()[0]

    @property
    def deficit(self) -> list[float]:
        """Time owed, carried over allocation resets."""
        return self._counters()[1]

    @property
    def allocation(self) -> list[float] | None:
        """The current allocation's shares; None when it does not allocate the unit."""
        return self._counters()[2]


@dataclass(slots=True)
class JobState(_Counted):
    """Mutable per-job state of the mechanism; a job is also the unit that runs it alone."""

    spec: JobSpec
    job_id: int
    scale_factor: int
    # Progress (see the properties below): while the job holds a slot, the counters' row
    # has steps done and seconds run, so a round credits all jobs in array operations;
    # these fields hold them before the job has a slot and after it left.
    _total_steps: int
    rates: list[float]  # isolated steps/s per worker-type column
    unconsolidated_rates: list[float]
    _steps_done: float = 0.0
    _time_run_s: float = 0.0
    speed: float = 1.0  # see PolicyJob.speed
    key: UnitKey = -1
    member_ids: tuple[int, ...] = ()
    members: tuple[JobState, ...] = ()
    # What the policy saw of the job last time, re-used while nothing it shows has changed.
    policy_view: PolicyJob | None = None
    # Rounds a job with no steps left still takes before it leaves (Shockwave's simulator keeps
    # a job that a batch-size change left with none; see ArtifactBatchDynamics); 0: none.
    empty_rounds_left: int = 0
    # Its row of the mechanism's counters (-1 once it left: then its last counters).
    slot: int = -1
    counters: UnitCounters | None = None
    final_counters: Counters | None = None

    @property
    def total_steps(self) -> int:
        return self._total_steps

    @total_steps.setter
    def total_steps(self, value: int) -> None:
        self._total_steps = value
        if self.slot >= 0 and self.counters is not None:
            self.counters.total_steps[self.slot] = value

    @property
    def steps_done(self) -> float:
        if self.slot >= 0 and self.counters is not None:
            return self.counters.steps_done.item(self.slot)
        return self._steps_done

    @steps_done.setter
    def steps_done(self, value: float) -> None:
        if self.slot >= 0 and self.counters is not None:
            self.counters.steps_done[self.slot] = value
        else:
            self._steps_done = value

    @property
    def time_run_s(self) -> float:
        """Seconds it has held GPUs, over all rounds."""
        if self.slot >= 0 and self.counters is not None:
            return self.counters.time_run.item(self.slot)
        return self._time_run_s

    @time_run_s.setter
    def time_run_s(self, value: float) -> None:
        if self.slot >= 0 and self.counters is not None:
            self.counters.time_run[self.slot] = value
        else:
            self._time_run_s = value

    def keep_progress(self) -> None:
        """The job leaves its slot: its progress moves into its own fields."""
        self._steps_done = self.steps_done
        self._time_run_s = self.time_run_s

    @property
    def remaining(self) -> float:
        return self.total_steps - self.steps_done


@dataclass(slots=True)
class PairState(_Counted):
    """Two jobs sharing one gang of GPUs (space sharing), with its own time counters as in
    Gavel; each member progresses at its co-located throughput from the table."""

    key: tuple[int, int]
    members: tuple[JobState, JobState]
    scale_factor: int
    pair_rates: list[tuple[float, float]]  # per column: (first member's, second's) steps/s
    rates: list[float]  # per column: > 0 where both members progress (runnability)
    member_ids: tuple[int, ...] = ()
    slot: int = -1
    counters: UnitCounters | None = None
    final_counters: Counters | None = None


Unit = JobState | PairState
_ONLY_JOBS = {JobState}  # the units' types when no pair runs


class Assignment(NamedTuple):
    """One unit's place in a round (a named tuple: built for every unit in every round)."""

    unit: Unit
    column: int
    worker_type: str
    gpus: tuple[int, ...]
    rates: tuple[float, ...]  # steps/s of each member here
    kept_gpus: bool  # ran on exactly these GPUs last round (no checkpoint-restore needed)
    grant: ResourceGrant | None = None  # CPUs and memory, from a resource-aware placement

    @property
    def job(self) -> JobState:
        """The (first) job of the unit."""
        return self.unit.members[0]

    @property
    def rate(self) -> float:
        return self.rates[0]


# Builds a named tuple without its Python-level __new__ (several per unit per round).
_new_tuple = tuple.__new__
_unit_key = attrgetter("key")
_unit_slot = attrgetter("slot")
# An assignment's fields, read by C-level getters in passes over a whole round (here, in the
# engine and in the timeline).
ASSIGNED_UNIT = itemgetter(0)
ASSIGNED_COLUMN = itemgetter(1)
ASSIGNED_GPUS = itemgetter(3)
ASSIGNED_RATES = itemgetter(4)
ASSIGNED_GRANT = itemgetter(6)
_KEPT_GPUS = itemgetter(5)  # Assignment.kept_gpus
_SCALE_FACTOR = attrgetter("scale_factor")
_RATES_OF = attrgetter("rates")


# Stands for "did not run last round" where a unit's last assignment is looked up.
_NOT_PLACED = Assignment(cast(Unit, None), -1, "", (), (), False)


@dataclass(slots=True)
class MechanismStats:
    preemptions: int = 0
    lease_extensions: int = 0
    lease_opportunities: int = 0
    allocations: int = 0
    solver_seconds: float = 0.0


def _policy_view(job: JobState) -> PolicyJob:
    """The job as a policy sees it; the last view while the job has not changed (most jobs
    wait or run unchanged between allocations, and a view costs more than this check)."""
    view = job.policy_view
    spec = job.spec
    if (
        view is not None
        and view.steps_done == job.steps_done
        and view.time_run_s == job.time_run_s
        and view.speed == job.speed
        and view.job_type is spec.job_type
        and view.total_steps == spec.total_steps
    ):
        return view
    # Built slot by slot: a frozen dataclass's __init__ sets each field through
    # object.__setattr__, twice as slow, and every running job needs a new view at every
    # allocation. The object is the same as PolicyJob(...) gives.
    view = job.policy_view = _new_view(PolicyJob)
    _set_job_id(view, job.job_id)
    _set_job_type(view, spec.job_type)
    _set_scale_factor(view, spec.scale_factor)
    _set_priority_weight(view, spec.priority_weight)
    _set_arrival_time(view, spec.arrival_time)
    _set_total_steps(view, spec.total_steps)
    _set_steps_done(view, job.steps_done)
    _set_slo(view, spec.slo)
    _set_entity(view, spec.entity)
    _set_mode(view, spec.mode)
    _set_time_run_s(view, job.time_run_s)
    _set_speed(view, job.speed)
    _set_cpus(view, spec.cpus)
    _set_memory_gb(view, spec.memory_gb)
    return view


_new_view = object.__new__
# A view's fields, each set through its slot (a field added to PolicyJob needs a line here).
_SLOT_SETTERS = {name: getattr(PolicyJob, name).__set__ for name in PolicyJob.__slots__}
_set_job_id = _SLOT_SETTERS["job_id"]
_set_job_type = _SLOT_SETTERS["job_type"]
_set_scale_factor = _SLOT_SETTERS["scale_factor"]
_set_priority_weight = _SLOT_SETTERS["priority_weight"]
_set_arrival_time = _SLOT_SETTERS["arrival_time"]
_set_total_steps = _SLOT_SETTERS["total_steps"]
_set_steps_done = _SLOT_SETTERS["steps_done"]
_set_slo = _SLOT_SETTERS["slo"]
_set_entity = _SLOT_SETTERS["entity"]
_set_mode = _SLOT_SETTERS["mode"]
_set_time_run_s = _SLOT_SETTERS["time_run_s"]
_set_speed = _SLOT_SETTERS["speed"]
_set_cpus = _SLOT_SETTERS["cpus"]
_set_memory_gb = _SLOT_SETTERS["memory_gb"]


class Mechanism:
    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        solver: SolverSpec,
        placement: Placement,
        table: ThroughputTable,
        config: MechanismConfig,
        prices: dict[str, float] | None = None,
        entity_weights: dict[str, float] | None = None,
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.solver = solver
        self.placement = placement
        self.table = table
        self.config = config
        self.worker_types = cluster.worker_types
        self.capacity = np.array([cluster.gpus_per_type[w] for w in self.worker_types], float)
        self._gpus_of_column = [int(c) for c in self.capacity]
        self.prices = None if prices is None else np.array([prices[w] for w in self.worker_types])
        self.entity_weights = entity_weights
        self.servers_by_column: list[list[list[int]]] = [[] for _ in self.worker_types]
        self.server_of_gpu: dict[int, int] = {}
        self.resource_aware = getattr(placement, "resource_aware", False)
        self.resource_servers: list[list[ServerResources]] = [[] for _ in self.worker_types]
        self._nominal_speeds: dict[tuple[str, int, int], float] = {}
        next_gpu = 0
        for server in cluster.servers():
            gpus = list(range(next_gpu, next_gpu + server.num_gpus))
            next_gpu += server.num_gpus
            self.servers_by_column[self.worker_types.index(server.worker_type)].append(gpus)
            if self.resource_aware:
                self.resource_servers[self.worker_types.index(server.worker_type)].append(
                    ServerResources.of(server, tuple(gpus))
                )
            for gpu in gpus:
                self.server_of_gpu[gpu] = server.server_id
        # Each type's GPUs, to check placements against.
        self._gpus_by_column = [frozenset(chain.from_iterable(s)) for s in self.servers_by_column]
        order = table.fastest_first(self.worker_types)  # Gavel's order before any shuffle
        self._type_order = [self.worker_types.index(w) for w in order]
        self._shuffler = random.Random(config.seed + 5)
        self.active: dict[int, JobState] = {}
        self.counters = UnitCounters(len(self.worker_types))
        self._stride = self.counters.stride
        self._credit_index, self._credit_seconds = self.counters.credit_appenders()
        # Active jobs by id: their slots and ids (None: to be sorted again).
        self._by_id: tuple[np.ndarray, tuple[int, ...]] | None = None
        # The units and gang sizes of an array of slots (see `_rows_of`).
        self._rows_cache: tuple[np.ndarray, list[Unit], list[int], np.ndarray] | None = None
        self.pairs: dict[tuple[int, int], PairState] = {}
        self.worker_time = [0.0] * len(self.worker_types)
        self.need_allocation = True
        self.last_reset_s = 0.0
        self.allocation: Allocation = Allocation.empty(self.worker_types)
        self.previous_round: dict[UnitKey, Assignment] = {}
        # Units of `previous_round` that left since (they were all here when it was set).
        self._left_since_last_round: set[UnitKey] = set()
        self.stats = MechanismStats()
        self._held_out = False

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

    def _unconsolidated_rates(self, job: JobSpec, rates: list[float]) -> list[float]:
        return [
            self.table.throughput(job.job_type, job.scale_factor, f"{w}_unconsolidated") or r
            for w, r in zip(self.worker_types, rates, strict=True)
        ]

    def admit(self, job: JobSpec) -> JobState:
        rates = self._rates(job)
        unconsolidated = self._unconsolidated_rates(job, rates)
        half_round = self.config.round_length_s / 2
        state = JobState(
            spec=job,
            job_id=job.job_id,
            scale_factor=job.scale_factor,
            _total_steps=job.total_steps,
            rates=rates,
            unconsolidated_rates=unconsolidated,
            key=job.job_id,
            member_ids=(job.job_id,),
        )
        state.members = (state,)
        counters = self.counters
        slot = counters.acquire(
            state,
            job.job_id,
            job.scale_factor,
            job.priority_weight,
            rates,
            half_round,
            0.0,
            job.total_steps,
        )
        state.slot, state.counters = slot, counters
        state.rates = UnitRates(rates, counters, slot)
        self.active[job.job_id] = state
        self._left_since_last_round.discard(job.job_id)
        self._by_id = None
        self.need_allocation = True
        return state

    def credit(
        self,
        assignment: Assignment,
        steps: float | Sequence[float],
        exec_s: float,
        overhead_s: float = 0.0,
    ) -> list[JobState]:
        """Record what a unit did in its round (steps per member; exec_s seconds on its
        GPUs, overhead_s of them lost to a (re)start); return the jobs that finished. The
        unit's time counts once, on the unit (a pair's members' own counters do not move,
        as in Gavel)."""
        unit, column = assignment.unit, assignment.column
        received = exec_s
        if overhead_s and not self.config.overhead_counts_as_received:
            received = max(exec_s - overhead_s, 0.0)
        self._credit_index(unit.slot * self._stride + column)  # `UnitCounters.credit`, inline
        self._credit_seconds(received)
        self.worker_time[column] += received
        if type(unit) is JobState:  # a job alone: the common case, kept lean
            unit.time_run_s += exec_s
            unit.steps_done += (
                steps
                if type(steps) is float
                else steps[0]
                if type(steps) is tuple
                else (steps if isinstance(steps, int | float) else steps[0])
            )
            if unit.steps_done >= unit.total_steps:
                if unit.empty_rounds_left > 1:
                    self._ran_empty(unit)
                    return []
                self._remove(unit)
                return [unit]
            return []
        per_member = (steps,) if isinstance(steps, int | float) else steps
        finished = []
        for job, done in zip(unit.members, per_member, strict=True):
            job.time_run_s += exec_s
            job.steps_done += done
            if job.steps_done >= job.total_steps:
                if job.empty_rounds_left > 1:
                    self._ran_empty(job)
                    continue
                finished.append(job)
                self._remove(job)
        return finished

    def credit_jobs(
        self,
        jobs: list[JobState],
        slots: np.ndarray,
        columns: np.ndarray,
        steps: np.ndarray,
        exec_s: np.ndarray,
        overhead_s: np.ndarray,
    ) -> list[int]:
        """`credit` for a round of jobs alone, as columns (each job once, in plan order, with
        its slot); returns the positions of the jobs that finished, in order. Every sum is
        taken in the order `credit` would take it, so the counters agree with it to the last
        digit."""
        received = exec_s
        if not self.config.overhead_counts_as_received and overhead_s.any():
            received = np.where(overhead_s != 0, np.maximum(exec_s - overhead_s, 0.0), exec_s)
        counters = self.counters
        counters.flush()
        # One entry per job: distinct (slot, column)s and slots, so plain indexed adds.
        counters.block.reshape(-1)[slots * self._stride + columns] += received
        counters.time_run[slots] += exec_s
        counters.steps_done[slots] += steps
        worker_time = self.worker_time
        if len(columns) < _FEW_CREDITED:
            # Each type's total, summed unit by unit in plan order (as `credit` does).
            for column, seconds in zip(columns.tolist(), received.tolist(), strict=True):
                worker_time[column] += seconds
        else:
            for column in set(columns.tolist()):
                # The same sums in order (accumulate adds in order, unlike sum).
                summands = np.concatenate(([worker_time[column]], received[columns == column]))
                worker_time[column] = float(np.add.accumulate(summands)[-1])
        done = counters.steps_done[slots] >= counters.total_steps[slots]
        finished = []
        for position in np.flatnonzero(done).tolist():
            job = jobs[position]
            if job.empty_rounds_left > 1:
                self._ran_empty(job)
                continue
            self._remove(job)
            finished.append(position)
        return finished

    def _ran_empty(self, job: JobState) -> None:
        """A job with no steps left ran a round and stays for more: each such round asks for a
        new allocation, as Shockwave's simulator does after a failed round."""
        job.empty_rounds_left -= 1
        self.need_allocation = True

    def change_job_type(
        self, job: JobState, job_type: str, total_steps: int, steps_done: float
    ) -> None:
        """A job now runs as another job type (its batch size changed): new throughputs from
        the table, step counts in the new type's units. Pairs with it are dropped, its last
        assignment gets the new rates, and the allocation is recomputed."""
        job.spec = replace(job.spec, job_type=job_type, total_steps=total_steps)
        job.policy_view = None
        job.total_steps = total_steps
        job.steps_done = steps_done
        rates = self._rates(job.spec)
        self.counters.rates[job.slot] = rates
        job.rates = UnitRates(rates, self.counters, job.slot)
        job.unconsolidated_rates = self._unconsolidated_rates(job.spec, job.rates)
        self._drop_pairs_of(job)
        last = self.previous_round.get(job.key)
        if last is not None:
            self.previous_round[job.key] = self._assignment(
                job, last.column, last.gpus, last.kept_gpus
            )
        if self.config.reallocate_on_batch_size_change:
            self.need_allocation = True

    def withdraw(self, job_id: int) -> None:
        """A job leaves unfinished (cancelled): it gets no more GPUs from the next plan on."""
        job = self.active.get(job_id)
        if job is not None:
            self._remove(job)

    def _remove(self, job: JobState) -> None:
        del self.active[job.job_id]
        job.keep_progress()
        if job.job_id in self.previous_round:
            self._left_since_last_round.add(job.job_id)
        self.counters.release(job.slot)
        self._by_id = None
        self._drop_pairs_of(job)
        self.need_allocation = True

    def _drop_pairs_of(self, job: JobState) -> None:
        if self.pairs:
            for key in [k for k in self.pairs if job.job_id in k]:
                self.counters.release(self.pairs.pop(key).slot)
                if key in self.previous_round:
                    self._left_since_last_round.add(key)

    # Allocation.

    def maybe_reallocate(self, now: float, every_round: bool = False) -> bool:
        """Recompute the allocation if jobs changed and the minimum interval has passed (or
        every round, for policies and presets that re-plan each round)."""
        if not (self.need_allocation or every_round):
            return False
        interval_ok = (
            every_round
            or self.last_reset_s == 0
            or now - self.last_reset_s >= self.config.min_allocation_interval_s
        )
        if not interval_ok:
            return False
        self._reset_time_so_far(now)
        started = time.perf_counter()
        problem = self._policy_input(now)
        self.allocation = allocate_checked(self.policy, problem, self.solver)
        self.stats.solver_seconds += time.perf_counter() - started
        self.stats.allocations += 1
        self.install_allocation(self.allocation)
        return True

    @property
    def _every_round(self) -> bool:
        """Whether the allocation is recomputed every round (the policy's or the preset's)."""
        return self.policy.reallocate_every_round or self.config.reallocate_every_round

    def install_allocation(self, allocation: Allocation) -> None:
        """Make `allocation` the current one: each job's and allocated pair's shares."""
        self.allocation = allocation
        counters = self.counters
        counters.clear_shares()
        fractions = np.asarray(allocation.fractions, dtype=float)
        keys = allocation.keys
        by_id, ids = self._jobs_by_id()
        if len(keys) == len(ids) and keys == ids:
            counters.set_shares(by_id, fractions)  # one row per active job, by id
        else:
            rows = {key: row for row, key in enumerate(keys)}
            slots: list[int] = []
            allocated: list[int] = []
            for key, row in rows.items():
                unit: Unit | None
                if type(key) is tuple:
                    unit = self.pairs.get(key) or self._new_pair(key)
                else:
                    unit = self.active.get(cast(int, key))
                if unit is not None:
                    slots.append(unit.slot)
                    allocated.append(row)
            counters.set_shares(np.array(slots, dtype=np.intp), fractions[allocated])
        self.need_allocation = False

    def remember_assignment(
        self, key: UnitKey, worker_type: str, gpus: tuple[int, ...], kept: bool
    ) -> None:
        """Record a unit as having run last round on these GPUs (a resumed run's memory);
        ignored where the unit, the type or a GPU no longer exists."""
        unit: Unit | None = self.pairs.get(key) if isinstance(key, tuple) else self.active.get(key)
        if unit is None or worker_type not in self.worker_types:
            return
        column = self.worker_types.index(worker_type)
        of_type = {gpu for server in self.servers_by_column[column] for gpu in server}
        if not of_type.issuperset(gpus):
            return
        self.previous_round[key] = self._assignment(unit, column, gpus, kept)

    def restore_pair(
        self, key: tuple[int, int], time_so_far: list[float], deficit: list[float]
    ) -> None:
        """Bring back a pair of a resumed run with its counters (if both jobs are here)."""
        pair = self.pairs.get(key) or self._new_pair(key)
        if pair is not None:
            self.counters.set_times(
                pair.slot, [float(v) for v in time_so_far], [float(v) for v in deficit]
            )

    def restore_counters(
        self,
        job: JobState,
        column: int,
        time_so_far: float,
        deficit: float,
        share: float | None,
    ) -> None:
        """Give a job of a resumed run its counters on one worker type (a share makes it
        allocated, with no share on the types not given one)."""
        self.counters.set_column(job.slot, column, time_so_far, deficit, share)

    def shuffler_state(self) -> tuple[Any, ...]:
        """The random state that orders worker types for heterogeneity-agnostic policies."""
        return self._shuffler.getstate()

    def set_shuffler_state(self, state: tuple[Any, ...]) -> None:
        self._shuffler.setstate(state)

    def _new_pair(self, key: tuple[int, int]) -> PairState | None:
        """Pair state for an allocated pair; None if a member left or the table has no
        co-located throughput for it."""
        first, second = (self.active.get(job_id) for job_id in key)
        if first is None or second is None or first.scale_factor != second.scale_factor:
            return None
        size = first.scale_factor
        pair_rates = [
            self.table.pair_throughput(
                (first.spec.job_type, size), (second.spec.job_type, size), worker_type
            )
            for worker_type in self.worker_types
        ]
        if first.spec.job_type == second.spec.job_type:
            # Identical jobs are interchangeable: each gets the mean of the two measurements.
            pair_rates = [((a + b) / 2, (a + b) / 2) for a, b in pair_rates]
        n = len(self.worker_types)
        # Time owed: a new pair has no credit, so it is urgent until it has run. Gavel's rule:
        # Gavel tracks every possible pair from its later member's arrival, with no time; the
        # first reset after that owes it half a round and credits it half a round, and a pair
        # is only ever allocated after a reset, so it starts as if it had been through one.
        credit = self.config.round_length_s / 2 if self.config.selection == "gavel" else 0.0
        pair = PairState(
            key=key,
            members=(first, second),
            scale_factor=size,
            pair_rates=pair_rates,
            rates=[min(a, b) for a, b in pair_rates],
            member_ids=key,
        )
        pair.slot = self.counters.acquire(pair, -1, size, 1.0, pair.rates, credit, credit)
        pair.counters = self.counters
        if credit:
            for column in range(n):
                self.worker_time[column] += credit
        self.pairs[key] = pair
        self._left_since_last_round.discard(key)
        return pair

    def _jobs_by_id(self) -> tuple[np.ndarray, tuple[int, ...]]:
        """Active jobs by id: their slots and ids (kept until a job arrives or leaves)."""
        by_id = self._by_id
        if by_id is None:
            slots, ids = self.counters.jobs_by_id()
            by_id = self._by_id = (slots, tuple(ids.tolist()))
        return by_id

    def _active_by_id(self) -> list[JobState]:
        """Active jobs by id."""
        owner = self.counters.owner
        return [owner[slot] for slot in self._jobs_by_id()[0].tolist()]

    def _unit_slots(self) -> np.ndarray:
        """The slots of the units a round selects from: active jobs by id, then allocated
        pairs by key."""
        singles = self._jobs_by_id()[0]
        if not self.pairs:
            return singles
        allocated = self.counters.allocated
        paired = [self.pairs[k].slot for k in sorted(self.pairs)]
        return np.concatenate(
            [singles, np.array([slot for slot in paired if allocated[slot]], dtype=np.intp)]
        )

    def _reset_time_so_far(self, now: float) -> None:
        """Carry each unit's time owed since the last reset into its deficit (share x elapsed
        - received), and restart its received time at half a round."""
        half_round = self.config.round_length_s / 2
        tracked = len(self.active) + len(self.pairs)
        for column in range(len(self.worker_types)):
            self.worker_time[column] = half_round * tracked
        self.counters.carry_owed(now - self.last_reset_s, half_round)
        self.last_reset_s = now

    def _policy_input(self, now: float) -> PolicyInput:
        slots, ids = self._jobs_by_id()
        counters = self.counters
        # The jobs' views are built only if the policy reads them (most need the arrays).
        owner = cast(list[JobState], counters.owner)
        return PolicyInput.of_job_columns(
            # The views of the jobs of this allocation (read during it).
            lambda: tuple(_policy_view(owner[slot]) for slot in slots.tolist()),
            ids,
            counters.gpus[slots],
            counters.weight[slots],
            now=now,
            worker_types=self.worker_types,
            capacity=self.capacity,
            throughputs=counters.rates[slots],
            table=self.table,
            prices=self.prices,
            round_length_s=self.config.round_length_s,
            entity_weights=self.entity_weights,
        )

    # One round.

    def plan_round(self, now: float) -> list[Assignment]:
        self.maybe_reallocate(now, self._every_round)
        order = list(self._type_order)
        self._held_out = False  # whether the selection left out the units held back
        if not self.policy.heterogeneity_aware:
            self._shuffler.shuffle(order)
        if self.allocation.round_order is not None:
            chosen = self._select_in_order(order, self.allocation.round_order)
        elif self.config.selection == "gavel":
            chosen = self._select_by_priority(order)
        else:
            chosen = self._select_by_time_owed(order, now)
        assignments = self._place(order, chosen)
        self._count_leases(assignments)
        return assignments

    def _select_by_time_owed(self, order: list[int], now: float) -> dict[int, list[Unit]]:
        """Greedy walk over all (unit, type) pairs by the time each is owed since the last
        reset (plus carried deficit); pairs with no allocation come last (backfill)."""
        half_round = self.config.round_length_s / 2
        elapsed = now - self.last_reset_s
        slots = self._unit_slots()
        counters = self.counters
        counters.flush()
        width = len(order)
        # Free GPUs by position in `order`.
        left = [self._gpus_of_column[column] for column in order]
        if not self.pairs and len(slots) * width >= _FEW_ENTRIES:
            # Most rounds take every job at its first entry; one sort over jobs then does.
            by_type = np.ascontiguousarray(
                counters.block.take(slots, axis=0)[:, :, order].transpose(1, 2, 0)
            )
            received, owed_before = by_type[TIME_SO_FAR], by_type[DEFICIT]
            shares_by_type = by_type[SHARES]
            valid = by_type[RATES] > 0
            if not self.policy.backfill:
                valid &= shares_by_type > 0
            # Gavel's arithmetic, element by element: deficit + share x elapsed - received.
            owed_by_type = owed_before + shares_by_type * elapsed - (received - half_round)
            row_units, _, gang_sizes = self._rows_of(slots)
            first_taken = take_at_first_entries(
                valid, shares_by_type > 0, owed_by_type, shares_by_type, gang_sizes, left
            )
            if first_taken is not None:
                return {
                    column: list(map(row_units.__getitem__, rows_taken))
                    for column, rows_taken in zip(order, first_taken, strict=True)
                }

        # The units' counters, one contiguous row per counter: (unit, type) entries unit by
        # unit, with the types in the round's order.
        rows = counters.block.take(slots, axis=0)[:, :, order].transpose(1, 0, 2)
        rows = rows.reshape(len(rows), -1)
        time_so_far, deficit = rows[TIME_SO_FAR], rows[DEFICIT]
        shares, rates = rows[SHARES], rows[RATES]
        # The entries with a throughput and (unless the policy backfills) a share.
        runnable = rates > 0
        if not self.policy.backfill:
            runnable &= shares > 0
        entry = np.flatnonzero(runnable)
        if len(entry) < len(runnable):
            shares, deficit, time_so_far = shares[entry], deficit[entry], time_so_far[entry]
        # Gavel's arithmetic, element by element: deficit + share x elapsed - received.
        owed = deficit + shares * elapsed - (time_so_far - half_round)
        # The order of Python's stable sort with reverse=True on (allocated, owed, share), ties
        # in entry order (arrival order, singles then pairs, then type order).
        few = len(entry) < _FEW_ENTRIES
        if few:
            walk = entry[np.lexsort((-shares, -owed, -(shares > 0).astype(np.int8)))]
        else:
            walk = entry[descending_order(shares > 0, owed, shares)]
        row_units, row_sizes, gang_sizes = self._rows_of(slots)
        if not self.pairs and not few:
            # Jobs alone: a job is taken at most once, whichever of its entries comes first.
            taken = take_jobs_alone(walk, width, gang_sizes, left)
            return {
                column: list(map(row_units.__getitem__, rows_taken))
                for column, rows_taken in zip(order, taken, strict=True)
            }
        free = sum(left)
        picked: list[list[Unit]] = [[] for _ in order]
        walk_rows, walk_types = (walk // width).tolist(), (walk % width).tolist()
        if self.pairs:
            selected: set[int] = set()
            for row, index in zip(walk_rows, walk_types, strict=True):
                unit = row_units[row]
                size = row_sizes[row]
                if size > left[index] or not selected.isdisjoint(unit.member_ids):
                    continue
                left[index] -= size
                selected.update(unit.member_ids)
                picked[index].append(unit)
                free -= size
                if free == 0:
                    break  # every GPU is taken (gangs have at least one GPU)
        else:
            # `take_jobs_alone` as a loop over the entries (cheaper for a few).
            is_taken = [False] * len(row_units)
            for row, index in zip(walk_rows, walk_types, strict=True):
                size = row_sizes[row]
                if size > left[index] or is_taken[row]:
                    continue
                left[index] -= size
                is_taken[row] = True
                picked[index].append(row_units[row])
                free -= size
                if free == 0:
                    break
        return dict(zip(order, picked, strict=True))

    def _select_in_order(
        self, order: list[int], round_order: tuple[UnitKey, ...]
    ) -> dict[int, list[Unit]]:
        """The policy's order for this round: each unit in turn on the first worker type with
        room and a throughput (gangs whole); active jobs it did not list come last, by id."""
        left = {column: int(self.capacity[column]) for column in order}
        chosen: dict[int, list[Unit]] = {column: [] for column in order}
        listed = [
            unit
            for key in round_order
            for unit in (self.pairs.get(key) if isinstance(key, tuple) else self.active.get(key),)
            if unit is not None
        ]
        seen = {unit.key for unit in listed}
        rest = [self.active[j] for j in sorted(self.active) if j not in seen]
        selected: set[int] = set()
        for unit in [*listed, *rest]:
            if not selected.isdisjoint(unit.member_ids):
                continue
            for column in order:
                if unit.rates[column] > 0 and unit.scale_factor <= left[column]:
                    left[column] -= unit.scale_factor
                    selected.update(unit.member_ids)
                    chosen[column].append(unit)
                    break
        return chosen

    def _select_by_priority(self, order: list[int]) -> dict[int, list[Unit]]:
        """Gavel's greedy walk over each worker type's units by (priority, deficit,
        allocation), ties in the order Gavel's priority table has them: each job on arrival,
        followed by its pairs with the jobs that arrived before it."""
        counters = self.counters
        units = cast(list[Unit], counters.owner)
        slots = self._unit_slots()
        if self.pairs:
            ordered = sorted(slots.tolist(), key=lambda slot: _gavel_entry_order(units[slot]))
            slots = np.array(ordered, dtype=np.intp)
        counters.flush()
        walks: list[list[int]]
        if len(slots) < _FEW_UNITS:
            walks = self._priority_walks_few(slots, order)
        else:
            walks = self._priority_walks(slots, order)
        # The walks give rows of `slots`.
        row_units, row_sizes, _ = self._rows_of(slots)
        gpus_of_column = self._gpus_of_column
        chosen: dict[int, list[Unit]] = {}
        if self.pairs:
            selected: set[int] = set()
            for column, walk in zip(order, walks, strict=True):
                left = gpus_of_column[column]
                picked: list[Unit] = []
                for row in walk:
                    size = row_sizes[row]
                    if size > left:
                        continue
                    unit = row_units[row]
                    ids = unit.member_ids
                    if ids[0] in selected or (len(ids) > 1 and ids[1] in selected):
                        continue
                    left -= size
                    selected.update(ids)
                    picked.append(unit)
                    if left == 0:
                        break
                chosen[column] = picked
            return chosen
        # Jobs alone: a job is taken at most once, on the first type whose walk takes it. A
        # job held back (no allocation yet) still takes its GPUs, which then stay idle: it is
        # left out here rather than by the placement.
        held = self.config.hold_unallocated_jobs
        allocated = counters.allocated[slots].tolist() if held else None
        taken = [False] * len(row_units)
        for column, walk in zip(order, walks, strict=True):
            left = gpus_of_column[column]
            picked = []
            for row in walk:
                size = row_sizes[row]
                if size > left or taken[row]:
                    continue
                left -= size
                taken[row] = True
                if allocated is None or allocated[row]:
                    picked.append(row_units[row])
                if left == 0:
                    break
            chosen[column] = picked
        self._held_out = held
        return chosen

    def _rows_of(self, slots: np.ndarray) -> tuple[list[Unit], list[int], np.ndarray]:
        """The unit and gang size of each of `slots` (sizes also as an array), kept while the
        same array of slots comes back: the active jobs' until one arrives or leaves."""
        cached = self._rows_cache
        if cached is not None and cached[0] is slots:
            return cached[1], cached[2], cached[3]
        counters = self.counters
        row_units = cast(list[Unit], counters.owners[slots].tolist())
        gang_sizes = counters.gpus[slots].astype(np.int64)
        row_sizes = gang_sizes.tolist()
        self._rows_cache = (slots, row_units, row_sizes, gang_sizes)
        return row_units, row_sizes, gang_sizes

    def _priority_walks(self, slots: np.ndarray, order: list[int]) -> list[list[int]]:
        """For each type of `order`, the rows of `slots` by Gavel's priority (highest first),
        less those the walk skips whatever is left: no throughput (no priority, without
        backfill). The arithmetic for every type at once, as arrays."""
        # (counter, type, unit), contiguous: numpy's operations on small arrays cost about
        # half as much as on strided views.
        block = np.ascontiguousarray(self.counters.block.take(slots, axis=0).transpose(1, 2, 0))
        time_so_far, deficit = block[TIME_SO_FAR], block[DEFICIT]
        shares, rates = block[SHARES], block[RATES]
        worker_times = self.worker_time
        worker_time = np.array(worker_times)[:, None]
        # Gavel's arithmetic, in its order: allocation / (received / worker time).
        if min(worker_times) > 0:
            fraction = time_so_far / worker_time
        else:
            fraction = np.divide(
                time_so_far, worker_time, out=np.zeros_like(time_so_far), where=worker_time > 0
            )
        priority = np.divide(
            shares, fraction, out=shares * _NO_FRACTION_PRIORITY, where=fraction > 0
        )
        # Python's conditions as written (NaN-safe): no share or no throughput, no priority.
        unrated = rates <= 0
        priority[(shares <= 0) | unrated] = 0.0
        skipped = unrated if self.policy.backfill else unrated | (priority <= 0)
        # Python's stable sort with reverse=True on (priority, deficit, share), per type: a
        # stable ascending sort on the negated keys, ties in unit order; the entries the walk
        # skips last, cut off.
        sequences = np.lexsort((-shares, -deficit, -priority, skipped), axis=-1).tolist()
        # (A boolean sum: np.count_nonzero along an axis takes a slow path in Python.)
        lengths = (len(slots) - skipped.sum(axis=1)).tolist()
        return [sequences[column][: lengths[column]] for column in order]

    def _priority_walks_few(self, slots: np.ndarray, order: list[int]) -> list[list[int]]:
        """`_priority_walks` as a Python loop over units (cheaper for a few units)."""
        backfill = self.policy.backfill
        # Per type: per counter, the units' values.
        by_type = self.counters.block[slots].transpose(2, 1, 0).tolist()
        # Sorted descending on (priority, deficit, share, -row): Python's stable sort with
        # reverse=True on (priority, deficit, share), ties in row order.
        negated_rows = range(0, -len(slots), -1)
        walks: list[list[int]] = []
        worker_times = self.worker_time
        for column in order:
            counters = by_type[column]
            received_of, deficit_of = counters[TIME_SO_FAR], counters[DEFICIT]
            share_of, rate_of = counters[SHARES], counters[RATES]
            worker_time = worker_times[column]
            entries: list[tuple[float, float, float, int]] = []
            append = entries.append
            for received, deficit, share, rate, negated_row in zip(
                received_of, deficit_of, share_of, rate_of, negated_rows, strict=True
            ):
                if rate <= 0:
                    continue  # never taken on this type
                if share <= 0:  # (0 where the unit has no allocation)
                    if backfill:
                        append((0.0, deficit, share, negated_row))
                    continue
                # Gavel's arithmetic, in its order: allocation / (received / worker time).
                fraction = received / worker_time if worker_time > 0 else 0.0
                priority = share / fraction if fraction > 0 else share * _NO_FRACTION_PRIORITY
                if not backfill and priority <= 0:
                    continue
                append((priority, deficit, share, negated_row))
            entries.sort(reverse=True)
            walks.append([-entry[3] for entry in entries])
        return walks

    def _place(self, order: list[int], chosen: dict[int, list[Unit]]) -> list[Assignment]:
        assignments: list[Assignment] = []
        previous_get = self.previous_round.get
        hold = self.config.hold_unallocated_jobs and not self._held_out
        allocated: list[bool] | None = None
        extends_leases = getattr(self.placement, "extends_leases", False)
        around_leases = extends_leases and getattr(self.placement, "places_around_leases", False)
        if self.resource_aware:
            self._reset_speeds()
        for column in order:
            runnable = chosen[column]
            if hold:
                if allocated is None:
                    allocated = self.counters.allocated.tolist()
                runnable = [unit for unit in runnable if allocated[unit.slot]]
            if not runnable:
                continue
            if self.resource_aware:
                assignments.extend(self._place_with_resources(column, runnable))
                continue
            keys = list(map(_unit_key, runnable))
            # Each unit's assignment of last round (`_NOT_PLACED` if it did not run).
            lasts = list(map(previous_get, keys, repeat(_NOT_PLACED)))
            if around_leases:
                placed_around = self._place_around_leases(column, runnable, keys, lasts)
                if placed_around is not None:
                    assignments.extend(placed_around)
                    continue
            # Each unit's GPUs of last round if it ran on this type (None otherwise).
            previous_gpus = [None if last[1] != column else last[3] for last in lasts]
            if extends_leases and not around_leases and None not in previous_gpus:
                # Everyone stayed: the placement would keep them all where they were.
                placed_around = self._place_around_leases(column, runnable, keys, lasts)
                if placed_around is not None:
                    assignments.extend(placed_around)
                    continue
            sizes = list(map(_SCALE_FACTOR, runnable))
            fields = zip(keys, sizes, previous_gpus, strict=True)
            requests = list(map(_new_tuple, repeat(PlacementRequest), fields))
            servers = self.servers_by_column[column]
            gpus_of = self.placement.place(servers, requests)
            placed = cast(
                list[tuple[int, ...]],
                placed_in_order(
                    self.placement,
                    servers,
                    requests,
                    gpus_of,
                    self._gpus_by_column[column],
                    keys,
                    sizes,
                ),
            )
            # Kept: ran on exactly these GPUs of this type last round.
            kept = map(eq, previous_gpus, placed)
            assignments.extend(self._assignments(column, runnable, placed, kept, sizes))
        return assignments

    def _place_around_leases(
        self,
        column: int,
        runnable: list[Unit],
        keys: list[UnitKey],
        lasts: list[Assignment],
    ) -> list[Assignment] | None:
        """With a placement that extends leases: the units that ran on this type last round
        keep their GPUs, and the placement places only the others, on the GPUs left (called
        only when there are no others, or when the placement says it places around leases
        exactly as it would with them). None where last round's GPUs cannot all be kept:
        then every unit goes to the placement."""
        stayed = list(map(eq, map(ASSIGNED_COLUMN, lasts), repeat(column)))
        everyone_stayed = all(stayed)
        if everyone_stayed and len(runnable) <= _FEW_PLACED:
            return self._few_stay(column, runnable, lasts)
        # Each unit's GPUs: last round's for now (the others' are replaced below).
        gpus = list(map(ASSIGNED_GPUS, lasts))
        sizes = list(map(_SCALE_FACTOR, runnable))
        if everyone_stayed:
            held = list(chain.from_iterable(gpus))
            if list(map(len, gpus)) != sizes:
                return None
        else:
            stayed_gpus = list(compress(gpus, stayed))
            held = list(chain.from_iterable(stayed_gpus))
            if list(map(len, stayed_gpus)) != list(compress(sizes, stayed)):
                return None
        held_set = set(held)
        if len(held_set) != len(held) or not held_set <= self._gpus_by_column[column]:
            return None  # (a resumed run's memory may not fit): the placement decides
        if not everyone_stayed:
            # The others: placed on the GPUs the stayed units do not hold.
            moved = list(map(not_, stayed))
            unit_keys = list(compress(keys, moved))
            unit_sizes = list(compress(sizes, moved))
            fields = zip(unit_keys, unit_sizes, repeat(None))
            requests = list(map(_new_tuple, repeat(PlacementRequest), fields))
            servers = [
                server
                if held_set.isdisjoint(server)
                else list(filterfalse(held_set.__contains__, server))
                for server in self.servers_by_column[column]
            ]
            gpus_of = self.placement.place(servers, requests)
            placed = placed_in_order(
                self.placement,
                servers,
                requests,
                gpus_of,
                self._gpus_by_column[column],
                unit_keys,
                unit_sizes,
                held_set,
            )
            deque(map(gpus.__setitem__, compress(count(), moved), placed), maxlen=0)
        return self._assignments(column, runnable, gpus, stayed, sizes)

    def _few_stay(
        self, column: int, units: list[Unit], lasts: list[Assignment]
    ) -> list[Assignment] | None:
        """`_place_around_leases` where every unit ran on this type last round, as one loop
        (cheaper for a few units): last round's assignment where it still holds (the same
        unit, already marked kept, at the unit's rates now), else a new one on its GPUs."""
        sensitive = self.config.placement_sensitive
        worker_type = self.worker_types[column]
        held: set[int] = set()
        built: list[Assignment] = []
        append = built.append
        for unit, last in zip(units, lasts, strict=True):
            gpus = last[3]
            if len(gpus) != unit.scale_factor or not held.isdisjoint(gpus):
                return None  # (a resumed run's memory may not fit): the placement decides
            held.update(gpus)
            if type(unit) is JobState and (len(gpus) == 1 or not sensitive):
                unit_rates: tuple[float, ...] = (unit.rates[column],)  # `_rates_on`, inline
            else:
                unit_rates = self._rates_on(unit, column, gpus)
            if last[5] and last[0] is unit and last[4] == unit_rates and last[6] is None:
                append(last)
            else:
                fields = (unit, column, worker_type, gpus, unit_rates, True, None)
                append(_new_tuple(Assignment, fields))
        if not held <= self._gpus_by_column[column]:
            return None
        return built

    def _assignments(
        self,
        column: int,
        units: list[Unit],
        placed: list[tuple[int, ...]],
        kept: Iterable[bool],
        sizes: list[int],
    ) -> list[Assignment]:
        """The units' assignments on these GPUs of a worker type."""
        worker_type = self.worker_types[column]
        if (
            len(units) > _FEW_PLACED
            and set(map(type, units)) == _ONLY_JOBS
            and (not self.config.placement_sensitive or max(sizes) == 1)
        ):
            # Jobs at their one rate per type (`_rates_on`): all built in C.
            rates = zip(map(itemgetter(column), map(_RATES_OF, units)))
            fields = zip(
                units, repeat(column), repeat(worker_type), placed, rates, kept, repeat(None)
            )
            return list(map(_new_tuple, repeat(Assignment), fields))
        sensitive = self.config.placement_sensitive
        built: list[Assignment] = []
        append = built.append
        for unit, gpus, kept_gpus in zip(units, placed, kept, strict=False):  # (`kept` may repeat)
            if type(unit) is JobState and (len(gpus) == 1 or not sensitive):
                unit_rates: tuple[float, ...] = (unit.rates[column],)  # `_rates_on`, inline
            else:
                unit_rates = self._rates_on(unit, column, gpus)
            append(
                _new_tuple(
                    Assignment, (unit, column, worker_type, gpus, unit_rates, kept_gpus, None)
                )
            )
        return built

    def _place_with_resources(self, column: int, runnable: list[Unit]) -> list[Assignment]:
        """Every unit re-placed with CPUs and memory; its rates scaled by the grant's speed.
        Units the placement leaves out do not run this round."""
        previous = self.previous_round
        last_gpus: dict[UnitKey, tuple[int, ...]] = {}
        for unit in runnable:
            last = previous.get(unit.key)
            if last is not None and last.column == column:
                last_gpus[unit.key] = last.gpus
        requests = [
            ResourceRequest(
                unit.key,
                unit.scale_factor,
                unit.members[0].spec.job_type,
                last_gpus.get(unit.key),
                requested_per_gpu(unit.members[0].spec),
            )
            for unit in runnable
        ]
        placement = cast(ResourcePlacement, self.placement)
        grants = placement.place_with_resources(self.resource_servers[column], requests)
        check_resource_placement(placement, self.servers_by_column[column], requests, grants)
        placed = []
        worker_type = self.worker_types[column]
        for unit in runnable:
            grant = grants.get(unit.key)
            if grant is None:
                continue
            parts, speed = grant
            gpus = tuple(parts[0].gpus) if len(parts) == 1 else grant.gpus
            if type(unit) is JobState:
                unit.speed = speed
                rates: tuple[float, ...] = (self._rates_on(unit, column, gpus)[0] * speed,)
            else:
                rates = tuple(rate * speed for rate in self._rates_on(unit, column, gpus))
            kept = last_gpus.get(unit.key) == gpus
            placed.append(Assignment(unit, column, worker_type, gpus, rates, kept, grant))
        return placed

    def _reset_speeds(self) -> None:
        """Every job's speed back to what the placement aims for (Synergy resets each job's
        speedup before every round); the round's grants then overwrite it."""
        nominal = getattr(self.placement, "nominal_speed", None)
        if nominal is None:
            for job in self.active.values():
                job.speed = 1.0
            return
        for job in self.active.values():
            rates = job.rates
            column = rates.index(max(rates))  # the fastest type (the first of equals)
            key = (job.spec.job_type, job.scale_factor, column)
            speed = self._nominal_speeds.get(key)
            if speed is None:
                servers = self.resource_servers[column]
                speed = nominal(job.spec.job_type, job.scale_factor, servers[0]) if servers else 1.0
                self._nominal_speeds[key] = speed
            job.speed = speed

    def _assignment(self, unit: Unit, column: int, gpus: tuple[int, ...], kept: bool) -> Assignment:
        return Assignment(
            unit, column, self.worker_types[column], gpus, self._rates_on(unit, column, gpus), kept
        )

    def _rates_on(self, unit: Unit, column: int, gpus: tuple[int, ...]) -> tuple[float, ...]:
        """Steps/s of each member of `unit` on these GPUs of a worker type."""
        if isinstance(unit, PairState):
            return unit.pair_rates[column]
        if (
            len(gpus) > 1
            and self.config.placement_sensitive
            and len({self.server_of_gpu[g] for g in gpus}) > 1
        ):
            return (unit.unconsolidated_rates[column],)  # the gang straddles servers
        return (unit.rates[column],)

    def _count_leases(self, assignments: list[Assignment]) -> None:
        """Count last round's units that are still here (lease opportunities) and those that
        run on the same GPUs again (extensions: the assignments `_place` marked as having kept
        their GPUs, which it does exactly when last round's were of the same type and equal)."""
        # Last round's units were all here then; those that left since are noted as they go.
        opportunities = len(self.previous_round) - len(self._left_since_last_round)
        self._left_since_last_round = set()
        extensions = sum(map(_KEPT_GPUS, assignments))
        self.stats.lease_opportunities += opportunities
        self.stats.lease_extensions += extensions
        self.stats.preemptions += opportunities - extensions
        keys = map(_unit_key, map(ASSIGNED_UNIT, assignments))
        self.previous_round = dict(zip(keys, assignments, strict=True))
