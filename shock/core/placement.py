"""Placement: which GPUs of a worker type each scheduled unit gets this round."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from shock.core.policy import UnitKey


class PlacementRequest(NamedTuple):
    """A unit to place (a named tuple: built for every unit in every round)."""

    key: UnitKey
    scale_factor: int
    previous_gpus: tuple[int, ...] | None  # GPUs of this worker type it had last round


class Placement(Protocol):
    name: str
    description: str
    # True when a request whose previous GPUs are all free always keeps them; the mechanism
    # then skips the call in rounds where every unit of a worker type ran there last round.
    extends_leases: bool
    # Optional: True when the placement first keeps every request's previous GPUs that are
    # all free, then places the rest exactly as it would with those GPUs gone; the mechanism
    # then asks it only for the units that did not keep theirs.
    #     places_around_leases: bool
    # Optional: the presets (`--preset`) that run with this placement unless `--placement`
    # says otherwise; at most one installed placement may name a preset.
    #     default_for_presets: tuple[str, ...]

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        """Assign GPU ids (from `servers`, a list of each server's GPU ids of one worker type)
        to every request; the caller guarantees the GPU counts fit."""
        ...
