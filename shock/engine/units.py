"""The units a round schedules (a job alone, or two jobs sharing GPUs) and the records of a
round: each unit's assignment, and the mechanism's counts.

A unit's counters (time received, deficit, shares, rates) live in the mechanism's
`UnitCounters` arrays, one row per unit, so a round reads and credits all of them in array
operations; the unit objects hold their row and read their values through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import NamedTuple, cast

from shock.core.model import JobSpec
from shock.core.policy import PolicyJob, UnitKey
from shock.core.resource_placement import ResourceGrant
from shock.engine.unit_counters import Counters, UnitCounters


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
ONLY_JOBS = {JobState}  # the units' types when no pair runs


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
new_tuple = tuple.__new__
UNIT_KEY = attrgetter("key")
# An assignment's fields, read by C-level getters in passes over a whole round (here, in the
# engine and in the timeline).
ASSIGNED_UNIT = itemgetter(0)
ASSIGNED_COLUMN = itemgetter(1)
ASSIGNED_GPUS = itemgetter(3)
ASSIGNED_RATES = itemgetter(4)
ASSIGNED_GRANT = itemgetter(6)
KEPT_GPUS = itemgetter(5)  # Assignment.kept_gpus
SCALE_FACTOR = attrgetter("scale_factor")
RATES_OF = attrgetter("rates")


# Stands for "did not run last round" where a unit's last assignment is looked up.
NOT_PLACED = Assignment(cast(Unit, None), -1, "", (), (), False)


@dataclass(slots=True)
class MechanismStats:
    preemptions: int = 0
    lease_extensions: int = 0
    lease_opportunities: int = 0
    allocations: int = 0
    solver_seconds: float = 0.0
