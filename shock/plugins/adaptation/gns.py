"""Built-in plugin: gradient-noise-scale (GNS) batch-size growth, with the schedules measured
by Shockwave (bundled adaptation patterns), including its last-epoch rule."""

from __future__ import annotations

from collections.abc import Iterator

from shock.api import JobSpec, Register, ShockError, hookimpl
from shock.plugins.adaptation.patterns import GnsSchedule, gns_rules


class GnsAdaptation:
    name = "gns"
    description = "GNS: the batch size grows by the measured per-epoch schedule"

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        initial, schedule, limit = _schedule_of(job)
        sizes = [initial] * num_epochs
        if schedule is None or num_epochs <= schedule.min_num_epochs_exclusive:
            return sizes
        if limit is not None and initial > limit:
            sizes = [limit] * num_epochs
        last = num_epochs - 1
        # Each segment's epochs as one slice: the artifact simulator asks for patterns of
        # thousands of epochs, round after round.
        for start, end, size, applies_to_last in _segments(schedule, initial, limit, num_epochs):
            if start < 0:  # (counted from the end, as Python indexes: one at a time)
                for epoch in range(start, end):
                    if epoch != last or applies_to_last:
                        sizes[epoch] = size
                continue
            # Shockwave's quirk, kept: only the first segment may change the last epoch.
            if end == num_epochs and not applies_to_last:
                end = last
            if start < end:
                sizes[start:end] = [size] * (end - start)
        return sizes

    def batch_size_at(self, job: JobSpec, num_epochs: int, epoch: int) -> int:
        """`batch_sizes(job, num_epochs)[epoch]` without building the list: Shockwave's
        simulator asks for two epochs of a pattern thousands of epochs long, whose length
        grows round after round (0 <= epoch < num_epochs)."""
        initial, schedule, limit = _schedule_of(job)
        if schedule is None or num_epochs <= schedule.min_num_epochs_exclusive:
            return initial
        if any(segment.start_epoch < -num_epochs for segment in schedule.segments):
            return self.batch_sizes(job, num_epochs)[epoch]  # (it raises, as indexing does)
        found = limit if limit is not None and initial > limit else initial
        last = num_epochs - 1
        # The segments in order, the last one that writes this epoch wins (as batch_sizes).
        for start, end, size, applies_to_last in _segments(schedule, initial, limit, num_epochs):
            if start < 0:
                # Epochs e in range(start, end) write sizes[e], the last one spared only when
                # e == last itself (not when e is -1).
                own = start <= epoch < end and (epoch != last or applies_to_last)
                if own or start <= epoch - num_epochs < end:
                    found = size
                continue
            if end == num_epochs and not applies_to_last:
                end = last
            if start <= epoch < end:
                found = size
        return found


def _schedule_of(job: JobSpec) -> tuple[int, GnsSchedule | None, int | None]:
    """The job's initial batch size, its measured schedule (None: it never changes) and its
    family's batch-size limit."""
    initial = job.batch_size
    if initial is None:
        raise ShockError(f"job type '{job.job_type}' has no batch size")
    rules = gns_rules()
    schedule = rules.schedules.get((job.model_family, initial, job.scale_factor))
    return initial, schedule, rules.batch_size_limit.get(job.model_family)


def _segments(
    schedule: GnsSchedule, initial: int, limit: int | None, num_epochs: int
) -> Iterator[tuple[int, int, int, bool]]:
    """Each segment of the schedule as (start, end clipped to the pattern, its batch size
    under the limit, whether it may change the last epoch)."""
    for segment in schedule.segments:
        end = num_epochs if segment.end_epoch is None else min(segment.end_epoch, num_epochs)
        size = initial * segment.multiplier
        if limit is not None:
            size = min(size, limit)
        yield segment.start_epoch, end, size, segment.applies_to_last_epoch


@hookimpl
def register_adaptations(register: Register) -> None:
    register(GnsAdaptation())
