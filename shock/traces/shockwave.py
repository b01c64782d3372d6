"""Shockwave's 12-column trace format: Gavel's columns plus adaptation mode and duration."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shock.core.model import JobSpec
from shock.core.trace import Trace
from shock.traces.columns import format_number, format_slo, read_rows, write_lines
from shock.traces.gavel import common_fields, job_from_row

SHOCKWAVE_COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "mode",
    "priority_weight",
    "SLO",
    "duration",
    "arrival_time",
)
MODES = ("static", "accordion", "gns")


class ShockwaveTraceFormat:
    name = "shockwave"
    description = "Shockwave's 12-column trace with adaptation mode (static/accordion/gns)"

    def sniff(self, first_line: str) -> bool:
        return len(first_line.split("\t")) == len(SHOCKWAVE_COLUMNS)

    def read(self, path: Path) -> Trace:
        jobs = []
        for index, row in enumerate(read_rows(path, SHOCKWAVE_COLUMNS)):
            mode = row.choice("mode", MODES)
            duration = row.number("duration", minimum=0.0)
            jobs.append(job_from_row(row, index, mode=mode, duration=duration))
        return Trace(jobs=tuple(jobs), source=str(path), format=self.name)

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None:
        lines = []
        for job in jobs:
            duration = job.duration if job.duration is not None else 0.0
            fields = [
                *common_fields(job),
                job.mode,
                format_number(job.priority_weight),
                format_slo(job.slo),
                format_number(duration),
                format_number(job.arrival_time),
            ]
            lines.append("\t".join(fields))
        write_lines(path, lines)
