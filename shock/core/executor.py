"""The executor contract: what a backend does for the engine.

The engine (`engine.py`) decides everything: who runs, where, for how long, with which batch
size. An executor carries a round's plan out and reports what happened: the steps each job
made, when it stopped, the rates it measured, the batch sizes jobs switched to, and whether the
cluster itself changed. The simulator's executor computes all of that on virtual time; the gRPC
and Ray executors run real processes on wall-clock time. Executors never decide.

Rounds are described with named tuples: a plan is built for every running unit in every round,
so these are on the hot path of a 50,000-job simulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from shock.core.model import Cluster, JobSpec
    from shock.core.resource_placement import ResourceGrant
    from shock.core.run import RunRequest


class PlannedUnit(NamedTuple):
    """One job (or two co-located jobs) on a gang of GPUs for a round."""

    job_ids: tuple[int, ...]
    job_types: tuple[str, ...]  # each member's current job type (its batch size)
    worker_type: str
    gpus: tuple[int, ...]  # cluster-wide GPU ids (`Cluster.servers()` order)
    rates: tuple[float, ...]  # steps/s the engine expects of each member here
    steps_left: tuple[float, ...]  # steps each member still has to do
    overhead_s: float  # (re)start cost this round: a simulating executor charges it
    kept_gpus: bool  # ran on exactly these GPUs last round: no checkpoint-restore needed
    grant: ResourceGrant | None = None  # CPUs and memory from a resource-aware placement


class BatchSizeOrder(NamedTuple):
    """The engine's adaptation model asks a job to train at another batch size."""

    job_id: int
    batch_size: int


@dataclass(frozen=True, slots=True)
class RoundPlan:
    index: int  # 1, 2, ... over the run
    start_s: float
    end_s: float  # start + round length: when the round ends at the latest
    units: tuple[PlannedUnit, ...]
    batch_size_orders: tuple[BatchSizeOrder, ...] = ()


class UnitProgress(NamedTuple):
    """What one planned unit did (reported in plan order)."""

    steps: tuple[float, ...]  # steps each member made this round
    stopped_s: tuple[float, ...]  # when each member stopped working (its finish, if it finished)
    exec_s: float  # seconds the unit held its GPUs this round


class StrayProgress(NamedTuple):
    """Progress of a job outside this round's plan: a late exit, a run lost with its worker."""

    job_id: int
    steps: float
    stopped_s: float


class MeasuredRate(NamedTuple):
    job_type: str
    scale_factor: int
    worker_type: str
    steps_per_s: float


class MeasuredPairRate(NamedTuple):
    """Steps/s of two jobs sharing one GPU (or gang), as measured (first, second)."""

    first_type: str
    second_type: str
    scale_factor: int
    worker_type: str
    first_steps_per_s: float
    second_steps_per_s: float


class BatchSizeChange(NamedTuple):
    """A job now trains as `job_type` (another batch size) and needs `total_steps` in all
    (its harness rescaled them); its credited progress stays as the engine has it."""

    job_id: int
    job_type: str
    total_steps: int


@dataclass(frozen=True, slots=True)
class RoundReport:
    end_s: float
    units: tuple[UnitProgress, ...]  # one per planned unit, in plan order
    stray: tuple[StrayProgress, ...] = ()
    rates: tuple[MeasuredRate, ...] = ()
    batch_size_changes: tuple[BatchSizeChange, ...] = ()
    pair_rates: tuple[MeasuredPairRate, ...] = ()  # with `measures_pair_rates`


@dataclass(frozen=True, slots=True)
class RoundColumns:
    """A round's plan as columns, one entry per unit, for an executor that computes progress
    for thousands of units at once (`ColumnarExecutor`). Only rounds of jobs alone are
    planned this way; the fields are `PlannedUnit`'s."""

    index: int
    start_s: float
    end_s: float
    job_ids: np.ndarray  # int64
    rates: np.ndarray  # steps/s the engine expects
    steps_left: np.ndarray
    overhead_s: np.ndarray  # (re)start cost this round, seconds
    # Each job's CPUs and memory where the placement is resource-aware; empty otherwise.
    grants: tuple[ResourceGrant | None, ...] = ()


@dataclass(frozen=True, slots=True)
class ColumnProgress:
    """What the units of a `RoundColumns` did, in plan order (`UnitProgress`'s fields). The
    engine keeps the arrays for a while (the timeline reads them in batches of rounds): an
    executor hands them over and does not change them afterwards."""

    end_s: float
    steps: np.ndarray
    stopped_s: np.ndarray
    exec_s: np.ndarray


@dataclass(frozen=True, slots=True)
class ExecutorCapabilities:
    # The executor computes progress itself from the engine's rates (a simulator): the
    # engine's adaptation rules then change batch sizes. Real jobs adapt by themselves.
    simulates_jobs: bool
    # Adaptation modes the executor's jobs carry out on their own (real Accordion and GNS
    # logic in the training harness); the engine orders batch sizes for the other modes.
    native_adaptations: frozenset[str] = frozenset({"static"})
    # The executor measures throughputs; the engine then starts from the table as a prior.
    measures_rates: bool = False
    # It also measures co-located pairs' throughputs: the engine then keeps the table's
    # pairs as priors and replaces them by what is reported.
    measures_pair_rates: bool = False
    # The executor keeps the engine's state across a crash (`save_state` / `load_state`).
    durable: bool = False
    # Jobs may be submitted and cancelled while the run goes on (a service): the engine then
    # asks `intake()` before every decision and runs until it returns None.
    accepts_submissions: bool = False
    # The executor also takes rounds as columns (`ColumnarExecutor`), and gives for them
    # exactly what `run_round` gives: the engine then plans rounds of jobs alone that way.
    # Off by default, so a subclass that changes `run_round` is not bypassed.
    columnar_rounds: bool = False


class Intake(NamedTuple):
    """What users asked of an open executor since the engine last asked."""

    arrived: tuple[JobSpec, ...]  # new jobs; `arrival_time` is when each was submitted
    cancelled: tuple[int, ...]  # job ids to drop (queued or running): they get no more GPUs


@runtime_checkable
class Executor(Protocol):
    """A backend's executor. Times are seconds since the run's time zero (trace time)."""

    capabilities: ExecutorCapabilities

    def start(self, request: RunRequest, jobs: tuple[JobSpec, ...]) -> Cluster:
        """Bring the cluster up; return it as it is (a real one: the workers that joined)."""
        ...

    def clock(self) -> float:
        """The current time."""
        ...

    def run_round(self, plan: RoundPlan) -> RoundReport:
        """Carry the plan out until `plan.end_s`, or earlier once every planned job stopped
        (or the cluster changed); report what happened."""
        ...

    def idle_until(self, time_s: float) -> None:
        """Nothing runs: wait until `time_s` (a real cluster: or until it changed)."""
        ...

    def cluster_changed(self) -> Cluster | None:
        """The cluster as it is now if it changed since the last call (workers joined or
        died), else None."""
        ...

    def stop(self) -> None:
        """The run is over (or failed): release everything."""
        ...

    def save_state(self, state: dict[str, Any]) -> None:
        """Keep the engine's state (a JSON document) durably; called only when `durable`."""
        ...

    def load_state(self) -> dict[str, Any] | None:
        """The state saved before a crash, if any; called only when `durable`."""
        ...


@runtime_checkable
class ColumnarExecutor(Executor, Protocol):
    """An executor that also takes a round as columns (with `capabilities.columnar_rounds`
    set): the engine then plans eligible rounds that way (see `RoundColumns`);
    `run_round_columns` must report what `run_round` would for the same units."""

    def run_round_columns(self, plan: RoundColumns) -> ColumnProgress: ...


@runtime_checkable
class OpenExecutor(Executor, Protocol):
    """An executor that `accepts_submissions`: jobs arrive and leave while it runs."""

    def intake(self) -> Intake | None:
        """Jobs submitted and cancelled since the last call; None once the service stops
        (the engine then ends the run)."""
        ...
