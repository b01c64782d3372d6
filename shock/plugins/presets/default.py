"""`--preset default`: shock's own semantics."""

from __future__ import annotations

from shock.api import Preset, Register, SelectionRule, hookimpl

DEFAULT = Preset(
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
    selection=SelectionRule.DEFICIT,
)


@hookimpl
def register_presets(register: Register) -> None:
    register(DEFAULT)
