"""`--preset gavel`: Gavel's simulator (OSDI'20 artifact), its baselines as it runs them."""

from __future__ import annotations

from shock.api import Preset, Register, SelectionRule, hookimpl

GAVEL = Preset(
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
    selection=SelectionRule.GAVEL,
    policy_options={
        # Gavel's own FIFO queue and Gandiva packing (docs/semantics.md).
        "fifo_perf": ("gavel_queue=true",),
        "gandiva": ("gavel_packing=true",),
        # Gavel's simulator solves max_sum_throughput_perf with ECOS and takes the point its
        # interior-point method stops at: the tiny shares it leaves to jobs the optimum
        # leaves out rank them for spare GPUs (its objective sums raw steps/s).
        "max_sum_throughput_perf": ("raw_throughput=true", "ecos_point=true"),
    },
)


@hookimpl
def register_presets(register: Register) -> None:
    register(GAVEL)
