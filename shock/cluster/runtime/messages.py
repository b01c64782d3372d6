"""What the runtime and its workers say to each other, in shock's own types.

Commands go from the runtime to a worker (launch a run, extend or end its lease, change its
batch size, send its log); job events come back from the job processes (started, progress,
checkpoint, batch-size request, exit). The gRPC adapter translates these to and from its
protobuf messages (`shock/cluster/grpc_wire.py`); the Ray adapter hands them to and from its
actors as they are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Launch:
    """Start one process of a job (a gang runs one per GPU) on a worker's local GPUs."""

    run_id: int
    job_id: int
    job_type: str
    target_steps: int
    checkpoint_dir: str
    gpus: tuple[int, ...]
    lease_s: float  # initial lease, seconds from launch
    seed: int = 0
    adaptation: str = "static"
    # A resource-aware placement's grant (0: the process is not bounded in it).
    cpus: float = 0.0
    memory_gb: float = 0.0
    # Its place in a gang; world_size 1: a job of one process, no rendezvous.
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str = ""
    master_port: int = 0
    # A person's own command (empty: a built-in family's job, run by the job command).
    command: tuple[str, ...] = ()
    workdir: str = ""
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ExtendLease:
    run_id: int
    seconds: float  # the lease now ends this many seconds from receipt


@dataclass(frozen=True, slots=True)
class Preempt:
    run_id: int


@dataclass(frozen=True, slots=True)
class SetBatchSize:
    run_id: int
    batch_size: int


@dataclass(frozen=True, slots=True)
class FetchLog:
    """Send the tail of these runs' job logs back (`Runtime.upload_log`)."""

    request_id: int
    run_ids: tuple[int, ...]
    max_bytes: int


Command = Launch | ExtendLease | Preempt | SetBatchSize | FetchLog


@dataclass(frozen=True, slots=True)
class JobLimits:
    """What a job process runs under, as it reads them itself."""

    threads: int
    cpus: tuple[int, ...]  # the CPUs it may run on (empty: the OS cannot tell)
    memory_limit_bytes: int = 0  # its RLIMIT_DATA (0: unlimited)


@dataclass(frozen=True, slots=True)
class Started:
    step: int = 0
    batch_size: int = 0
    resumed_from_step: int = 0
    limits: JobLimits | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    step: int = 0
    steps_per_s: float = 0.0
    batch_size: int = 0
    loss: float = 0.0
    target_steps: int = 0  # rescaled when its batch size changed (0: not sent)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    step: int = 0
    path: str = ""


@dataclass(frozen=True, slots=True)
class BatchSizeRequest:
    step: int = 0
    batch_size: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Exit:
    """done, lease_expired, preempted (from the job), killed (stopped by the runtime), error
    or crashed (the process ended without an exit line, or with an error line)."""

    reason: str = ""
    step: int = 0
    target_steps: int = 0
    exit_code: int = 0
    message: str = ""


EventPayload = Started | Progress | Checkpoint | BatchSizeRequest | Exit


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One message of a run, numbered per worker (`seq`: the key that applies it once)."""

    payload: EventPayload
    seq: int = 0
    run_id: int = 0
    job_id: int = 0
    time_unix: float = 0.0


@dataclass(frozen=True, slots=True)
class LiveRun:
    """A run a worker still has."""

    run_id: int
    job_id: int = 0
    step: int = 0


@dataclass(frozen=True, slots=True)
class WorkerHello:
    """A worker announces itself (again after a restart of either side)."""

    worker_id: str  # empty on first registration
    hostname: str
    gpu_type: str
    gpus: int
    live_runs: tuple[LiveRun, ...] = ()
    cpus: float = 0.0  # offered to jobs (0: not said)
    memory_gb: float = 0.0
    rendezvous_host: str = ""  # where a gang's other ranks reach its jobs (empty: hostname)


@dataclass(frozen=True, slots=True)
class Welcome:
    worker_id: str
    heartbeat_s: float
    incarnation: str  # changes when the runtime restarts


@dataclass(frozen=True, slots=True)
class Orders:
    """A heartbeat's answer: the commands queued for the worker."""

    commands: tuple[Command, ...] = ()
    reregister: bool = False  # the runtime does not know this worker (it restarted)
    shutdown: bool = False  # every job is done: stop the jobs and exit


@dataclass(frozen=True, slots=True)
class RunLog:
    """The tail of one run's job output, or why there is none."""

    run_id: int
    worker_id: str = ""
    text: str = ""
    truncated: bool = False
    error: str = ""
