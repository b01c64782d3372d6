"""The runtime's state: its settings, the workers, the runs and the jobs it tracks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shock.cluster.job_command import JobCommand
from shock.cluster.runtime.messages import Command
from shock.core.model import JobSpec, batch_size_of, model_family_of
from shock.workloads.families import POLLUX_STAND_INS

# Adaptation modes the training harness carries out itself (shock/job/adaptation.py).
HARNESS_ADAPTATIONS = frozenset({"static", "accordion", "gns"})

# Where a job runs: one (worker, local GPUs) member per process, in rank order.
Placement = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    state_dir: Path
    heartbeat_s: float = 1.0
    # A worker silent this long is dead: its runs end and its jobs resume elsewhere.
    dead_after_s: float = 10.0
    min_workers: int = 1
    startup_timeout_s: float = 120.0
    # Stop with an error when the run takes longer than this (None: no limit).
    run_timeout_s: float | None = None
    max_job_failures: int = 3
    approve_batch_size_changes: bool = True
    # A service (`shock serve` without a trace): jobs are submitted and cancelled while it
    # runs, and it runs until stopped. Fixed in the journal when the state directory is new.
    accepts_submissions: bool = False


@dataclass(slots=True)
class WorkerSlot:
    worker_id: str
    gpu_type: str
    gpus: int
    registered_seq: int  # registration order, for a stable GPU numbering
    last_seen: float
    registered: bool = False  # registered with this runtime
    alive: bool = True
    acked_seq: int = 0
    # Commands waiting for the worker's next heartbeat (a polling transport's queue).
    commands: list[Command] = field(default_factory=list)
    cpus: float = 0.0  # what it offers to jobs, as it registered (0: not said)
    memory_gb: float = 0.0
    told_shutdown: bool = False
    hostname: str = ""
    rendezvous_host: str = ""  # where its jobs are reached by a gang's other ranks


@dataclass(slots=True)
class Run:
    run_id: int
    job_id: int
    worker_id: str
    gpus: tuple[int, ...]
    launched_at: float
    lease_until: float
    started_at: float | None = None
    ended_at: float | None = None
    preempting: bool = False
    # Its place in its gang (a job on several GPUs runs one process per GPU); rank 0 is the
    # gang's lead: its run is the job's run, its events the job's progress.
    rank: int = 0
    world_size: int = 1
    lead_run_id: int = 0


@dataclass(slots=True)
class TrackedJob:
    spec: JobSpec
    step: int = 0
    checkpoint_step: int = 0
    completed_at: float | None = None
    run_id: int | None = None  # the live run, if any
    not_before: float = 0.0  # a lost run's lease: no relaunch before it ends
    credited: float = 0.0  # steps reported to the engine
    failures: int = 0
    # What it runs as now: the trace's job type and steps until an approved batch-size
    # change (Accordion, GNS) takes effect; then the new batch size's type and the step
    # target the harness rescaled. Launches always name the trace's (a relaunch resumes
    # the new batch size from its checkpoint).
    job_type: str = ""
    target_steps: int = 0
    # A service's job: when it was submitted (unix time; None: a trace's), first started,
    # and how it ended when it did not complete.
    submitted_at: float | None = None
    started_at: float | None = None
    ended_state: str | None = None  # cancelled or failed
    ended_at: float | None = None
    message: str = ""
    rho: float | None = None  # its finish-time fairness, fixed when it ended
    # A person's own command (`shock submit -- COMMAND`); None: a built-in family's job.
    command: JobCommand | None = None

    @property
    def over(self) -> bool:
        """Completed, cancelled or failed: it never runs again."""
        return self.completed_at is not None or self.ended_state is not None

    def __post_init__(self) -> None:
        self.job_type = self.job_type or self.spec.job_type
        self.target_steps = self.target_steps or launch_steps(self.spec)

    @property
    def job_id(self) -> int:
        return self.spec.job_id


def samples_per_step(spec: JobSpec) -> int:
    """How much of the engine's work one training step does: a Pollux workload's job counts
    its work in samples (shock/traces/pollux.py), a step trains its batch; others count steps."""
    if spec.elastic and model_family_of(spec.job_type) in POLLUX_STAND_INS:
        return batch_size_of(spec.job_type) or 1
    return 1


def launch_steps(spec: JobSpec) -> int:
    """The steps the job trains for: its trace's work in training steps."""
    per_step = samples_per_step(spec)
    return -(-spec.total_steps // per_step)
