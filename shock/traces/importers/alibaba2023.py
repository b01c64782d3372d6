"""Alibaba GPU cluster 2023 (`openb_pod_list_*.csv`): one pod per line, with a header.

Columns used: `name`, `cpu_milli`, `memory_mib`, `num_gpu`, `gpu_milli`, `pod_phase`,
`creation_time`, `deletion_time`, `scheduled_time` (seconds). A pod is a job: it arrives at
`creation_time` and runs from `scheduled_time` to `deletion_time`; pods never scheduled or
never deleted are dropped. Its GPU count is `num_gpu`, or `gpu_milli`/1000 of one GPU for a
pod that shares one (`num_gpu` 1, `gpu_milli` < 1000: rounded up to a whole GPU, or dropped
with `--fractional drop`); pods with no GPU are dropped. `cpu_milli`/1000 cores and
`memory_mib`/1024 GB are carried as the job's CPU and memory requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shock.traces.importers.records import RawJob, ReadCounts, csv_records

OPENB_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)
OPENB_PHASES = ("Succeeded", "Running", "Failed", "Pending")


@dataclass(frozen=True, slots=True)
class OpenbOptions:
    statuses: tuple[str, ...] = ("any",)


def read_alibaba2023(
    paths: list[Path], options: OpenbOptions, counts: ReadCounts
) -> Iterator[RawJob]:
    keep_any = "any" in options.statuses
    for path in paths:
        for record in csv_records(path, OPENB_COLUMNS):
            counts.read += 1
            phase = record.text("pod_phase")
            if not keep_any and phase not in options.statuses:
                counts.drop(f"phase {phase}")
                continue
            created = record.time("creation_time")
            scheduled = record.time("scheduled_time")
            deleted = record.time("deletion_time")
            if created is None or scheduled is None or deleted is None:
                counts.drop("never scheduled or never deleted")
                continue
            gpus = record.number("num_gpu", empty=0.0)
            milli = record.number("gpu_milli", empty=0.0)
            if gpus == 1 and 0 < milli < 1000:
                gpus = milli / 1000.0
            yield RawJob(
                name=record.text("name"),
                submit_s=created,
                duration_s=deleted - scheduled,
                gpus=gpus,
                cpus=record.number("cpu_milli", empty=0.0) / 1000.0 or None,
                memory_gb=record.number("memory_mib", empty=0.0) / 1024.0 or None,
            )
