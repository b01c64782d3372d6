"""Pollux's workload CSVs (its artifact's `simulator/workloads/workload-<n>.csv`).

A header `name,time,application,num_replicas,batch_size`, then one job per line:

- `name`: the job's name (Pollux writes `<application>-<n>`); names must be unique;
- `time`: its arrival, seconds from the start (>= 0);
- `application`: one of the six applications Pollux measured (bert, cifar10, deepspeech2,
  imagenet, ncf, yolov3; shock.goodput.applications);
- `num_replicas`: the GPUs a non-elastic scheduler gives it (Pollux's tuned baselines);
- `batch_size`: the total batch size it trains with there.

Each line becomes a job with id = its position (0, 1, ...), type `<application> (batch size
<batch_size>)`, scale factor `num_replicas`, and as many steps as the application's
validation run at that batch size (the nearest validated size at or above it) takes to train
its epochs. Every job is elastic: an elastic policy may run it on any GPU count from 1 to
the most its application's batch limits allow (largest validated batch size / smallest
measured per-GPU batch), at any batch size between its application's smallest and largest
validated ones; a policy that is not elastic runs it on `num_replicas` GPUs at `batch_size`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from shock.core.errors import InputError
from shock.core.model import JobSpec, batch_size_of, model_family_of
from shock.core.trace import Trace
from shock.traces.columns import Row

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
POLLUX_HEADER = ",".join(POLLUX_COLUMNS)


def pollux_job_type(application: str, batch_size: int) -> str:
    return f"{application} (batch size {batch_size})"


class PolluxTraceFormat:
    name = "pollux"
    description = "Pollux's workload CSV: " + POLLUX_HEADER

    def sniff(self, first_line: str) -> bool:
        names = first_line.replace(" ", "").lstrip("\ufeff").split(",")
        return tuple(names) == POLLUX_COLUMNS

    def read(self, path: Path) -> Trace:
        return read_pollux_csv(path)

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None:
        lines = [POLLUX_HEADER]
        for job in jobs:
            batch = batch_size_of(job.job_type)
            if batch is None:
                raise InputError(
                    f"job {job.job_id}: its type '{job.job_type}' has no batch size; Pollux's "
                    "form needs '<application> (batch size N)'",
                    path=path,
                    field="batch_size",
                )
            app = model_family_of(job.job_type)
            time = f"{job.arrival_time:g}"
            lines.append(f"{app}-{job.job_id},{time},{app},{job.scale_factor},{batch}")
        try:
            path.write_text("\n".join(lines) + "\n")
        except OSError as exc:
            raise InputError(f"cannot write trace ({exc.strerror})", path=path) from exc


def read_pollux_csv(path: Path) -> Trace:
    from shock.goodput import applications

    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read trace ({exc.strerror})", path=path) from exc
    except UnicodeDecodeError:
        raise InputError("trace is not UTF-8 text", path=path) from None
    jobs: list[JobSpec] = []
    names: dict[str, int] = {}
    header_seen = False
    for number, line in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            fields = [f.strip() for f in next(csv.reader([line]))]
        except csv.Error as exc:
            raise InputError(f"not a CSV line ({exc})", path=path, line=number) from None
        if not header_seen:
            if tuple(fields) != POLLUX_COLUMNS:
                raise InputError(f"expected the header {POLLUX_HEADER}", path=path, line=number)
            header_seen = True
            continue
        if len(fields) != len(POLLUX_COLUMNS):
            missing = POLLUX_COLUMNS[len(fields)] if len(fields) < len(POLLUX_COLUMNS) else None
            raise InputError(
                f"expected {len(POLLUX_COLUMNS)} comma-separated columns, found {len(fields)}",
                path=path,
                line=number,
                field=missing,
            )
        row = Row(path, number, dict(zip(POLLUX_COLUMNS, fields, strict=True)))
        name = row.text("name")
        if not name:
            raise row.error("name", "a job needs a name")
        if name in names:
            raise row.error("name", f"name '{name}' already used on line {names[name]}")
        names[name] = number
        app_name = row.text("application")
        if app_name not in applications.MAX_EPOCHS:
            known = ", ".join(applications.names())
            raise row.error("application", f"unknown application '{app_name}' (known: {known})")
        replicas = row.integer("num_replicas", minimum=1)
        batch = row.integer("batch_size", minimum=1)
        app = applications.application(app_name)
        jobs.append(
            JobSpec(
                job_id=len(jobs),
                job_type=pollux_job_type(app_name, batch),
                total_steps=app.steps_to_finish(batch),
                scale_factor=replicas,
                arrival_time=row.number("time", minimum=0.0),
                source_line=number,
                elastic=True,
            )
        )
    if not jobs:
        raise InputError("trace has no jobs", path=path)
    return Trace(jobs=tuple(jobs), source=str(path), format="pollux")
