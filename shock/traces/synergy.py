"""Synergy's CSV traces, in two forms.

- shock's form (`synergy`): a header line `job_id,model_name,arrival_time_s,total_iterations,
  gpu_demand`, optionally followed by the columns `entity`, `cpus` and `memory_gb` (in any
  order after the five), then one job per line.
- Synergy's own record form (`synergy-record`): what Synergy's simulator writes with
  `--record_trace` and reads with `--replay_trace`: the same five columns and no header.
  Its `model_name` is one of Synergy's models, its `total_iterations` an integer.

`model_name` becomes the job type (one of Synergy's profiled models `res18`, `gnmt`, ...; see
`shock.resources.profiles`, or a Gavel job type in shock's form); `gpu_demand` is the number of
GPUs (the scale factor). Job ids must be unique integers >= 0. `entity` names the user or group
of the job (hierarchical policies; empty: none); `cpus` and `memory_gb` the CPU cores and GB of
DRAM the job asked for in all (empty: its model's profile decides).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.trace import Trace
from shock.traces.columns import Row, format_number

SYNERGY_COLUMNS = ("job_id", "model_name", "arrival_time_s", "total_iterations", "gpu_demand")
SYNERGY_HEADER = ",".join(SYNERGY_COLUMNS)
# Columns shock's form may add after the five: entity, and the job's CPU and memory requests.
OPTIONAL_COLUMNS = ("entity", "cpus", "memory_gb")


def _synergy_models() -> frozenset[str]:
    from shock.resources.profiles import synergy_profiles

    return frozenset(synergy_profiles())


def is_record_line(line: str) -> bool:
    """Whether a line looks like one of Synergy's recorded jobs: five comma-separated values,
    an integer id, one of Synergy's model names, a number, then two integers."""
    fields = [field.strip() for field in line.lstrip("\ufeff").split(",")]
    if len(fields) != len(SYNERGY_COLUMNS):
        return False
    job_id, model, arrival, iterations, gpus = fields
    if model not in _synergy_models():
        return False
    try:
        float(arrival)
        return all(int(float(value)) >= 0 for value in (job_id, iterations, gpus))
    except ValueError:
        return False


class SynergyTraceFormat:
    """shock's form, with a header; reads Synergy's headerless record form too."""

    name = "synergy"
    description = (
        "Synergy's CSV trace with a header: " + SYNERGY_HEADER + "[,entity,cpus,memory_gb]"
    )

    def sniff(self, first_line: str) -> bool:
        names = first_line.replace(" ", "").lstrip("\ufeff").split(",")
        return (
            tuple(names[: len(SYNERGY_COLUMNS)]) == SYNERGY_COLUMNS
            and all(name in OPTIONAL_COLUMNS for name in names[len(SYNERGY_COLUMNS) :])
        )

    def read(self, path: Path) -> Trace:
        return read_synergy_csv(path)

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None:
        extra = [
            column
            for column, used in (
                ("entity", any(job.entity is not None for job in jobs)),
                ("cpus", any(job.cpus is not None for job in jobs)),
                ("memory_gb", any(job.memory_gb is not None for job in jobs)),
            )
            if used
        ]
        lines = [",".join((*SYNERGY_COLUMNS, *extra))]
        for job in jobs:
            _check_text(job.job_type, job, path, "model_name")
            values = _base_values(job)
            for column in extra:
                values.append(_optional_value(job, column, path))
            lines.append(",".join(values))
        _write(path, lines)


class SynergyRecordFormat(SynergyTraceFormat):
    """Synergy's own record form: no header, Synergy's model names, integer iterations."""

    name = "synergy-record"
    description = "Synergy's recorded trace (--record_trace), no header: " + SYNERGY_HEADER

    def sniff(self, first_line: str) -> bool:
        return is_record_line(first_line)

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None:
        models = _synergy_models()
        lines = []
        for job in jobs:
            if job.job_type not in models:
                raise InputError(
                    f"job {job.job_id}: Synergy's record form holds Synergy's models only "
                    f"({', '.join(sorted(models))}), not '{job.job_type}'",
                    path=path,
                    field="model_name",
                )
            lines.append(",".join(_base_values(job)))
        _write(path, lines)


def read_synergy_csv(path: Path) -> Trace:
    """Either form: a first line that is a header makes shock's form, else Synergy's."""
    jobs: list[JobSpec] = []
    seen: dict[int, int] = {}
    columns: tuple[str, ...] | None = None
    record_form = False
    models = _synergy_models()
    for number, fields in _csv_lines(path):
        if columns is None:
            names = tuple(field.strip() for field in fields)
            if names[: len(SYNERGY_COLUMNS)] == SYNERGY_COLUMNS:
                _check_optional(names, path, number)
                columns = names
                continue
            if not is_record_line(",".join(fields)):
                raise InputError(
                    f"expected the header {SYNERGY_HEADER} (shock's form) or a job line of "
                    "Synergy's record form (id, one of Synergy's models, arrival, iterations, "
                    "GPUs)",
                    path=path,
                    line=number,
                )
            columns = SYNERGY_COLUMNS
            record_form = True
        if len(fields) != len(columns):
            missing = columns[len(fields)] if len(fields) < len(columns) else None
            raise InputError(
                f"expected {len(columns)} comma-separated columns, found {len(fields)}",
                path=path,
                line=number,
                field=missing,
            )
        row = Row(path, number, dict(zip(columns, fields, strict=True)))
        job = _job_from_row(row)
        if record_form and job.job_type not in models:
            raise row.error(
                "model_name",
                f"'{job.job_type}' is not one of Synergy's models ({', '.join(sorted(models))})",
            )
        if job.job_id in seen:
            raise row.error(
                "job_id", f"job id {job.job_id} already used on line {seen[job.job_id]}"
            )
        seen[job.job_id] = number
        jobs.append(job)
    if not jobs:
        raise InputError("trace has no jobs", path=path)
    return Trace(
        jobs=tuple(jobs),
        source=str(path),
        format="synergy-record" if record_form else "synergy",
    )


def _csv_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Each non-blank line, split, with its line number; read one line at a time."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read trace ({exc.strerror})", path=path) from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("line is not UTF-8 text", path=path, line=number) from None
            if number == 1:
                line = line.lstrip("\ufeff")
            if not line.strip():
                continue
            try:
                fields = next(csv.reader([line]))
            except csv.Error as exc:
                raise InputError(f"not a CSV line ({exc})", path=path, line=number) from None
            yield number, fields


def _check_optional(names: tuple[str, ...], path: Path, line: int) -> None:
    extra = names[len(SYNERGY_COLUMNS) :]
    unknown = [name for name in extra if name not in OPTIONAL_COLUMNS]
    if unknown or len(set(extra)) != len(extra):
        raise InputError(
            f"unknown or repeated column(s) after the five of {SYNERGY_HEADER}: "
            f"{', '.join(unknown or extra)} (optional columns: {', '.join(OPTIONAL_COLUMNS)})",
            path=path,
            line=line,
        )


def _job_from_row(row: Row) -> JobSpec:
    model = row.text("model_name").strip()
    if not model:
        raise row.error("model_name", "model name is empty")
    entity = row.values.get("entity", "").strip() or None
    return JobSpec(
        job_id=row.integer("job_id", minimum=0),
        job_type=model,
        total_steps=row.integer("total_iterations", minimum=1),
        scale_factor=row.integer("gpu_demand", minimum=1),
        arrival_time=row.number("arrival_time_s", minimum=0.0),
        source_line=row.line,
        entity=entity,
        cpus=_optional_amount(row, "cpus"),
        memory_gb=_optional_amount(row, "memory_gb"),
    )


def _optional_amount(row: Row, column: str) -> float | None:
    if not row.values.get(column, "").strip():
        return None
    return row.number(column, minimum=0.0)


def _base_values(job: JobSpec) -> list[str]:
    return [
        str(job.job_id),
        job.job_type,
        format_number(job.arrival_time),
        str(job.total_steps),
        str(job.scale_factor),
    ]


def _optional_value(job: JobSpec, column: str, path: Path) -> str:
    if column == "entity":
        if job.entity is None:
            return ""
        _check_text(job.entity, job, path, "entity")
        return job.entity
    amount = job.cpus if column == "cpus" else job.memory_gb
    return "" if amount is None else format_number(amount)


def _check_text(text: str, job: JobSpec, path: Path, column: str) -> None:
    if "," in text or '"' in text or "\n" in text:
        raise InputError(
            f"job {job.job_id}: a Synergy CSV {column} cannot hold ',', '\"' or a line break",
            path=path,
            field=column,
        )


def _write(path: Path, lines: list[str]) -> None:
    try:
        path.write_text("".join(line + "\n" for line in lines))
    except OSError as exc:
        raise InputError(f"cannot write trace ({exc.strerror})", path=path) from exc
