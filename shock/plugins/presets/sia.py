"""`--preset sia`: Sia's simulator (SOSP'23 artifact): its heterogeneous cluster, 60 s rounds,
the policy re-run every round."""

from __future__ import annotations

from shock.api import Preset, Register, SelectionRule, hookimpl

SIA = Preset(
    name="sia",
    description=(
        "Sia's simulator: its 64-GPU cluster (6 x 4 T4, 2 x 8 A100, 3 x 8 RTX 2080 Ti), 60 s "
        "rounds, the policy re-run and jobs re-placed every round, each (re)start including "
        "the first costing the application's restore time (15-250 s, longer ones over several "
        "rounds), sia's nodes of 4 (T4) and 8 (A100, RTX 2080 Ti) GPUs"
    ),
    round_length_s=60.0,
    min_allocation_interval_s=0.0,
    hold_unallocated_jobs=False,
    placement_sensitive=False,
    gpus_per_server=8,
    selection=SelectionRule.DEFICIT,
    reallocate_every_round=True,
    # Sia's simulator stops a job for its application's checkpoint-restore time at every
    # start and change (applications.py; 30 s for others); a longer one than a round goes on
    # into the next rounds while the job keeps its GPUs, as there.
    preemption_overhead_s=30.0,
    overhead_by_job_type={
        "cifar10": 50.0,
        "deepspeech2": 25.0,
        "bert": 120.0,
        "yolov3": 80.0,
        "imagenet": 250.0,
        "ncf": 15.0,
    },
    overhead_on_first_start=True,
    cluster="sia-64",
    policy_options={"sia": ("node_gpus=t4:4,a100:8,rtx2080ti:8",)},
)


@hookimpl
def register_presets(register: Register) -> None:
    register(SIA)
