"""Typed observer events passed to the observer hooks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunStarted:
    policy: str
    backend: str
    total_jobs: int  # jobs the run waits for (the window's, when one is given)
    window: tuple[int, int] | None = None  # the job ids [start, end) it waits for, if given


@dataclass(frozen=True, slots=True)
class JobArrived:
    time: float
    job_id: int
    job_type: str
    scale_factor: int


@dataclass(frozen=True, slots=True)
class AllocationComputed:
    time: float
    policy: str
    active_jobs: int
    solve_seconds: float


@dataclass(frozen=True, slots=True)
class RoundStarted:
    time: float
    round_index: int
    # (job ids, worker type, GPU ids) for each scheduled unit (a single job or a pair).
    assignments: tuple[tuple[tuple[int, ...], str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class RoundEnded:
    time: float
    round_index: int
    active_jobs: int
    completed_jobs: int


@dataclass(frozen=True, slots=True)
class JobFinished:
    time: float
    job_id: int
    jct: float


@dataclass(frozen=True, slots=True)
class RunFinished:
    time: float
    completed_jobs: int
