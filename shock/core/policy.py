"""What a policy sees (PolicyInput) and what it returns (Allocation)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from shock.core.errors import InputError
from shock.core.solver import ProblemClass

if TYPE_CHECKING:
    from shock.core.solver import SolverSpec
    from shock.core.throughputs import ThroughputTable

# A scheduled unit: one job id, or a pair of co-located job ids (space sharing).
UnitKey = int | tuple[int, int]




@dataclass(frozen=True, slots=True)
class PolicyJob:
    job_id: int
    job_type: str
    scale_factor: int
    priority_weight: float
    arrival_time: float
    total_steps: int
    steps_done: float
    # The trace's SLO column: the job should finish within slo x its isolated run time.
    slo: float | None = None
    # The user or group the job belongs to (hierarchical policies); None: the default entity.
    entity: str | None = None
    # The trace's adaptation mode (static, accordion, gns): Shockwave plans with the job's
    # epoch profile, which its adaptation model gives.
    mode: str = "static"
    # Seconds the job has held GPUs so far (Synergy's LAS counts this, not work done).
    time_run_s: float = 0.0
    # Its speed relative to the table's throughput: the last round's resource grant if it ran
    # then, else what the placement aims to give it (1 without a resource-aware placement).
    speed: float = 1.0
    # CPU cores and GB of memory the job asked for in all, where its trace records them.
    cpus: float | None = None
    memory_gb: float | None = None


@dataclass(frozen=True)
class PolicyInput:
    """The state a policy decides on.

    `throughputs[i, w]` is job i's isolated steps/s on worker type w at its scale factor;
    `capacity[w]` the number of GPUs of worker type w. `job_ids`, `scale_factors` and
    `priority_weights` give the jobs' columns as arrays (a policy that needs no more of
    the jobs can skip `jobs`, which the mechanism then builds only when it is read).
    """

    now: float
    jobs: tuple[PolicyJob, ...]
    worker_types: tuple[str, ...]
    capacity: np.ndarray
    throughputs: np.ndarray
    table: ThroughputTable | None = None
    # Price of one GPU-hour of each worker type (cost-aware policies); None when not given.
    prices: np.ndarray | None = None
    # The mechanism's round length (policies that plan in rounds); None when not known.
    round_length_s: float | None = None
    # Weight of each entity (user or group) for hierarchical policies; entities not named
    # here weigh 1.
    entity_weights: Mapping[str, float] | None = None
    # The run's folder of measured per-GPU-type goodput profiles (`--goodput-profiles`), which
    # the simulator runs elastic jobs by; None when the run has none.
    goodput_profiles: str | None = None

    @classmethod
    def of_job_columns(
        cls,
        jobs: Callable[[], tuple[PolicyJob, ...]],
        job_ids: tuple[int, ...],
        scale_factors: np.ndarray,
        priority_weights: np.ndarray,
        **fields: Any,
    ) -> PolicyInput:
        """An input whose `jobs` tuple `jobs()` builds when it is first read (the other
        fields as keywords); `job_ids`, `scale_factors` and `priority_weights` must be what
        the jobs give."""
        problem = object.__new__(cls)
        for name in _FIELDS:
            if name != "jobs":
                object.__setattr__(problem, name, fields.pop(name, _FIELD_DEFAULTS.get(name)))
        if fields:
            raise TypeError(f"PolicyInput has no field(s) {', '.join(fields)}")
        state = problem.__dict__
        state["_build_jobs"] = jobs
        state["_job_ids"] = job_ids
        state["_scale_factors"] = scale_factors
        state["_priority_weights"] = priority_weights
        return problem

    def __getstate__(self) -> dict[str, Any]:
        # Copies and pickles hold the jobs themselves.
        return {name: getattr(self, name) for name in _FIELDS}

    @property
    def job_ids(self) -> tuple[int, ...]:
        ids = self.__dict__.get("_job_ids")
        return ids if ids is not None else tuple(j.job_id for j in self.jobs)

    @property
    def scale_factors(self) -> np.ndarray:
        known = self.__dict__.get("_scale_factors")
        if known is not None:
            return known.copy()
        return np.fromiter((j.scale_factor for j in self.jobs), float, len(self.jobs))

    @property
    def priority_weights(self) -> np.ndarray:
        known = self.__dict__.get("_priority_weights")
        if known is not None:
            return known.copy()
        return np.fromiter((j.priority_weight for j in self.jobs), float, len(self.jobs))

    @property
    def steps_remaining(self) -> np.ndarray:
        return np.fromiter((j.total_steps - j.steps_done for j in self.jobs), float, len(self.jobs))

    @property
    def times_since_arrival(self) -> np.ndarray:
        return np.fromiter((self.now - j.arrival_time for j in self.jobs), float, len(self.jobs))


class _JobsBuiltWhenRead:
    """`PolicyInput.jobs` of an input made by `of_job_columns`: built at the first read and
    kept (a non-data descriptor: an input given its jobs holds them in its own dict)."""

    def __get__(self, problem: PolicyInput | None, owner: type | None = None) -> Any:
        if problem is None:
            raise AttributeError("jobs")
        jobs = problem.__dict__["_build_jobs"]()
        object.__setattr__(problem, "jobs", jobs)
        return jobs


# Set after @dataclass, so that `jobs` stays a field without a default.
setattr(PolicyInput, "jobs", _JobsBuiltWhenRead())  # noqa: B010
_FIELDS = tuple(f.name for f in fields(PolicyInput))
_FIELD_DEFAULTS = {f.name: f.default for f in fields(PolicyInput) if f.default is not MISSING}


@dataclass(frozen=True, slots=True)
class ElasticGrant:
    """What an elastic policy (Pollux, Sia) chose for one job this round: how many GPUs of
    which worker type, over how many nodes, and the batch size to train with there."""

    worker_type: str
    gpus: int
    num_nodes: int
    # Total batch size (GPUs x atomic batch x (accumulation steps + 1)); None: the job keeps
    # its own (the policy has no goodput model of it).
    batch_size: int | None = None
    atomic_batch_size: int | None = None
    accumulation_steps: int = 0
    # GPUs on each node of the worker type, in the order of its servers (index k: the k-th
    # server), where the policy chose the nodes (Pollux); empty: the mechanism places the
    # grant's GPUs itself.
    node_gpus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Allocation:
    """Fraction of time each unit should spend on each worker type (rows sum to <= 1)."""

    keys: tuple[UnitKey, ...]
    worker_types: tuple[str, ...]
    fractions: np.ndarray
    objective: float | None = None
    # A policy that decides rounds itself (Shockwave) gives the order in which the mechanism
    # takes units this round (gangs whole, while GPUs are left); None: by time owed/priority.
    round_order: tuple[UnitKey, ...] | None = None
    # An elastic policy's choice per job (jobs it gives no GPUs are absent): the GPU count and
    # batch size the job should run with, which may differ from its trace's scale factor. An
    # engine that cannot resize jobs uses `fractions`, which such a policy sets so that each
    # job gets the GPU-time of its grant at its fixed scale factor (gpus / scale factor).
    elastic: Mapping[UnitKey, ElasticGrant] | None = None

    def of(self, key: UnitKey) -> dict[str, float]:
        row = self.keys.index(key)
        return {w: float(self.fractions[row, c]) for c, w in enumerate(self.worker_types)}

    @classmethod
    def empty(cls, worker_types: tuple[str, ...]) -> Allocation:
        return cls((), worker_types, np.zeros((0, len(worker_types))))


class PartObjectives(StrEnum):
    """How the objectives of sub-problems on disjoint parts of the cluster (POP partitions,
    `--partitions`) make the whole problem's objective."""

    MIN = "min"  # a max-min objective: the smallest part's floor
    MAX = "max"  # a min-max objective (a makespan, the worst rho): the largest part's
    SUM = "sum"  # a sum over jobs


class Policy(ABC):
    """A scheduling policy: state in, allocation out."""

    name: str
    description: str
    problem_class: ProblemClass = ProblemClass.HEURISTIC
    # Gavel shuffles the worker-type order each round for heterogeneity-agnostic policies.
    heterogeneity_aware: bool = True
    # Whether the mechanism may fill idle GPUs with jobs the allocation gives no time there
    # (FIFO runs only what it allocated).
    backfill: bool = True
    # Recompute the allocation every round, not only when jobs arrive or leave (orderings
    # such as least attained service move as jobs progress).
    reallocate_every_round: bool = False
    # False for a policy that plans the whole cluster's rounds itself (`--partitions` refused).
    partitionable: bool = True
    # True for a policy whose shares may ask a worker type for more GPUs than it has (an
    # artifact's rule reproduced as it is); the mechanism's priorities then decide who runs.
    may_oversubscribe: bool = False
    # How its objective over parts of the cluster combines into the whole's; None: the
    # partitioned allocation reports no objective.
    part_objectives: PartObjectives | None = None
    # True for a hierarchical policy that shares the cluster between entities (users) in
    # proportion to their weights (`PolicyInput.entity_weights`).
    weighs_entities: bool = False

    @abstractmethod
    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        """Compute an allocation for the active jobs of `problem`."""

    def for_run(self, seed: int) -> Policy:
        """The instance one run uses. Policies that keep state between allocations (FIFO's
        placements, FTF's attained isolated time) return a fresh copy; the rest themselves."""
        return self

    def snapshot(self) -> dict[str, Any] | None:
        """What the policy keeps between allocations, as JSON-ready data, so that a
        scheduler restarted from its journal goes on with it (`restore`); None for a policy
        that keeps nothing."""
        return None

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Take back a `snapshot` of an instance of this policy (before a restart); raises
        (ValueError, KeyError, TypeError, ...) when it does not fit."""
        raise ValueError(f"policy '{self.name}' keeps no state to restore")

    def with_options(self, values: Mapping[str, str]) -> Policy:
        """A copy configured by `--policy-option key=value` pairs; policies without options
        refuse any."""
        raise InputError(f"policy '{self.name}' takes no options", field="--policy-option")
