"""What a run needs (RunRequest), its settings (RunConfig) and the backend protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from shock.core.errors import ShockError
from shock.core.model import Cluster
from shock.core.placement import Placement
from shock.core.plugins import PluginRegistry
from shock.core.policy import Policy
from shock.core.results import RunResult
from shock.core.semantics import (
    OverheadEffect,
    OverheadRule,
    RhoAlone,
    RhoContention,
    SelectionRule,
    coerce,
)
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable
from shock.core.trace import Trace

OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, slots=True)
class ClusterRuntime:
    """How a backend that runs real jobs runs them (the simulator ignores it)."""

    job_command: tuple[str, ...] = ()  # (): the training harness, python -m shock.workloads.run
    state_dir: str | None = None  # journal and checkpoints; None: a temporary directory
    heartbeat_s: float = 1.0
    checkpoint_every_s: float | None = None  # None: the job's default


@dataclass(frozen=True, slots=True)
class RunConfig:
    mechanism: MechanismConfig
    preset: str = "default"
    window: tuple[int, int] | None = None  # measure (and wait for) job ids [start, end)
    # Seconds a job loses when it (re)starts from a checkpoint on other GPUs than last round.
    preemption_overhead_s: float = 0.0
    # Charge it on a job's first start too: real jobs pay their start-up at every launch.
    overhead_on_first_start: bool = False
    # Who pays it and what it does to the job's round (shock.core.semantics).
    overhead_rule: OverheadRule = OverheadRule.MOVED
    overhead_effect: OverheadEffect = OverheadEffect.LATE_START
    # Per job type, in place of preemption_overhead_s (a start-up cost measured per family).
    overhead_by_job_type: dict[str, float] | None = None
    seed: int = 0
    # Price of one GPU-hour per worker type, for cost-aware policies.
    prices: dict[str, float] | None = None
    cluster_runtime: ClusterRuntime = field(default_factory=ClusterRuntime)
    # N and T_alone in rho (shock.core.semantics).
    rho_contention: RhoContention = RhoContention.TIME_AVERAGED
    rho_alone: RhoAlone = RhoAlone.EXACT
    # Weight per entity (user or group) for hierarchical policies (--entity-weights).
    entity_weights: dict[str, float] | None = None
    # Jobs finish at the end of the round they complete in and rounds last their full length
    # (Synergy's simulator counts progress in whole rounds).
    quantised_rounds: bool = False
    # How Accordion/GNS batch sizes evolve: "profile" (Shockwave's profile generator, the
    # default) or "artifact-simulator" (Shockwave's round-by-round simulator).
    adaptation_rules: str = "profile"

    def __post_init__(self) -> None:
        # Texts (a sweep file's, an older caller's) become members; anything else is refused.
        for name, kind in _CONFIG_CHOICES:
            object.__setattr__(self, name, coerce(kind, getattr(self, name), name))


_CONFIG_CHOICES: tuple[tuple[str, type[StrEnum]], ...] = (
    ("overhead_rule", OverheadRule),
    ("overhead_effect", OverheadEffect),
    ("rho_contention", RhoContention),
    ("rho_alone", RhoAlone),
)


@dataclass(frozen=True, slots=True)
class RunRequest:
    trace: Trace
    cluster: Cluster
    policy: Policy
    placement: Placement
    solver: SolverSpec
    table: ThroughputTable
    config: RunConfig
    registry: PluginRegistry
    # An instance of the backend's `options_type` (`shock run --backend NAME --OPTION ...`);
    # None for a backend without options.
    backend_options: object | None = None
    # With estimated throughputs (`--estimate-throughputs`): the measured table `table` was
    # estimated from. A simulator runs jobs at its rates and reports them, as a real
    # cluster would measure them; None: `table` is the truth.
    oracle: ThroughputTable | None = None

    def backend_options_as(self, options_type: type[OptionsT]) -> OptionsT:
        """The backend's options: the ones given, or `options_type()`'s defaults when the
        request was built without any."""
        given = self.backend_options
        if given is None:
            return options_type()
        if not isinstance(given, options_type):
            raise ShockError(
                f"the run's backend options are a {type(given).__name__}, "
                f"not a {options_type.__name__}"
            )
        return given


class Backend(Protocol):
    """A backend runs a whole request. It may declare its own options with a class attribute
    `options_type` (a frozen dataclass; see `shock.core.backend_options`); they reach `run`
    as `request.backend_options`."""

    name: str
    description: str

    def run(self, request: RunRequest) -> RunResult: ...


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
    selection: SelectionRule = SelectionRule.DEFICIT
    seed: int = 0
    # Re-run the policy every round whatever the policy asks (Synergy's simulator does).
    reallocate_every_round: bool = False
    # A batch-size change asks for a new allocation (Shockwave's simulator never does: the
    # policy sees the new throughputs at the next arrival or completion).
    reallocate_on_batch_size_change: bool = True
    # Whether the seconds a unit loses to a (re)start count as time it received (shock's:
    # it held the GPUs). Shockwave's simulator counts only the seconds it ran, so a job
    # that was preempted is owed the restart and is picked again sooner.
    overhead_counts_as_received: bool = True
    # Folder of measured per-GPU-type goodput profiles (`--goodput-profiles`, Sia's layout):
    # an elastic job runs at its GPU type's measured goodput, and policies see the folder
    # (`PolicyInput.goodput_profiles`); None: Pollux's bundled models on every type.
    goodput_profiles: str | None = None
    # Stretch the profiles' step times by Sia's calibration factors, as its simulator does.
    goodput_calibration: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "selection", coerce(SelectionRule, self.selection, "selection"))
