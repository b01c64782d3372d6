"""A results document as the figures read it: `shock.results.document`'s typed document, with
the per-job results and the timeline's rounds as numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shock.core.errors import InputError
from shock.core.timeline import JobTimeline
from shock.results.document import ResultDocument, load_result, parse_result

SETUP_KEYS = ("policy", "backend", "solver", "trace", "cluster", "preset", "placement")


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
    if path.is_dir():
        raise InputError("expected a results document (JSON), got a directory", path=path)
    return run_view(load_result(path), label)


def run_from_document(document: object, path: Path, label: str | None = None) -> RunView:
    """A document not read from a file (a run just finished); `path` names it in errors."""
    return run_view(parse_result(document, path), label)


def run_view(result: ResultDocument, label: str | None = None) -> RunView:
    jobs = result.jobs
    return RunView(
        path=result.path,
        label=label or result.label,
        policy=result.policy,
        metrics=dict(result.metrics),
        job_ids=np.array([job.job_id for job in jobs], dtype=np.int64),
        arrival_s=np.array([job.arrival_s for job in jobs], dtype=np.float64),
        jct_s=np.array([job.jct_s for job in jobs], dtype=np.float64),
        ftf_rho=np.array(
            [np.nan if job.ftf_rho is None else job.ftf_rho for job in jobs], dtype=np.float64
        ),
        timeline=None if result.timeline is None else _arrays(result),
        setup={
            key: value
            for key in SETUP_KEYS
            if (value := str(getattr(result, key))) != ""
        },
    )


def _arrays(result: ResultDocument) -> Timeline:
    timeline = result.timeline
    assert timeline is not None
    rounds = timeline.rounds
    width = len(timeline.worker_types)
    if any(len(row) != width for row in rounds.busy_gpus):
        raise InputError(
            f"each round's busy_gpus needs one count per worker type ({width})",
            path=result.path,
            field="timeline.rounds.busy_gpus",
        )
    return Timeline(
        worker_types=timeline.worker_types,
        capacity=np.array(timeline.capacity, dtype=np.float64),
        time_s=np.array(rounds.time_s, dtype=np.float64),
        busy_gpus=np.array(rounds.busy_gpus, dtype=np.float64).reshape(-1, width),
        queued=np.array(rounds.queued, dtype=np.float64),
        running=np.array(rounds.running, dtype=np.float64),
        solve_s=np.array(rounds.solve_s, dtype=np.float64),
        jobs=timeline.jobs,
    )
