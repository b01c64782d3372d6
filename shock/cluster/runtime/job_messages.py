"""The job service in shock's own types: what people submit and what they see of a job."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Submission:
    """A job someone asks the runtime to run."""

    job_type: str = ""  # e.g. "ResNet-18 (batch size 32)"; a command's name otherwise
    steps: int = 0  # 0 with a command: the job says
    scale_factor: int = 0  # GPUs it needs (0: 1)
    gpus: int | None = None  # the GPUs it needs, when given (then 0 is refused)
    user: str = ""  # empty: the caller; another user: admins only
    weight: float = 0.0  # its priority weight (0: 1)
    adaptation: str = ""  # static (empty), accordion or gns
    # A person's own command, run in `workdir` with `env` added.
    command: tuple[str, ...] = ()
    workdir: str = ""
    env: tuple[tuple[str, str], ...] = ()
    name: str = ""
    # Its GPU count is the policy's to choose each round (pollux, sia).
    elastic: bool = False


@dataclass(frozen=True, slots=True)
class JobPlacement:
    worker_id: str
    hostname: str
    gpus: tuple[int, ...]  # the worker's local GPU indices


@dataclass(frozen=True, slots=True)
class JobStatus:
    job_id: int
    user: str
    state: str  # queued, running, done, cancelled or failed
    job_type: str
    scale_factor: int
    step: int
    target_steps: int
    checkpoint_step: int
    placement: tuple[JobPlacement, ...]  # where it holds GPUs now
    submitted_at_unix: float
    queued_s: float  # waiting before its first start (so far, if it never started)
    rho: float  # finish-time fairness so far (0: none yet)
    ended_at_unix: float  # 0: not ended
    message: str  # why it failed or who cancelled it
    weight: float
    adaptation: str
    # The steps/s the runtime plans with per GPU type (measured, the table's, or estimated).
    steps_per_s: dict[str, float]
    command: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobUpdate:
    job: JobStatus
    event: str  # what happened, in words (empty: progress only)
    time_unix: float
