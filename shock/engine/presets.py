"""Finding a preset (`--preset`) and the placement it runs with.

Presets are plugins (`register_presets`; the contract is `shock.core.presets.Preset`). A
preset names no placement: the placement plugin that declares the preset in its
`default_for_presets` is the one it runs with unless `--placement` says otherwise
(`placement_for_preset`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shock.core.errors import ShockError
from shock.core.presets import Preset

if TYPE_CHECKING:
    from shock.core.plugins import PluginRegistry


def get_preset(name: str, registry: PluginRegistry) -> Preset:
    """The registered preset `name`; an `UnknownPluginError` (with a "did you mean") if none."""
    preset: Preset = registry.get("preset", name)
    return preset


def placement_for_preset(preset: str, registry: PluginRegistry) -> Any:
    """The placement a preset runs with when `--placement` is not given: the one registered
    placement that lists the preset in its `default_for_presets`. None or several is an error
    that says to pick one with `--placement`; no order of plugins decides."""
    claimants = [
        row
        for row in registry.registered("placement")
        if preset in getattr(row.obj, "default_for_presets", ())
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
