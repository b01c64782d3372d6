"""Gavel's 10-column tab-separated trace format."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shock.core.model import JobSpec
from shock.core.trace import Trace
from shock.traces.columns import (
    Row,
    format_number,
    format_slo,
    parse_slo,
    read_rows,
    write_lines,
)

GAVEL_COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)


def job_from_row(
    row: Row, job_id: int, mode: str = "static", duration: float | None = None
) -> JobSpec:
    """The columns Gavel and Shockwave traces share."""
    job_type = row.text("job_type").strip()
    if not job_type:
        raise row.error("job_type", "job type is empty")
    return JobSpec(
        job_id=job_id,
        job_type=job_type,
        command=row.text("command"),
        working_directory=row.text("working_directory"),
        num_steps_arg=row.text("num_steps_arg"),
        needs_data_dir=row.boolean("needs_data_dir"),
        total_steps=row.integer("total_steps", minimum=1),
        scale_factor=row.integer("scale_factor", minimum=1),
        priority_weight=row.number("priority_weight", minimum=0.0, strict=True),
        slo=parse_slo(row, "SLO"),
        arrival_time=row.number("arrival_time", minimum=0.0),
        mode=mode,
        duration=duration,
        source_line=row.line,
    )


def common_fields(job: JobSpec) -> list[str]:
    return [
        job.job_type,
        job.command,
        job.working_directory,
        job.num_steps_arg,
        "1" if job.needs_data_dir else "0",
        str(job.total_steps),
        str(job.scale_factor),
    ]


class GavelTraceFormat:
    name = "gavel"
    description = "Gavel's 10-column tab-separated trace (.trace)"

    def sniff(self, first_line: str) -> bool:
        return len(first_line.split("\t")) == len(GAVEL_COLUMNS)

    def read(self, path: Path) -> Trace:
        jobs = tuple(
            job_from_row(row, index) for index, row in enumerate(read_rows(path, GAVEL_COLUMNS))
        )
        return Trace(jobs=jobs, source=str(path), format=self.name)

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None:
        lines = [
            "\t".join(
                [
                    *common_fields(job),
                    format_number(job.priority_weight),
                    format_slo(job.slo),
                    format_number(job.arrival_time),
                ]
            )
            for job in jobs
        ]
        write_lines(path, lines)
