"""Built-in plugin: the two rule sets for how simulated jobs change batch size.

`profile` (the default) follows each job's per-epoch schedule from its adaptation model, as
Shockwave's profile generator draws it; `artifact-simulator` evolves batch sizes as Shockwave's
own round-by-round simulator does (see artifact_simulator.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shock.api import (
    BatchSchedule,
    JobSpec,
    JobState,
    Mechanism,
    PluginRegistry,
    Register,
    ThroughputTable,
    follow_schedule,
    hookimpl,
)
from shock.plugins.adaptation.artifact_simulator import ArtifactBatchDynamics


class _FollowSchedules:
    def __init__(self, schedules: Mapping[int, BatchSchedule]) -> None:
        self._schedules = schedules

    def after_run(self, mechanism: Mechanism, job: JobState) -> None:
        schedule = self._schedules.get(job.job_id)
        if schedule is not None:
            follow_schedule(mechanism, job, schedule)

    def at_round_end(self, mechanism: Mechanism) -> None:
        return None


class ProfileRules:
    name = "profile"
    description = "each job follows its adaptation model's per-epoch batch sizes (the default)"

    def for_run(
        self,
        jobs: Sequence[JobSpec],
        schedules: Mapping[int, BatchSchedule],
        registry: PluginRegistry,
        table: ThroughputTable,
        worker_types: tuple[str, ...],
    ) -> _FollowSchedules | None:
        # No job with a schedule (a static trace): nothing ever switches batch size.
        return _FollowSchedules(schedules) if schedules else None


class _ArtifactRules:
    def __init__(self, dynamics: ArtifactBatchDynamics) -> None:
        self._dynamics = dynamics

    def after_run(self, mechanism: Mechanism, job: JobState) -> None:
        self._dynamics.apply_pending(mechanism, job)

    def at_round_end(self, mechanism: Mechanism) -> None:
        self._dynamics.decide(mechanism.active.values())


class ArtifactSimulatorRules:
    name = "artifact-simulator"
    description = "batch sizes evolve as in Shockwave's round-by-round simulator"

    def for_run(
        self,
        jobs: Sequence[JobSpec],
        schedules: Mapping[int, BatchSchedule],
        registry: PluginRegistry,
        table: ThroughputTable,
        worker_types: tuple[str, ...],
    ) -> _ArtifactRules:
        def has_throughput(job_type: str, scale_factor: int) -> bool:
            return any(table.throughput(job_type, scale_factor, w) > 0 for w in worker_types)

        return _ArtifactRules(ArtifactBatchDynamics(jobs, registry, has_throughput))


@hookimpl
def register_adaptation_rules(register: Register) -> None:
    register(ProfileRules())
    register(ArtifactSimulatorRules())
