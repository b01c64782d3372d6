"""Synergy's CSV trace format: `job_id,model_name,arrival_time_s,total_iterations,gpu_demand`.

The header line is required. `model_name` is one of Synergy's profiled models (`res18`,
`gnmt`, ...; see `shock.resources.profiles`) and becomes the job type; `gpu_demand` is the
number of GPUs (the scale factor). Job ids must be unique integers >= 0.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.trace import Trace
from shock.traces.columns import Row, format_number

SYNERGY_COLUMNS = ("job_id", "model_name", "arrival_time_s", "total_iterations", "gpu_demand")
SYNERGY_HEADER = ",".join(SYNERGY_COLUMNS)


class SynergyTraceFormat:
    name = "synergy"
    description = "Synergy's CSV trace: " + SYNERGY_HEADER

    def sniff(self, first_line: str) -> bool:
        return first_line.replace(" ", "").lstrip("\ufeff") == SYNERGY_HEADER

    def read(self, path: Path) -> Trace:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(f"cannot read trace ({exc.strerror})", path=path) from exc
        except UnicodeDecodeError:
            raise InputError("trace is not UTF-8 text", path=path) from None
        reader = csv.reader(text.splitlines())
        jobs: list[JobSpec] = []
        seen: dict[int, int] = {}
        header_seen = False
        for number, fields in enumerate(reader, start=1):
            if not fields or not "".join(fields).strip():
                continue
            if not header_seen:
                names = tuple(field.strip() for field in fields)
                if names != SYNERGY_COLUMNS:
                    raise InputError(
                        f"expected the header {SYNERGY_HEADER}", path=path, line=number
                    )
                header_seen = True
                continue
            if len(fields) != len(SYNERGY_COLUMNS):
                missing = SYNERGY_COLUMNS[len(fields)] if len(fields) < 5 else None
                raise InputError(
                    f"expected {len(SYNERGY_COLUMNS)} comma-separated columns, "
                    f"found {len(fields)}",
                    path=path,
                    line=number,
                    field=missing,
                )
            row = Row(path, number, dict(zip(SYNERGY_COLUMNS, fields, strict=True)))
            job = _job_from_row(row)
            if job.job_id in seen:
                raise row.error(
                    "job_id", f"job id {job.job_id} already used on line {seen[job.job_id]}"
                )
            seen[job.job_id] = number
            jobs.append(job)
        if not jobs:
            raise InputError("trace has no jobs", path=path)
        return Trace(jobs=tuple(jobs), source=str(path), format=self.name)

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None:
        lines = [SYNERGY_HEADER]
        for job in jobs:
            if "," in job.job_type or '"' in job.job_type:
                raise InputError(
                    f"job {job.job_id}: a Synergy model name cannot hold ',' or '\"'",
                    path=path,
                    field="model_name",
                )
            lines.append(
                f"{job.job_id},{job.job_type},{format_number(job.arrival_time)},"
                f"{job.total_steps},{job.scale_factor}"
            )
        try:
            path.write_text("".join(line + "\n" for line in lines))
        except OSError as exc:
            raise InputError(f"cannot write trace ({exc.strerror})", path=path) from exc


def _job_from_row(row: Row) -> JobSpec:
    model = row.text("model_name").strip()
    if not model:
        raise row.error("model_name", "model name is empty")
    return JobSpec(
        job_id=row.integer("job_id", minimum=0),
        job_type=model,
        total_steps=row.integer("total_iterations", minimum=1),
        scale_factor=row.integer("gpu_demand", minimum=1),
        arrival_time=row.number("arrival_time_s", minimum=0.0),
        source_line=row.line,
    )
