from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Device(_message.Message):
    __slots__ = ("index", "name")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class LiveRun(_message.Message):
    __slots__ = ("run_id", "job_id", "step")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    job_id: int
    step: int
    def __init__(self, run_id: _Optional[int] = ..., job_id: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("worker_id", "hostname", "gpu_type", "devices", "live_runs", "pid", "cpus", "memory_gb", "rendezvous_host")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    LIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_HOST_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    hostname: str
    gpu_type: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    live_runs: _containers.RepeatedCompositeFieldContainer[LiveRun]
    pid: int
    cpus: float
    memory_gb: float
    rendezvous_host: str
    def __init__(self, worker_id: _Optional[str] = ..., hostname: _Optional[str] = ..., gpu_type: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., live_runs: _Optional[_Iterable[_Union[LiveRun, _Mapping]]] = ..., pid: _Optional[int] = ..., cpus: _Optional[float] = ..., memory_gb: _Optional[float] = ..., rendezvous_host: _Optional[str] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("worker_id", "heartbeat_s", "scheduler_incarnation")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_S_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    heartbeat_s: float
    scheduler_incarnation: str
    def __init__(self, worker_id: _Optional[str] = ..., heartbeat_s: _Optional[float] = ..., scheduler_incarnation: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("worker_id", "live_runs", "wait_s")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    live_runs: _containers.RepeatedCompositeFieldContainer[LiveRun]
    wait_s: float
    def __init__(self, worker_id: _Optional[str] = ..., live_runs: _Optional[_Iterable[_Union[LiveRun, _Mapping]]] = ..., wait_s: _Optional[float] = ...) -> None: ...

class Launch(_message.Message):
    __slots__ = ("run_id", "job_id", "job_type", "target_steps", "checkpoint_dir", "gpus", "lease_s", "seed", "adaptation", "cpus", "memory_gb", "rank", "world_size", "local_rank", "master_addr", "master_port", "command", "workdir", "env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_STEPS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_DIR_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    LEASE_S_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_RANK_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    MASTER_PORT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    job_id: int
    job_type: str
    target_steps: int
    checkpoint_dir: str
    gpus: _containers.RepeatedScalarFieldContainer[int]
    lease_s: float
    seed: int
    adaptation: str
    cpus: float
    memory_gb: float
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    command: _containers.RepeatedScalarFieldContainer[str]
    workdir: str
    env: _containers.ScalarMap[str, str]
    def __init__(self, run_id: _Optional[int] = ..., job_id: _Optional[int] = ..., job_type: _Optional[str] = ..., target_steps: _Optional[int] = ..., checkpoint_dir: _Optional[str] = ..., gpus: _Optional[_Iterable[int]] = ..., lease_s: _Optional[float] = ..., seed: _Optional[int] = ..., adaptation: _Optional[str] = ..., cpus: _Optional[float] = ..., memory_gb: _Optional[float] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., local_rank: _Optional[int] = ..., master_addr: _Optional[str] = ..., master_port: _Optional[int] = ..., command: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("run_id", "seconds")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    seconds: float
    def __init__(self, run_id: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class Preempt(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    def __init__(self, run_id: _Optional[int] = ...) -> None: ...

class BatchSize(_message.Message):
    __slots__ = ("run_id", "batch_size")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    batch_size: int
    def __init__(self, run_id: _Optional[int] = ..., batch_size: _Optional[int] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("launch", "lease", "preempt", "batch_size", "fetch_log")
    LAUNCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FETCH_LOG_FIELD_NUMBER: _ClassVar[int]
    launch: Launch
    lease: Lease
    preempt: Preempt
    batch_size: BatchSize
    fetch_log: FetchLog
    def __init__(self, launch: _Optional[_Union[Launch, _Mapping]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., preempt: _Optional[_Union[Preempt, _Mapping]] = ..., batch_size: _Optional[_Union[BatchSize, _Mapping]] = ..., fetch_log: _Optional[_Union[FetchLog, _Mapping]] = ...) -> None: ...

class FetchLog(_message.Message):
    __slots__ = ("request_id", "run_ids", "max_bytes")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    run_ids: _containers.RepeatedScalarFieldContainer[int]
    max_bytes: int
    def __init__(self, request_id: _Optional[int] = ..., run_ids: _Optional[_Iterable[int]] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("commands", "reregister", "shutdown")
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    REREGISTER_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    reregister: bool
    shutdown: bool
    def __init__(self, commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ..., reregister: _Optional[bool] = ..., shutdown: _Optional[bool] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("seq", "run_id", "job_id", "time_unix", "started", "progress", "checkpoint", "batch_size_request", "exit")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    run_id: int
    job_id: int
    time_unix: float
    started: Started
    progress: Progress
    checkpoint: Checkpoint
    batch_size_request: BatchSizeRequest
    exit: Exit
    def __init__(self, seq: _Optional[int] = ..., run_id: _Optional[int] = ..., job_id: _Optional[int] = ..., time_unix: _Optional[float] = ..., started: _Optional[_Union[Started, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., batch_size_request: _Optional[_Union[BatchSizeRequest, _Mapping]] = ..., exit: _Optional[_Union[Exit, _Mapping]] = ...) -> None: ...

class Started(_message.Message):
    __slots__ = ("step", "batch_size", "resumed_from_step", "limits")
    STEP_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FROM_STEP_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    step: int
    batch_size: int
    resumed_from_step: int
    limits: JobLimits
    def __init__(self, step: _Optional[int] = ..., batch_size: _Optional[int] = ..., resumed_from_step: _Optional[int] = ..., limits: _Optional[_Union[JobLimits, _Mapping]] = ...) -> None: ...

class JobLimits(_message.Message):
    __slots__ = ("threads", "cpus", "memory_limit_bytes")
    THREADS_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    threads: int
    cpus: _containers.RepeatedScalarFieldContainer[int]
    memory_limit_bytes: int
    def __init__(self, threads: _Optional[int] = ..., cpus: _Optional[_Iterable[int]] = ..., memory_limit_bytes: _Optional[int] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("step", "steps_per_s", "batch_size", "loss", "target_steps")
    STEP_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    TARGET_STEPS_FIELD_NUMBER: _ClassVar[int]
    step: int
    steps_per_s: float
    batch_size: int
    loss: float
    target_steps: int
    def __init__(self, step: _Optional[int] = ..., steps_per_s: _Optional[float] = ..., batch_size: _Optional[int] = ..., loss: _Optional[float] = ..., target_steps: _Optional[int] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("step", "path")
    STEP_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    step: int
    path: str
    def __init__(self, step: _Optional[int] = ..., path: _Optional[str] = ...) -> None: ...

class BatchSizeRequest(_message.Message):
    __slots__ = ("step", "batch_size", "reason")
    STEP_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    step: int
    batch_size: int
    reason: str
    def __init__(self, step: _Optional[int] = ..., batch_size: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Exit(_message.Message):
    __slots__ = ("reason", "step", "target_steps", "exit_code", "message")
    REASON_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TARGET_STEPS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    step: int
    target_steps: int
    exit_code: int
    message: str
    def __init__(self, reason: _Optional[str] = ..., step: _Optional[int] = ..., target_steps: _Optional[int] = ..., exit_code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ReportEventsRequest(_message.Message):
    __slots__ = ("worker_id", "events")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    events: _containers.RepeatedCompositeFieldContainer[JobEvent]
    def __init__(self, worker_id: _Optional[str] = ..., events: _Optional[_Iterable[_Union[JobEvent, _Mapping]]] = ...) -> None: ...

class ReportEventsReply(_message.Message):
    __slots__ = ("acked_seq",)
    ACKED_SEQ_FIELD_NUMBER: _ClassVar[int]
    acked_seq: int
    def __init__(self, acked_seq: _Optional[int] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("worker_id", "run_id", "step")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    run_id: int
    step: int
    def __init__(self, worker_id: _Optional[str] = ..., run_id: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class RenewLeaseReply(_message.Message):
    __slots__ = ("granted", "seconds")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    seconds: float
    def __init__(self, granted: _Optional[bool] = ..., seconds: _Optional[float] = ...) -> None: ...

class RunLog(_message.Message):
    __slots__ = ("run_id", "worker_id", "text", "truncated", "error")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    worker_id: str
    text: str
    truncated: bool
    error: str
    def __init__(self, run_id: _Optional[int] = ..., worker_id: _Optional[str] = ..., text: _Optional[str] = ..., truncated: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class UploadLogRequest(_message.Message):
    __slots__ = ("worker_id", "request_id", "logs")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    LOGS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    request_id: int
    logs: _containers.RepeatedCompositeFieldContainer[RunLog]
    def __init__(self, worker_id: _Optional[str] = ..., request_id: _Optional[int] = ..., logs: _Optional[_Iterable[_Union[RunLog, _Mapping]]] = ...) -> None: ...

class UploadLogReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("job_type", "steps", "scale_factor", "user", "weight", "adaptation", "command", "workdir", "env", "name", "gpus", "elastic")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SCALE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    ELASTIC_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    steps: int
    scale_factor: int
    user: str
    weight: float
    adaptation: str
    command: _containers.RepeatedScalarFieldContainer[str]
    workdir: str
    env: _containers.ScalarMap[str, str]
    name: str
    gpus: int
    elastic: bool
    def __init__(self, job_type: _Optional[str] = ..., steps: _Optional[int] = ..., scale_factor: _Optional[int] = ..., user: _Optional[str] = ..., weight: _Optional[float] = ..., adaptation: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., name: _Optional[str] = ..., gpus: _Optional[int] = ..., elastic: _Optional[bool] = ...) -> None: ...

class SubmitJobReply(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class JobPlacement(_message.Message):
    __slots__ = ("worker_id", "hostname", "gpus")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    hostname: str
    gpus: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, worker_id: _Optional[str] = ..., hostname: _Optional[str] = ..., gpus: _Optional[_Iterable[int]] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("job_id", "user", "state", "job_type", "scale_factor", "step", "target_steps", "checkpoint_step", "placement", "submitted_at_unix", "queued_s", "rho", "ended_at_unix", "message", "weight", "adaptation", "steps_per_s", "command")
    class StepsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TARGET_STEPS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_STEP_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    QUEUED_S_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    user: str
    state: str
    job_type: str
    scale_factor: int
    step: int
    target_steps: int
    checkpoint_step: int
    placement: _containers.RepeatedCompositeFieldContainer[JobPlacement]
    submitted_at_unix: float
    queued_s: float
    rho: float
    ended_at_unix: float
    message: str
    weight: float
    adaptation: str
    steps_per_s: _containers.ScalarMap[str, float]
    command: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[int] = ..., user: _Optional[str] = ..., state: _Optional[str] = ..., job_type: _Optional[str] = ..., scale_factor: _Optional[int] = ..., step: _Optional[int] = ..., target_steps: _Optional[int] = ..., checkpoint_step: _Optional[int] = ..., placement: _Optional[_Iterable[_Union[JobPlacement, _Mapping]]] = ..., submitted_at_unix: _Optional[float] = ..., queued_s: _Optional[float] = ..., rho: _Optional[float] = ..., ended_at_unix: _Optional[float] = ..., message: _Optional[str] = ..., weight: _Optional[float] = ..., adaptation: _Optional[str] = ..., steps_per_s: _Optional[_Mapping[str, float]] = ..., command: _Optional[_Iterable[str]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("job_ids", "user")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    user: str
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., user: _Optional[str] = ...) -> None: ...

class ListJobsReply(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobStatus]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobStatus, _Mapping]]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class CancelJobReply(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: JobStatus
    def __init__(self, job: _Optional[_Union[JobStatus, _Mapping]] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id", "history_only")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    HISTORY_ONLY_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    history_only: bool
    def __init__(self, job_id: _Optional[int] = ..., history_only: _Optional[bool] = ...) -> None: ...

class JobUpdate(_message.Message):
    __slots__ = ("job", "event", "time_unix")
    JOB_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_FIELD_NUMBER: _ClassVar[int]
    job: JobStatus
    event: str
    time_unix: float
    def __init__(self, job: _Optional[_Union[JobStatus, _Mapping]] = ..., event: _Optional[str] = ..., time_unix: _Optional[float] = ...) -> None: ...

class JobLogsRequest(_message.Message):
    __slots__ = ("job_id", "max_bytes")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    max_bytes: int
    def __init__(self, job_id: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class JobLogsReply(_message.Message):
    __slots__ = ("logs",)
    LOGS_FIELD_NUMBER: _ClassVar[int]
    logs: _containers.RepeatedCompositeFieldContainer[RunLog]
    def __init__(self, logs: _Optional[_Iterable[_Union[RunLog, _Mapping]]] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ("window_s",)
    WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    window_s: float
    def __init__(self, window_s: _Optional[float] = ...) -> None: ...

class ShareWindow(_message.Message):
    __slots__ = ("seconds", "gpu_seconds", "share", "fair_share")
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    FAIR_SHARE_FIELD_NUMBER: _ClassVar[int]
    seconds: float
    gpu_seconds: float
    share: float
    fair_share: float
    def __init__(self, seconds: _Optional[float] = ..., gpu_seconds: _Optional[float] = ..., share: _Optional[float] = ..., fair_share: _Optional[float] = ...) -> None: ...

class UserShare(_message.Message):
    __slots__ = ("user", "weight", "gpus", "share", "fair_share", "recent", "since_start")
    USER_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    FAIR_SHARE_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    SINCE_START_FIELD_NUMBER: _ClassVar[int]
    user: str
    weight: float
    gpus: int
    share: float
    fair_share: float
    recent: ShareWindow
    since_start: ShareWindow
    def __init__(self, user: _Optional[str] = ..., weight: _Optional[float] = ..., gpus: _Optional[int] = ..., share: _Optional[float] = ..., fair_share: _Optional[float] = ..., recent: _Optional[_Union[ShareWindow, _Mapping]] = ..., since_start: _Optional[_Union[ShareWindow, _Mapping]] = ...) -> None: ...

class ListUsersReply(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[UserShare]
    def __init__(self, users: _Optional[_Iterable[_Union[UserShare, _Mapping]]] = ...) -> None: ...
