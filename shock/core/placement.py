"""Placement: which GPUs of a worker type each scheduled unit gets this round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shock.core.policy import UnitKey


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    key: UnitKey
    scale_factor: int
    previous_gpus: tuple[int, ...] | None  # GPUs of this worker type it had last round


class Placement(Protocol):
    name: str
    description: str

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        """Assign GPU ids (from `servers`, a list of each server's GPU ids of one worker type)
        to every request; the caller guarantees the GPU counts fit."""
        ...
