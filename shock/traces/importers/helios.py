"""SenseTime Helios (`cluster_log.csv`, one file per cluster): one job per line, with a header.

Columns used: `job_id`, `user`, `vc`, `gpu_num`, `cpu_num`, `state`, `submit_time`,
`duration` (seconds). Jobs with no GPU (`gpu_num` 0: CPU jobs) are dropped, as the Helios
artifact's GPU-job analyses do. The run time is `duration` as recorded; `cpu_num` is carried
as the job's CPU request. Times are seconds or date-times (`2020-04-01 00:00:11`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shock.traces.importers.records import RawJob, ReadCounts, csv_records

HELIOS_COLUMNS = (
    "job_id", "user", "vc", "gpu_num", "cpu_num", "state", "submit_time", "duration",
)
HELIOS_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")


@dataclass(frozen=True, slots=True)
class HeliosOptions:
    statuses: tuple[str, ...] = ("COMPLETED",)


def read_helios(paths: list[Path], options: HeliosOptions, counts: ReadCounts) -> Iterator[RawJob]:
    keep_any = "any" in options.statuses
    for path in paths:
        for record in csv_records(path, HELIOS_COLUMNS):
            counts.read += 1
            state = record.text("state")
            if not keep_any and state not in options.statuses:
                counts.drop(f"state {state}")
                continue
            submitted = record.time("submit_time")
            if submitted is None:
                counts.drop("no submission time")
                continue
            cpus = record.optional_number("cpu_num")
            yield RawJob(
                name=record.text("job_id"),
                submit_s=submitted,
                duration_s=record.number("duration", empty=0.0),
                gpus=record.number("gpu_num"),
                user=record.text("user") or None,
                vc=record.text("vc") or None,
                cpus=cpus if cpus else None,
            )
