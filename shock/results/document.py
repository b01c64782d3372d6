"""Reading a results document back (`shock run --json FILE`, a sweep's cells/*.json).

`load_result(path)` gives a typed `ResultDocument`; anything that is not a results document
is a clear error naming the file and the field. Both layouts are read (docs/results.md):
version 2, whose timeline is in a side-car of arrays beside the JSON, and version 1, whose
timeline is inline. `version_1_document(path)` gives any document in the version-1 layout,
for tools written for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shock.core.errors import InputError
from shock.core.results import INLINE_SCHEMA_VERSION, SCHEMA_VERSION
from shock.core.timeline import JobTimeline, Rounds, Segment, Timeline
from shock.core.timeline_columns import TimelineArraysError, timeline_from_arrays

# Keys every results document has (`shock.core.results.RunResult.to_document`).
_REQUIRED = ("policy", "backend", "metrics", "jobs")


@dataclass(frozen=True, slots=True)
class JobResult:
    job_id: int
    arrival_s: float
    completion_s: float
    jct_s: float
    ftf_rho: float | None  # None: the job had no isolated time


@dataclass(frozen=True, slots=True)
class ResultDocument:
    path: Path
    label: str  # how tables and figures name the run: the file's stem
    policy: str
    backend: str
    solver: str
    trace: str
    cluster: str
    preset: str
    placement: str
    adaptation_rules: str
    # Metric name -> value, in the document's order (None: not finite, e.g. rho without
    # an isolated time).
    metrics: dict[str, float | None]
    jobs: tuple[JobResult, ...]
    unfinished_jobs: int
    timeline: Timeline | None  # absent from documents written before timelines existed


def load_result(path: str | Path) -> ResultDocument:
    """The results document at `path`; a `ShockError` naming the file when it is missing,
    not JSON, or not a results document."""
    path = Path(path)
    return parse_result(_read_json(path), path)


def version_1_document(path: str | Path) -> dict[str, Any]:
    """The document at `path` in the version-1 layout (the timeline inline as JSON, as
    `RunResult.to_document` gives it): the same content whichever layout the file has."""
    path = Path(path)
    data = _read_json(path)
    _check(data, path)
    if data.get("schema_version", INLINE_SCHEMA_VERSION) == INLINE_SCHEMA_VERSION:
        return data
    document = {**data, "schema_version": INLINE_SCHEMA_VERSION}
    reference = _sidecar_reference(data.get("timeline"))
    if reference is not None:
        document["timeline"] = _sidecar_timeline(reference, path).to_json()
    return document


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read it ({exc.strerror or exc})", path=path) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"not JSON ({exc})", path=path) from None


def _check(data: object, path: Path) -> dict[str, Any]:
    if not isinstance(data, dict) or any(key not in data for key in _REQUIRED):
        raise InputError(
            "not a shock results document (written by `shock run --json FILE`): "
            f"it needs the keys {', '.join(_REQUIRED)}",
            path=path,
        )
    version = data.get("schema_version", INLINE_SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise InputError(
            f"schema version {version!r} is newer than this shock reads ({SCHEMA_VERSION}); "
            "upgrade shock",
            path=path,
            field="schema_version",
        )
    return data


def _sidecar_reference(timeline: object) -> str | None:
    """The side-car's file name when the timeline is one (version 2), else None."""
    if isinstance(timeline, dict) and "file" in timeline and "rounds" not in timeline:
        return str(timeline["file"])
    return None


def _sidecar_timeline(name: str, path: Path) -> Timeline:
    """The timeline in the side-car `name` beside the document at `path`."""
    sidecar = path.parent / name
    try:
        with np.load(sidecar, allow_pickle=False) as arrays:
            return timeline_from_arrays({key: arrays[key] for key in arrays.files})
    except FileNotFoundError:
        raise InputError(
            f"its timeline's side-car {name} is missing (keep it beside the document)",
            path=path,
            field="timeline.file",
        ) from None
    except TimelineArraysError as exc:
        raise InputError(f"malformed ({exc})", path=sidecar) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"not a timeline side-car (.npz): {exc}", path=sidecar) from None


def parse_result(data: object, path: Path) -> ResultDocument:
    """A parsed JSON value as a results document (`path` names it in errors, and its folder
    holds a version-2 document's side-car)."""
    data = _check(data, path)
    metrics = _object(data, "metrics", path)
    values: dict[str, float | None] = {}
    for name, value in metrics.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InputError("not a number", path=path, field=f"metrics.{name}")
        values[name] = None if value is None else float(value)
    jobs = _list(data, "jobs", path)
    timeline = data.get("timeline")
    return ResultDocument(
        path=path,
        label=path.stem,
        policy=str(data["policy"]),
        backend=str(data["backend"]),
        solver=str(data.get("solver", "")),
        trace=str(data.get("trace", "")),
        cluster=str(data.get("cluster", "")),
        preset=str(data.get("preset", "")),
        placement=str(data.get("placement", "")),
        adaptation_rules=str(data.get("adaptation_rules", "")),
        metrics=values,
        jobs=tuple(_job(job, path, f"jobs[{k}]") for k, job in enumerate(jobs)),
        unfinished_jobs=int(data.get("unfinished_jobs", 0)),
        timeline=_any_timeline(timeline, path),
    )


def _any_timeline(timeline: object, path: Path) -> Timeline | None:
    if timeline is None:
        return None
    reference = _sidecar_reference(timeline)
    if reference is not None:
        return _sidecar_timeline(reference, path)
    return _timeline(timeline, path)


def _object(data: dict[str, Any], key: str, path: Path, where: str = "") -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise InputError("expected an object", path=path, field=where + key)
    return value


def _list(data: dict[str, Any], key: str, path: Path, where: str = "") -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise InputError("expected a list", path=path, field=where + key)
    return value


def _job(job: object, path: Path, where: str) -> JobResult:
    try:
        if not isinstance(job, dict):
            raise TypeError
        rho = job.get("ftf_rho")
        return JobResult(
            int(job["id"]),
            float(job["arrival_s"]),
            float(job["completion_s"]),
            float(job["jct_s"]),
            None if rho is None else float(rho),
        )
    except (KeyError, TypeError, ValueError):
        raise InputError(
            "expected an object with id, arrival_s, completion_s, jct_s", path=path, field=where
        ) from None


def _timeline(data: object, path: Path) -> Timeline:
    where = "timeline"
    if not isinstance(data, dict):
        raise InputError("expected an object", path=path, field=where)
    try:
        worker_types = tuple(str(w) for w in data["worker_types"])
        capacity = tuple(int(c) for c in data["capacity"])
        rounds = data["rounds"]
        time_s = tuple(float(v) for v in rounds["time_s"])
        busy = tuple(tuple(int(g) for g in row) for row in rounds["busy_gpus"])
        queued = tuple(int(v) for v in rounds["queued"])
        running = tuple(int(v) for v in rounds["running"])
        solve_s = tuple(float(v) for v in rounds["solve_s"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"malformed ({_reason(exc)})", path=path, field=where) from None
    if len(capacity) != len(worker_types):
        raise InputError("needs one capacity per worker type", path=path, field=f"{where}.capacity")
    lengths = {len(time_s), len(busy), len(queued), len(running), len(solve_s)}
    if len(lengths) != 1:
        raise InputError(
            "its lists need one entry per round each", path=path, field=f"{where}.rounds"
        )
    jobs = []
    for k, job in enumerate(data.get("jobs", ())):
        try:
            segments = tuple(
                Segment(float(start), float(end), str(worker_type), int(gpus))
                for start, end, worker_type, gpus in job["segments"]
            )
            sizes = tuple((float(t), int(size)) for t, size in job["batch_sizes"])
            job_id, job_type, scale = int(job["id"]), str(job["job_type"]), job["scale_factor"]
            jobs.append(JobTimeline(job_id, job_type, int(scale), segments, sizes))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"malformed ({_reason(exc)})", path=path, field=f"{where}.jobs[{k}]"
            ) from None
    return Timeline(
        worker_types, capacity, Rounds(time_s, busy, queued, running, solve_s), tuple(jobs)
    )


def _reason(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
