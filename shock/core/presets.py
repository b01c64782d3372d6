"""A preset (`shock run --preset NAME`): a named bundle of one simulator's semantics.

Presets are plugins (`register_presets`): shock's own `default`, and one per artifact that
reproduces that artifact's simulator with no other flag (`gavel`, `shockwave`, `synergy`,
registered by `shock.plugins.presets`). A preset names no placement: the placement plugin that
lists the preset in its `default_for_presets` runs with it unless `--placement` says otherwise.
Every value here is a default that the matching `shock run` option overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from shock.core.semantics import (
    OverheadEffect,
    OverheadRule,
    RhoAlone,
    RhoContention,
    SelectionRule,
    coerce,
)


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    description: str
    round_length_s: float  # --round-length
    # Allocations recomputed after arrivals/completions at most this often
    # (--min-allocation-interval).
    min_allocation_interval_s: float
    # A job that arrived after the last allocation may be picked but is not placed.
    hold_unallocated_jobs: bool
    # Gangs that straddle servers run at `<type>_unconsolidated` throughputs.
    placement_sensitive: bool
    gpus_per_server: int  # --gpus-per-server
    selection: SelectionRule
    preemption_overhead_s: float = 0.0  # --preemption-overhead
    # Charge the overhead also when a job first starts.
    overhead_on_first_start: bool = False
    overhead_rule: OverheadRule = OverheadRule.MOVED
    overhead_effect: OverheadEffect = OverheadEffect.LATE_START
    # A batch-size change triggers a new allocation (subject to the minimum interval).
    reallocate_on_batch_size_change: bool = True
    # Seconds lost to a (re)start count as time the job received (MechanismConfig).
    overhead_counts_as_received: bool = True
    rho_contention: RhoContention = RhoContention.TIME_AVERAGED
    rho_alone: RhoAlone = RhoAlone.EXACT
    # The policy and placement run every round; jobs finish at round ends (Synergy).
    reallocate_every_round: bool = False
    quantised_rounds: bool = False
    # How simulated batch sizes evolve: an "adaptation rules" plugin (--adaptation-rules).
    adaptation_rules: str = "profile"
    # Policy name -> `key=value` options the preset gives it; --policy-option overrides them.
    policy_options: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Seconds lost per (re)start by job type or model family (`cifar10`), over
    # preemption_overhead_s; --start-costs and per-type overheads given to a run override them.
    overhead_by_job_type: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # The cluster it runs on when --cluster is not given (a bundled cluster name); None: the
    # trace format's, else shock's default.
    cluster: str | None = None

    def __post_init__(self) -> None:
        for name, kind in (
            ("selection", SelectionRule),
            ("overhead_rule", OverheadRule),
            ("overhead_effect", OverheadEffect),
            ("rho_contention", RhoContention),
            ("rho_alone", RhoAlone),
        ):
            value = coerce(kind, getattr(self, name), f"preset '{self.name}': {name}")
            object.__setattr__(self, name, value)
        # Read-only, so that no run can change what the next one gets.
        options = {policy: tuple(items) for policy, items in self.policy_options.items()}
        object.__setattr__(self, "policy_options", MappingProxyType(options))
        costs = dict(self.overhead_by_job_type)
        object.__setattr__(self, "overhead_by_job_type", MappingProxyType(costs))

    def options_for(self, policy: str) -> tuple[str, ...]:
        return self.policy_options.get(policy, ())
