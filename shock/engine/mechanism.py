"""Gavel's round-based mechanism: realise an allocation over rounds.

`Mechanism` coordinates one run's parts: it admits jobs and credits what they did (their
counters live in `UnitCounters`), re-allocates when due (`reallocation`), and plans each round
by selecting units (`selection`: by time owed, by Gavel's priority, or in a planning policy's
order) and placing them (`placement_rounds`, with leases counted by `leases`; pairs of jobs
sharing GPUs in `pairs`). Received shares count time since the last allocation reset,
starting with a credit of half a round, as in Gavel. The mechanism knows nothing of clocks or
execution: a backend asks it for a round (`plan_round`) and reports what ran (`credit`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from shock.core.errors import InputError
from shock.core.model import Cluster, JobSpec
from shock.core.placement import Placement
from shock.core.policy import Allocation, Policy, PolicyInput, UnitKey
from shock.core.resource_placement import ServerResources
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable
from shock.engine.elastic import ElasticRounds
from shock.engine.leases import LeaseBook
from shock.engine.pairs import PairBook
from shock.engine.placement_rounds import RoundPlacement
from shock.engine.policy_view import policy_input
from shock.engine.reallocation import allocation_due, reset_received, timed_allocation
from shock.engine.selection import (
    Candidates,
    select_by_priority,
    select_by_time_owed,
    select_in_order,
)
from shock.engine.unit_counters import UnitCounters, UnitRates
from shock.engine.units import Assignment, JobState, MechanismStats, Unit

# Below this many jobs in a round, the worker types' totals are cheaper summed in a loop.
_FEW_CREDITED = 64


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
        self.placing = RoundPlacement(cluster, self.worker_types, placement, config)
        # Rounds of an elastic policy's grants (placed and priced apart from time shares).
        self.elastic = ElasticRounds(
            self.worker_types,
            self.placing.servers_by_column,
            lambda: self.table,
            config,
        )
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
        self.worker_time = [0.0] * len(self.worker_types)
        self.leases = LeaseBook()
        self._pairs = PairBook(
            table, self.worker_types, config, self.counters, self.worker_time, self.leases
        )
        self.pairs = self._pairs.pairs
        self.need_allocation = True
        self.last_reset_s = 0.0
        self.allocation: Allocation = Allocation.empty(self.worker_types)
        self.stats = MechanismStats()
        # Unit -> seconds of its (re)start still to come: a restart longer than a round goes
        # on into the next rounds while the unit keeps its GPUs (Sia's simulator's restore).
        self.restart_left: dict[UnitKey, float] = {}

    @property
    def previous_round(self) -> dict[UnitKey, Assignment]:
        """Last round's assignment of each unit that ran."""
        return self.leases.previous_round

    @property
    def servers_by_column(self) -> list[list[list[int]]]:
        """Each worker type's servers, as their GPU numbers."""
        return self.placing.servers_by_column

    @property
    def resource_aware(self) -> bool:
        return self.placing.resource_aware

    @property
    def resource_servers(self) -> list[list[ServerResources]]:
        return self.placing.resource_servers

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
        self.leases.back(job.job_id)
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
        self._pairs.drop_pairs_of(job)
        last = self.previous_round.get(job.key)
        if last is not None:
            self.previous_round[job.key] = self.placing.assignment(
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
        self.restart_left.pop(job.job_id, None)
        job.keep_progress()
        self.leases.left(job.job_id)
        self.counters.release(job.slot)
        self._by_id = None
        self._pairs.drop_pairs_of(job)
        self.need_allocation = True

    # Allocation.
    # Allocation.

    def maybe_reallocate(self, now: float, every_round: bool = False) -> bool:
        """Recompute the allocation if jobs changed and the minimum interval has passed (or
        every round, for policies and presets that re-plan each round)."""
        config = self.config
        due = allocation_due(
            self.need_allocation,
            every_round,
            now,
            self.last_reset_s,
            config.min_allocation_interval_s,
        )
        if not due:
            return False
        tracked = len(self.active) + len(self.pairs)
        half_round = config.round_length_s / 2
        reset_received(
            self.counters, self.worker_time, tracked, now - self.last_reset_s, half_round
        )
        self.last_reset_s = now
        problem = self._policy_input(now)
        self.allocation = timed_allocation(self.policy, problem, self.solver, self.stats)
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
                    unit = self._pairs.pair(key, self.active)
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
        self.previous_round[key] = self.placing.assignment(unit, column, gpus, kept)

    def restore_pair(
        self, key: tuple[int, int], time_so_far: list[float], deficit: list[float]
    ) -> None:
        """Bring back a pair of a resumed run with its counters (if both jobs are here)."""
        pair = self._pairs.pair(key, self.active)
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
        paired = self._pairs.allocated_slots()
        return np.concatenate([singles, np.array(paired, dtype=np.intp)])

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

    def _policy_input(self, now: float) -> PolicyInput:
        return policy_input(
            self.counters,
            self._jobs_by_id(),
            now,
            self.worker_types,
            self.capacity,
            self.table,
            self.prices,
            self.config.round_length_s,
            self.entity_weights,
            self.config.goodput_profiles,
        )

    # One round.

    def plan_round(self, now: float) -> list[Assignment]:
        self.maybe_reallocate(now, self._every_round)
        grants = self.allocation.elastic
        if grants is not None:
            # An elastic policy chose each job's GPUs and batch size (shock/engine/elastic.py).
            placed = self.elastic.plan(grants, self.active, self.previous_round)
            self.leases.count(placed, self.stats)
            return placed
        order = list(self._type_order)
        held_out = False  # whether the selection left out the units held back
        if not self.policy.heterogeneity_aware:
            self._shuffler.shuffle(order)
        if self.allocation.round_order is not None:
            chosen = select_in_order(
                order, self.allocation.round_order, self.capacity, self.active, self.pairs
            )
        elif self.config.selection == "gavel":
            chosen, held_out = self._select_by_priority(order)
        else:
            chosen = self._select_by_time_owed(order, now)
        hold = self.config.hold_unallocated_jobs and not held_out
        allocated = self.counters.allocated if hold else None
        placed = self.placing.place(order, chosen, self.previous_round, self.active, allocated)
        self.leases.count(placed, self.stats)
        return placed

    def _candidates(self) -> Candidates:
        return Candidates(
            self.counters,
            self._unit_slots(),
            self._rows_of,
            bool(self.pairs),
            self._gpus_of_column,
            self.policy.backfill,
        )

    def _select_by_time_owed(self, order: list[int], now: float) -> dict[int, list[Unit]]:
        half_round = self.config.round_length_s / 2
        return select_by_time_owed(self._candidates(), order, now - self.last_reset_s, half_round)

    def _select_by_priority(self, order: list[int]) -> tuple[dict[int, list[Unit]], bool]:
        hold = self.config.hold_unallocated_jobs
        return select_by_priority(self._candidates(), order, self.worker_time, hold)

    def _rates_on(self, unit: Unit, column: int, gpus: tuple[int, ...]) -> tuple[float, ...]:
        """Steps/s of each member of `unit` on these GPUs of a worker type."""
        return self.placing.rates_on(unit, column, gpus)
