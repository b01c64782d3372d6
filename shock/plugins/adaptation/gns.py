"""Built-in plugin: gradient-noise-scale (GNS) batch-size growth, with the schedules measured
by Shockwave (bundled adaptation patterns), including its last-epoch rule."""

from __future__ import annotations

from shock.api import JobSpec, Register, ShockError, hookimpl
from shock.plugins.adaptation.patterns import gns_rules


class GnsAdaptation:
    name = "gns"
    description = "GNS: the batch size grows by the measured per-epoch schedule"

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        initial = job.batch_size
        if initial is None:
            raise ShockError(f"job type '{job.job_type}' has no batch size")
        rules = gns_rules()
        schedule = rules.schedules.get((job.model_family, initial, job.scale_factor))
        sizes = [initial] * num_epochs
        if schedule is None or num_epochs <= schedule.min_num_epochs_exclusive:
            return sizes
        last = num_epochs - 1
        for segment in schedule.segments:
            end = num_epochs if segment.end_epoch is None else min(segment.end_epoch, num_epochs)
            for epoch in range(segment.start_epoch, end):
                # Shockwave's quirk, kept: only the first segment may change the last epoch.
                if epoch != last or segment.applies_to_last_epoch:
                    sizes[epoch] = initial * segment.multiplier
        limit = rules.batch_size_limit.get(job.model_family)
        return sizes if limit is None else [min(size, limit) for size in sizes]


@hookimpl
def register_adaptations(register: Register) -> None:
    register(GnsAdaptation())
