"""Alibaba PAI 2020 (`pai_job_table.csv` and `pai_task_table.csv`), with or without a header.

- job table: `job_name, inst_id, user, status, start_time, end_time`
- task table: `job_name, task_name, inst_num, status, start_time, end_time, plan_cpu,
  plan_mem, plan_gpu, gpu_type`

A job's GPU request is the sum over its tasks of `plan_gpu` (percent of one GPU per instance)
× `inst_num`, divided by 100; its CPU request the same sum of `plan_cpu` (percent of a core),
its memory the sum of `plan_mem` (GB) × `inst_num`. It arrives at the job table's
`start_time` (the submission time) and runs from its first task's launch (`start_time` in the
task table) to its last task's `end_time`, so the time it waited to launch is not run time.
Jobs whose tasks ask no GPU, or lack those times, are dropped. The two files may come in
either order: the importer tells them apart by their column count.

The task table is read first, line by line, and summed per job; then the job table is read
line by line and joined.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import InputError
from shock.traces.importers.records import RawJob, ReadCounts, csv_records

PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = (
    "job_name", "task_name", "inst_num", "status", "start_time", "end_time",
    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type",
)
PAI_STATUSES = ("Terminated", "Failed", "Running", "Waiting")


@dataclass(frozen=True, slots=True)
class PaiOptions:
    statuses: tuple[str, ...] = ("Terminated",)


@dataclass(slots=True)
class _Request:
    gpu_percent: float = 0.0
    cpu_percent: float = 0.0
    memory_gb: float = 0.0
    launched: float = math.inf  # the first task's launch
    ended: float = -math.inf  # the last task's end


def read_pai2020(paths: list[Path], options: PaiOptions, counts: ReadCounts) -> Iterator[RawJob]:
    job_table, task_table = _tables(paths)
    requests: dict[str, _Request] = {}
    for record in csv_records(task_table, PAI_TASK_COLUMNS, header="optional"):
        instances = record.number("inst_num", empty=1.0)
        if instances < 0:
            raise record.error("inst_num", f"must be >= 0, got {instances:g}")
        request = requests.setdefault(record.text("job_name"), _Request())
        for column, attribute in (
            ("plan_gpu", "gpu_percent"),
            ("plan_cpu", "cpu_percent"),
            ("plan_mem", "memory_gb"),
        ):
            amount = record.number(column, empty=0.0)
            if amount < 0:
                raise record.error(column, f"must be >= 0, got {amount:g}")
            setattr(request, attribute, getattr(request, attribute) + amount * instances)
        launched, ended = record.time("start_time"), record.time("end_time")
        if launched is not None:
            request.launched = min(request.launched, launched)
        if ended is not None:
            request.ended = max(request.ended, ended)
    keep_any = "any" in options.statuses
    for record in csv_records(job_table, PAI_JOB_COLUMNS, header="optional"):
        counts.read += 1
        status = record.text("status")
        if not keep_any and status not in options.statuses:
            counts.drop(f"status {status}")
            continue
        submitted = record.time("start_time")
        asked = requests.get(record.text("job_name"))
        if asked is None or asked.gpu_percent <= 0:
            counts.drop("no GPU")
            continue
        if submitted is None or math.isinf(asked.launched) or math.isinf(asked.ended):
            counts.drop("no submission, launch or end time")
            continue
        yield RawJob(
            name=record.text("job_name"),
            submit_s=submitted,
            duration_s=asked.ended - asked.launched,
            gpus=round(asked.gpu_percent / 100.0, 6),
            user=record.text("user") or None,
            cpus=round(asked.cpu_percent / 100.0, 6) or None,
            memory_gb=round(asked.memory_gb, 6) or None,
        )


def _tables(paths: list[Path]) -> tuple[Path, Path]:
    if len(paths) != 2:
        raise InputError(
            f"pai2020 takes two files, pai_job_table.csv and pai_task_table.csv; got {len(paths)}"
        )
    widths = {path: _width(path) for path in paths}
    jobs = [p for p in paths if widths[p] == len(PAI_JOB_COLUMNS)]
    tasks = [p for p in paths if widths[p] == len(PAI_TASK_COLUMNS)]
    if len(jobs) != 1 or len(tasks) != 1:
        found = ", ".join(f"{path}: {widths[path]}" for path in paths)
        raise InputError(
            f"expected a job table ({len(PAI_JOB_COLUMNS)} columns) and a task table "
            f"({len(PAI_TASK_COLUMNS)} columns); columns found: {found}"
        )
    return jobs[0], tasks[0]


def _width(path: Path) -> int:
    from shock.traces.importers.records import first_csv_line

    return len(first_csv_line(path))
