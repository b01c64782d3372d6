"""What the figures read from a results document (`shock run --json`): the run's identity,
metrics, per-job results and, when present, the timeline of rounds and job segments."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shock.core.errors import InputError

SETUP_KEYS = ("policy", "backend", "solver", "trace", "cluster", "preset", "placement")


@dataclass(frozen=True, slots=True)
class Segment:
    start_s: float
    end_s: float
    worker_type: str
    gpus: int


@dataclass(frozen=True, slots=True)
class JobTimeline:
    job_id: int
    job_type: str
    segments: tuple[Segment, ...]
    batch_sizes: tuple[tuple[float, int], ...]  # (time_s, batch size), first the starting one


@dataclass(frozen=True, slots=True)
class Timeline:
    worker_types: tuple[str, ...]
    capacity: np.ndarray  # GPUs per worker type
    time_s: np.ndarray  # each round's start
    busy_gpus: np.ndarray  # rounds x worker types
    queued: np.ndarray
    running: np.ndarray
    solve_s: np.ndarray
    jobs: tuple[JobTimeline, ...]


@dataclass(frozen=True, slots=True)
class RunView:
    """One results document, as the figures see it."""

    path: Path
    label: str
    policy: str
    metrics: dict[str, float | None]
    job_ids: np.ndarray  # per finished job
    arrival_s: np.ndarray
    jct_s: np.ndarray
    ftf_rho: np.ndarray  # NaN where a job had no isolated time
    timeline: Timeline | None
    setup: dict[str, str]  # how the run was made: backend, solver, trace, cluster, preset, ...

    @property
    def legend(self) -> str:
        """The file's stem, and the policy where the stem does not already say it."""
        if not self.policy or self.policy in self.label:
            return self.label
        return f"{self.label} ({self.policy})"

    def require_timeline(self, kind: str) -> Timeline:
        if self.timeline is None:
            raise InputError(
                f"the '{kind}' figure needs the run's timeline, and this document has none "
                "(write it with a shock version whose `shock run --json` records the timeline)",
                path=self.path,
                field="timeline",
            )
        return self.timeline


def load_run(path: str | Path, label: str | None = None) -> RunView:
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise InputError("expected a results document (JSON), got a directory", path=path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a JSON results document ({exc})", path=path) from None
    return run_from_document(document, path, label)


def run_from_document(document: object, path: Path, label: str | None = None) -> RunView:
    if not isinstance(document, dict):
        raise InputError("expected a JSON object (a `shock run --json` document)", path=path)
    metrics: dict[str, Any] = _field(document, "metrics", dict, path)
    jobs: list[dict[str, Any]] = _field(document, "jobs", list, path)
    policy = str(document.get("policy", ""))
    try:
        ids = np.array([int(job["id"]) for job in jobs], dtype=np.int64)
        arrival = np.array([float(job["arrival_s"]) for job in jobs], dtype=np.float64)
        jct = np.array([float(job["jct_s"]) for job in jobs], dtype=np.float64)
        rho = np.array(
            [np.nan if job.get("ftf_rho") is None else float(job["ftf_rho"]) for job in jobs],
            dtype=np.float64,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"a job entry is malformed ({exc!r})", path=path, field="jobs") from None
    timeline = None
    if document.get("timeline") is not None:
        timeline = _timeline(document["timeline"], path)
    return RunView(
        path=path,
        label=label or path.stem,
        policy=policy,
        metrics={str(k): _number_or_none(v) for k, v in metrics.items()},
        job_ids=ids,
        arrival_s=arrival,
        jct_s=jct,
        ftf_rho=rho,
        timeline=timeline,
        setup={key: str(document[key]) for key in SETUP_KEYS if document.get(key) is not None},
    )


def _number_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _field(document: dict[str, Any], name: str, kind: type, path: Path) -> Any:
    value = document.get(name)
    if not isinstance(value, kind):
        raise InputError(
            f"expected a {kind.__name__} (is this a `shock run --json` document?)",
            path=path,
            field=name,
        )
    return value


def _timeline(raw: object, path: Path) -> Timeline:
    try:
        assert isinstance(raw, dict)
        rounds = raw["rounds"]
        worker_types = tuple(str(name) for name in raw["worker_types"])
        time_s = np.asarray(rounds["time_s"], dtype=float)
        busy = np.asarray(rounds["busy_gpus"], dtype=float).reshape(len(time_s), len(worker_types))
        columns = {
            name: np.asarray(rounds[name], dtype=float) for name in ("queued", "running", "solve_s")
        }
        if any(len(column) != len(time_s) for column in columns.values()):
            raise ValueError("the rounds' columns differ in length")
        jobs = tuple(
            JobTimeline(
                job_id=int(job["id"]),
                job_type=str(job.get("job_type", "")),
                segments=tuple(
                    Segment(float(s), float(e), str(w), int(g)) for s, e, w, g in job["segments"]
                ),
                batch_sizes=tuple((float(t), int(b)) for t, b in job.get("batch_sizes", ())),
            )
            for job in raw["jobs"]
        )
        return Timeline(
            worker_types=worker_types,
            capacity=np.asarray(raw["capacity"], dtype=float).reshape(len(worker_types)),
            time_s=time_s,
            busy_gpus=busy,
            queued=columns["queued"],
            running=columns["running"],
            solve_s=columns["solve_s"],
            jobs=jobs,
        )
    except (AssertionError, KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"malformed timeline ({exc!r})", path=path, field="timeline"
        ) from None
