"""Adaptation models: how a job's batch size changes epoch by epoch while it trains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from shock.core.model import JobSpec

if TYPE_CHECKING:
    from shock.core.plugins import PluginRegistry
    from shock.core.throughputs import ThroughputTable
    from shock.engine.dynamics import BatchSchedule
    from shock.engine.mechanism import Mechanism
    from shock.engine.units import JobState


class AdaptationModel(Protocol):
    name: str
    description: str

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        """The batch size of each of the job's epochs."""
        ...


class BatchSizeRules(Protocol):
    """One run's batch-size dynamics for simulated jobs: when an active job switches batch
    size. The engine calls it at round boundaries; it changes jobs through the mechanism."""

    def after_run(self, mechanism: Mechanism, job: JobState) -> None:
        """The job ran this round, was credited and is still active."""
        ...

    def at_round_end(self, mechanism: Mechanism) -> None:
        """Every job of the round was credited."""
        ...


class AdaptationRules(Protocol):
    """How simulated jobs' batch sizes evolve (`--adaptation-rules`): a plugin kind of its
    own, since several rule sets can drive the same adaptation models."""

    name: str
    description: str

    def for_run(
        self,
        jobs: Sequence[JobSpec],
        schedules: Mapping[int, BatchSchedule],
        registry: PluginRegistry,
        table: ThroughputTable,
        worker_types: tuple[str, ...],
    ) -> BatchSizeRules | None:
        """The rules one run uses; None when they would never change a batch size (the
        engine then skips them every round)."""
        ...
