"""Named bundles of simulator semantics (`--preset`).

A preset names no placement: the placement plugin that declares the preset in its
`default_for_presets` is the one it runs with unless `--placement` says otherwise
(`placement_for_preset`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shock.core.errors import ShockError, UnknownPluginError

if TYPE_CHECKING:
    from shock.core.plugins import PluginRegistry


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    description: str
    round_length_s: float
    min_allocation_interval_s: float
    hold_unallocated_jobs: bool
    placement_sensitive: bool
    gpus_per_server: int
    selection: str
    preemption_overhead_s: float = 0.0
    # Charge the overhead also when a job first starts.
    overhead_on_first_start: bool = False
    # Who pays the overhead: "moved" (on other GPUs than last round) or "missed_round"
    # (Shockwave's simulator: did not run last round; see RunConfig.overhead_rule).
    overhead_rule: str = "moved"
    # What the overhead does to the round: see RunConfig.overhead_effect.
    overhead_effect: str = "late_start"
    # A batch-size change triggers a new allocation (subject to the minimum interval).
    reallocate_on_batch_size_change: bool = True
    # Seconds lost to a (re)start count as time the job received (see MechanismConfig).
    overhead_counts_as_received: bool = True
    # N in rho's fair share: "time_averaged" (shock) or "trace" (jobs in the trace, Shockwave).
    rho_contention: str = "time_averaged"
    # T_alone in rho: "exact" or "whole_epochs" (Shockwave's; see RunConfig.rho_alone).
    rho_alone: str = "exact"
    # Synergy: the policy and placement run every round; jobs finish at round ends.
    reallocate_every_round: bool = False
    quantised_rounds: bool = False
    # Policy options the preset sets, as (policy, "key=value"); --policy-option overrides them.
    policy_options: tuple[tuple[str, str], ...] = ()

    def options_for(self, policy: str) -> tuple[str, ...]:
        return tuple(item for name, item in self.policy_options if name == policy)


PRESETS = {
    "default": Preset(
        name="default",
        description=(
            "shock's semantics: allocation recomputed whenever jobs arrive or leave, new jobs "
            "run at once, jobs picked by time owed, gangs consolidated on 8-GPU servers with "
            "Gavel's unconsolidated throughputs when they must straddle servers"
        ),
        round_length_s=360.0,
        min_allocation_interval_s=0.0,
        hold_unallocated_jobs=False,
        placement_sensitive=True,
        gpus_per_server=8,
        selection="deficit",
    ),
    "gavel": Preset(
        name="gavel",
        description=(
            "Gavel's simulator: 360 s rounds, allocation recomputed after arrivals/completions "
            "at most every 1920 s, jobs not yet in the allocation wait, one GPU per server, "
            "no preemption cost"
        ),
        round_length_s=360.0,
        min_allocation_interval_s=1920.0,
        hold_unallocated_jobs=True,
        placement_sensitive=False,
        gpus_per_server=1,
        selection="gavel",
        # Gavel's own FIFO queue and Gandiva packing (docs/semantics.md).
        policy_options=(("fifo_perf", "gavel_queue=true"), ("gandiva", "gavel_packing=true")),
    ),
    "shockwave": Preset(
        name="shockwave",
        description=(
            "Shockwave's simulator (Gavel's mechanism): 120 s rounds, allocation recomputed "
            "after arrivals/completions (not batch-size changes) at most every 1000 s, jobs not "
            "yet in the allocation wait, one GPU per server, 20 s lost by a job that did not "
            "run in the previous round, rho = JCT / (run time alone at the job's batch-size "
            "schedule x max(1, jobs in trace / GPUs))"
        ),
        round_length_s=120.0,
        # Shockwave's scheduler: _minimum_time_between_allocation_resets = 1000 s (Gavel's
        # is 1920 s); a new job has no share, so it is not placed, until the next allocation.
        min_allocation_interval_s=1000.0,
        hold_unallocated_jobs=True,
        reallocate_on_batch_size_change=False,
        placement_sensitive=False,
        gpus_per_server=1,
        selection="gavel",
        rho_contention="trace",
        rho_alone="whole_epochs",
        # Shockwave's simulator: a job that did not run in the previous round loses 20 s of
        # its round to checkpoint and resume (scheduler.py, "preemption_overhead = 20"), a
        # job's first round included, the run's first round and a job's short last round not.
        preemption_overhead_s=20.0,
        overhead_rule="missed_round",
        # The job keeps its planned steps' time on its GPUs and does fewer steps in it; the
        # time its priority counts as received leaves those 20 s out.
        overhead_effect="fewer_steps",
        overhead_counts_as_received=False,
        # Shockwave's max_sum_throughput_perf sums raw steps/s (Gavel's objective) and takes
        # ECOS's answer, whose tiny shares for left-out jobs rank them for spare GPUs.
        # Its `allox` is AlloX with alpha = 0.2, which gives a gang a 1/s share and matches it
        # again at every allocation.
        policy_options=(
            ("max_sum_throughput_perf", "raw_throughput=true"),
            ("max_sum_throughput_perf", "ecos_point=true"),
            ("allox", "alpha=0.2"),
            ("allox", "gavel_gangs=true"),
            # Its `gandiva_fair` gives every job N / m GPUs' time, blind to gang sizes.
            ("gandiva_fair", "size_blind_shares=true"),
            # Its min_total_duration answers at the end of a 5% bisection, interior point.
            ("min_total_duration", "gavel_bisection=true"),
            ("min_total_duration_perf", "gavel_bisection=true"),
            # A job a batch-size change left without steps counts as in its finish-time
            # fairness (fixed ratio in the max, or the isolated allocation when steps done
            # exceed the total).
            ("finish_time_fairness", "jobs_without_steps=shockwave"),
            ("finish_time_fairness_perf", "jobs_without_steps=shockwave"),
        ),
    ),
    "synergy": Preset(
        name="synergy",
        description=(
            "Synergy's simulator: 300 s rounds, the policy re-run and every job re-placed each "
            "round, a job's progress counted in whole rounds (it finishes at the end of the "
            "round it completes in), GPU-proportional CPUs and memory unless --placement says "
            "otherwise, no penalty for gangs across servers, ftf in Synergy's order"
        ),
        round_length_s=300.0,
        min_allocation_interval_s=0.0,
        hold_unallocated_jobs=False,
        placement_sensitive=False,
        gpus_per_server=8,
        selection="deficit",
        reallocate_every_round=True,
        quantised_rounds=True,
        # Synergy's ftf runs the lowest rho first; the preset reproduces it so that Synergy's
        # numbers can be compared (shock's ftf elsewhere runs the highest first).
        policy_options=(("ftf", "synergy_order=true"),),
    ),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPluginError("preset", name, list(PRESETS)) from None


def placement_for_preset(preset: str, registry: PluginRegistry) -> Any:
    """The placement a preset runs with when `--placement` is not given: the one registered
    placement that lists the preset in its `default_for_presets`. None or several is an error
    that says to pick one with `--placement`; no order of plugins decides."""
    claimants = [
        row
        for row in registry.listing()
        if row.kind == "placement" and preset in getattr(row.obj, "default_for_presets", ())
    ]
    if len(claimants) == 1:
        return claimants[0].obj
    choose = f"choose one with --placement ({', '.join(registry.names('placement'))})"
    if not claimants:
        raise ShockError(f"no installed placement is the default for preset '{preset}'; {choose}")
    names = ", ".join(f"'{row.name}' (from {row.provider})" for row in claimants)
    raise ShockError(
        f"placements {names} each declare they are the default for preset '{preset}'; {choose}"
    )
