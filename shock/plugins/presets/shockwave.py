"""`--preset shockwave`: Shockwave's simulator (NSDI'23 artifact, Gavel's mechanism), its
batch-size adaptation and its baselines as it runs them."""

from __future__ import annotations

from shock.api import (
    OverheadEffect,
    OverheadRule,
    Preset,
    Register,
    RhoAlone,
    RhoContention,
    SelectionRule,
    hookimpl,
)

SHOCKWAVE = Preset(
    name="shockwave",
    description=(
        "Shockwave's simulator (Gavel's mechanism): 120 s rounds, allocation recomputed "
        "after arrivals/completions (not batch-size changes) at most every 1000 s, jobs not "
        "yet in the allocation wait, one GPU per server, 20 s lost by a job that did not "
        "run in the previous round, batch sizes changed round by round as its simulator "
        "does, rho = JCT / (run time alone at the job's batch-size schedule x max(1, jobs "
        "in trace / GPUs))"
    ),
    round_length_s=120.0,
    # Shockwave's scheduler: _minimum_time_between_allocation_resets = 1000 s (Gavel's is
    # 1920 s); a new job has no share, so it is not placed, until the next allocation.
    min_allocation_interval_s=1000.0,
    hold_unallocated_jobs=True,
    reallocate_on_batch_size_change=False,
    placement_sensitive=False,
    gpus_per_server=1,
    selection=SelectionRule.GAVEL,
    rho_contention=RhoContention.TRACE,
    rho_alone=RhoAlone.WHOLE_EPOCHS,
    # A job that did not run in the previous round loses 20 s of its round to checkpoint
    # and resume (scheduler.py, "preemption_overhead = 20"), a job's first round included,
    # the run's first round and a job's short last round not.
    preemption_overhead_s=20.0,
    overhead_rule=OverheadRule.MISSED_ROUND,
    # The job keeps its planned steps' time on its GPUs and does fewer steps in it; the time
    # its priority counts as received leaves those 20 s out.
    overhead_effect=OverheadEffect.FEWER_STEPS,
    overhead_counts_as_received=False,
    # Batch sizes evolve as Shockwave's round-by-round simulator changes them.
    adaptation_rules="artifact-simulator",
    policy_options={
        # Its max_sum_throughput_perf sums raw steps/s (Gavel's objective) and takes ECOS's
        # answer, whose tiny shares for left-out jobs rank them for spare GPUs.
        "max_sum_throughput_perf": ("raw_throughput=true", "ecos_point=true"),
        # Its `allox` is AlloX with alpha = 0.2, which gives a gang a 1/s share and matches
        # it again at every allocation.
        "allox": ("alpha=0.2", "gavel_gangs=true"),
        # Its `gandiva_fair` gives every job N / m GPUs' time, blind to gang sizes.
        "gandiva_fair": ("size_blind_shares=true",),
        # Its min_total_duration answers at the end of a 5% bisection, interior point.
        "min_total_duration": ("gavel_bisection=true",),
        "min_total_duration_perf": ("gavel_bisection=true",),
        # A job a batch-size change left without steps counts as in its finish-time
        # fairness (fixed ratio in the max, or the isolated allocation when steps done
        # exceed the total).
        "finish_time_fairness": ("jobs_without_steps=shockwave",),
        "finish_time_fairness_perf": ("jobs_without_steps=shockwave",),
    },
)


@hookimpl
def register_presets(register: Register) -> None:
    register(SHOCKWAVE)
