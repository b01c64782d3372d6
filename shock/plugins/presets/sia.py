"""`--preset sia`: Sia's simulator (SOSP'23 artifact): its heterogeneous cluster, 60 s rounds,
the policy re-run every round."""

from __future__ import annotations

from shock.api import Preset, Register, SelectionRule, hookimpl

SIA = Preset(
    name="sia",
    description=(
        "Sia's simulator: its 64-GPU cluster (6 x 4 T4, 2 x 8 A100, 3 x 8 RTX 2080 Ti), 60 s "
        "rounds, the policy re-run and jobs re-placed every round, 50 s lost by a job at each "
        "(re)start including its first, sia's nodes of 4 (T4) and 8 (A100, RTX 2080 Ti) GPUs"
    ),
    round_length_s=60.0,
    min_allocation_interval_s=0.0,
    hold_unallocated_jobs=False,
    placement_sensitive=False,
    gpus_per_server=8,
    selection=SelectionRule.DEFICIT,
    reallocate_every_round=True,
    # Sia's simulator stops a job for its checkpoint-restore time at every start and change:
    # 50 s for CIFAR-10, the most common of its applications (15-250 s for the others).
    preemption_overhead_s=50.0,
    overhead_on_first_start=True,
    cluster="sia-64",
    policy_options={"sia": ("node_gpus=t4:4,a100:8,rtx2080ti:8",)},
)


@hookimpl
def register_presets(register: Register) -> None:
    register(SIA)
