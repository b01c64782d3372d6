"""Built-in plugin: static jobs keep their initial batch size."""

from __future__ import annotations

from shock.api import JobSpec, Register, ShockError, hookimpl


class StaticAdaptation:
    name = "static"
    description = "the batch size never changes"

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        if job.batch_size is None:
            raise ShockError(f"job type '{job.job_type}' has no batch size")
        return [job.batch_size] * num_epochs


@hookimpl
def register_adaptations(register: Register) -> None:
    register(StaticAdaptation())
