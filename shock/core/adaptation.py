"""Adaptation models: how a job's batch size changes epoch by epoch while it trains."""

from __future__ import annotations

from typing import Protocol

from shock.core.model import JobSpec


class AdaptationModel(Protocol):
    name: str
    description: str

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        """The batch size of each of the job's epochs."""
        ...
