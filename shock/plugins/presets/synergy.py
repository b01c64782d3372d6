"""`--preset synergy`: Synergy's simulator (OSDI'22 artifact)."""

from __future__ import annotations

from shock.api import Preset, Register, SelectionRule, hookimpl

SYNERGY = Preset(
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
    selection=SelectionRule.DEFICIT,
    reallocate_every_round=True,
    quantised_rounds=True,
    # Synergy's ftf runs the lowest rho first; the preset reproduces it so that Synergy's
    # numbers can be compared (shock's ftf elsewhere runs the highest first).
    policy_options={"ftf": ("synergy_order=true",)},
)


@hookimpl
def register_presets(register: Register) -> None:
    register(SYNERGY)
