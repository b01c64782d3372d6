"""The `grpc` backend: the cluster runtime behind a gRPC service in this process, and its
workers as worker agents that connect to it.

Two modes, one set of options (`GrpcOptions`): `shock run --backend grpc` starts local worker
agents as child processes (one per server of the cluster) and runs a trace; `shock serve` is
the same backend with no local workers (`local_workers=0`): it listens for `shock worker`s
and, without a trace, for jobs people submit (`GrpcBackend.serve`).
"""

from __future__ import annotations

import shlex
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from shock.api import ClusterRuntime, Register, RunRequest, RunResult, ShockError, hookimpl
from shock.cluster.defaults import DEFAULT_JOB_COMMAND

if TYPE_CHECKING:
    from shock.api import RunOptions
    from shock.cluster.auth import TlsFiles
    from shock.cluster.runtime.runtime import Runtime
    from shock.cluster.runtime.state import RuntimeSettings
    from shock.cluster.users import Users

# Round length of a local cluster run unless --round-length says otherwise: real jobs are
# short, and the preset's rounds (minutes) would leave GPUs idle behind finished jobs.
LOCAL_ROUND_LENGTH_S = 30.0


DEFAULT_LOCAL_WORKERS = 2
DEFAULT_GPUS_PER_WORKER = 2
DEFAULT_GPU_TYPE = "v100"
DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class GrpcOptions:
    """The grpc backend's options (`shock run --backend grpc`, and `shock serve`'s). The local
    workers are one per server of the run's cluster: `--cluster` (a cluster file's servers
    bring their CPUs and memory), or N workers of G GPUs of one type, `type=N*G`, when any of
    the three worker options is given or no `--cluster` is (2 workers of 2 V100s). With
    `local_workers=0` (`shock serve`) no worker starts here: the cluster is the workers that
    register, and `--cluster` only names the worker types to expect."""

    local_workers: int | None = field(
        default=None,
        metadata={"help": "Local worker agents to start (default 2; 0 is `shock serve`'s mode: "
                          "none, workers connect with `shock worker`); with --gpus-per-worker "
                          "and --gpu-type they replace --cluster."},
    )  # fmt: skip
    gpus_per_worker: int | None = field(
        default=None,
        metadata={"help": "Simulated GPUs per worker (real CUDA devices if present; default 2)."},
    )
    gpu_type: str | None = field(
        default=None, metadata={"help": "The workers' GPU type (default v100)."}
    )
    job_command: str | None = field(
        default=None,
        metadata={"help": "Command that runs one job (default: python -m shock.workloads.run)."},
    )
    state_dir: Path | None = field(
        default=None,
        metadata={"help": "Journal, checkpoints and logs (default: a temporary directory)."},
    )
    heartbeat: float | None = field(
        default=None, metadata={"help": "Worker heartbeat period (s; default 1)."}
    )
    checkpoint_every: float | None = field(
        default=None, metadata={"help": "Jobs checkpoint at least this often (s)."}
    )
    dead_after: float | None = field(
        default=None,
        metadata={"help": "A worker silent this long is dead; its jobs move (s; default "
                          "5 heartbeats, at least 5)."},
    )  # fmt: skip
    min_workers: int | None = field(
        default=None,
        metadata={"help": "Workers to wait for before the first round (default: the local "
                          "workers, or 1 without any)."},
    )  # fmt: skip
    host: str | None = field(
        default=None,
        metadata={"help": f"Address the scheduler listens on (default {DEFAULT_HOST})."},
    )
    port: int | None = field(
        default=None, metadata={"help": "Port the scheduler listens on (default: any free port)."}
    )

    def __post_init__(self) -> None:
        if (self.local_workers is not None and self.local_workers < 0) or (
            self.gpus_per_worker is not None and self.gpus_per_worker < 1
        ):
            raise ValueError("--local-workers must be >= 0 and --gpus-per-worker >= 1")
        if self.heartbeat is not None and not self.heartbeat > 0:
            raise ValueError("--heartbeat must be > 0")
        if self.dead_after is not None and not self.dead_after > 0:
            raise ValueError("--dead-after must be > 0")
        if self.min_workers is not None and self.min_workers < 1:
            raise ValueError("--min-workers must be >= 1")
        if self.port is not None and not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be 0 to 65535, got {self.port}")
        if self.checkpoint_every is not None and not self.checkpoint_every > 0:
            raise ValueError("--checkpoint-every must be > 0")
        self.job_command_parts()  # a command that cannot be split is refused before the run

    def job_command_parts(self) -> tuple[str, ...]:
        """The job command split like a shell does; () for the default harness."""
        if not self.job_command:
            return ()
        try:
            return tuple(shlex.split(self.job_command))
        except ValueError as exc:
            raise ValueError(f"--job-command: cannot split '{self.job_command}': {exc}") from None

    def cluster_runtime(self, base: ClusterRuntime | None = None) -> ClusterRuntime:
        """The runtime these options give; what they leave unsaid stays as in `base`."""
        base = base or ClusterRuntime()
        return ClusterRuntime(
            job_command=self.job_command_parts() or base.job_command,
            state_dir=str(self.state_dir) if self.state_dir else base.state_dir,
            heartbeat_s=base.heartbeat_s if self.heartbeat is None else self.heartbeat,
            checkpoint_every_s=(
                base.checkpoint_every_s if self.checkpoint_every is None else self.checkpoint_every
            ),
        )

    @property
    def serves(self) -> bool:
        """No local workers: workers connect over the network (`shock serve`)."""
        return self.local_workers == 0

    def runtime_settings(
        self, runtime: ClusterRuntime, state_dir: Path, local_workers: int,
        accepts_submissions: bool = False,
    ) -> RuntimeSettings:
        """The runtime's settings these options give (one place for both modes)."""
        from shock.cluster.runtime.state import RuntimeSettings

        heartbeat = runtime.heartbeat_s
        return RuntimeSettings(
            state_dir=state_dir,
            heartbeat_s=heartbeat,
            dead_after_s=max(5.0, 5 * heartbeat) if self.dead_after is None else self.dead_after,
            min_workers=self.min_workers or max(1, local_workers),
            accepts_submissions=accepts_submissions,
        )  # fmt: skip

    def adjust_run(self, run: RunOptions) -> RunOptions:
        """The local workers' cluster; rounds default to LOCAL_ROUND_LENGTH_S."""
        run = replace(
            run,
            round_length_s=(
                LOCAL_ROUND_LENGTH_S if run.round_length_s is None else run.round_length_s
            ),
            cluster_runtime=self.cluster_runtime(run.cluster_runtime),
        )
        if self.serves:
            return run  # the cluster is the workers that register
        workers_given = (self.local_workers, self.gpus_per_worker, self.gpu_type) != (None,) * 3
        if run.cluster is not None and not workers_given:
            return run  # one worker per server of the cluster the user named
        workers = self.local_workers or DEFAULT_LOCAL_WORKERS
        gpus = self.gpus_per_worker or DEFAULT_GPUS_PER_WORKER
        return replace(
            run,
            cluster=f"{self.gpu_type or DEFAULT_GPU_TYPE}={workers * gpus}",
            gpus_per_server=gpus,
        )


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C does, so every child is stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Who may call the scheduler: the cluster's token (workers), TLS, and the users of the
    Jobs service (default: one admin whose token is the cluster token)."""

    token: str
    tls: TlsFiles | None = None
    users: Users | None = None


@dataclass(frozen=True, slots=True)
class ServeMode:
    """What `shock serve` adds to a run of the backend: its endpoint, whether it takes
    submissions (a service) or runs a trace, the event that stops it, and `on_listening`,
    called with the runtime and the bound port once it listens (it may return a function
    that undoes what it started, such as a dashboard)."""

    endpoint: Endpoint
    accepts_submissions: bool
    stop: threading.Event
    on_listening: Callable[[Runtime, int], Callable[[], None] | None] | None = None


def _import_runtime() -> None:
    try:
        import grpc  # noqa: F401
    except ImportError as exc:
        raise ShockError(
            f"the grpc backend needs the cluster extra (pip install 'shock[cluster]'): {exc}"
        ) from None


class GrpcBackend:
    name = "grpc"
    description = "real jobs on worker agents over gRPC (local ones, or `shock worker`s)"
    # Real jobs: progress and batch-size changes come from the jobs, not from a model.
    simulates_jobs = False
    options_type = GrpcOptions

    def run(self, request: RunRequest) -> RunResult:
        """A trace on local worker agents, one per server of the run's cluster."""
        _import_runtime()
        from shock.cluster.auth import new_token
        from shock.cluster.local import LocalWorkers, LocalWorkerSpec

        options = request.backend_options_as(GrpcOptions)
        if options.serves:
            raise ShockError(
                "--local-workers 0 starts no worker here: run the scheduler with `shock serve` "
                "and connect workers with `shock worker`"
            )
        runtime = request.config.cluster_runtime
        servers = request.cluster.servers()
        with tempfile.TemporaryDirectory(prefix="shock-grpc-") as scratch:
            state_dir = Path(runtime.state_dir) if runtime.state_dir else Path(scratch)
            settings = options.runtime_settings(runtime, state_dir, len(servers))
            endpoint = Endpoint(new_token())
            workers = LocalWorkers()
            with _served(request, settings, options, endpoint) as (scheduler, port):
                try:
                    with _sigterm_as_interrupt():
                        first_device = 0
                        specs = []
                        for server_spec in servers:
                            devices = tuple(
                                range(first_device, first_device + server_spec.num_gpus)
                            )
                            first_device += server_spec.num_gpus
                            specs.append(LocalWorkerSpec(
                                server_spec.worker_type, server_spec.num_gpus, devices,
                                server_spec.cpus, server_spec.memory_gb,
                            ))  # fmt: skip
                        workers.start(
                            specs,
                            f"127.0.0.1:{port}",
                            endpoint.token,
                            runtime.job_command or DEFAULT_JOB_COMMAND,
                            state_dir / "logs",
                            heartbeat_s=runtime.heartbeat_s,
                            checkpoint_every_s=runtime.checkpoint_every_s,
                        )
                        return scheduler.run()
                except KeyboardInterrupt:
                    raise ShockError(
                        "interrupted: the scheduler, its workers and their jobs were stopped"
                    ) from None
                finally:
                    workers.stop()

    def serve(self, request: RunRequest, mode: ServeMode) -> RunResult:
        """`shock serve`: the runtime behind the gRPC service, for workers and users that
        connect over the network; until its trace is done, or (a service) until stopped.
        Raises `ServiceStopped` when stopped before any worker registered."""
        _import_runtime()
        options = request.backend_options_as(GrpcOptions)
        runtime = request.config.cluster_runtime
        if not runtime.state_dir:
            raise ShockError("a served cluster needs a state directory (--state-dir)")
        settings = options.runtime_settings(
            runtime, Path(runtime.state_dir), 0, mode.accepts_submissions
        )
        with _served(request, settings, options, mode.endpoint) as (scheduler, port):
            undo = mode.on_listening(scheduler, port) if mode.on_listening else None
            try:
                return scheduler.run(mode.stop)
            finally:
                if undo is not None:
                    undo()


@contextmanager
def _served(
    request: RunRequest, settings: RuntimeSettings, options: GrpcOptions, endpoint: Endpoint
) -> Iterator[tuple[Runtime, int]]:
    """The runtime with its journal, behind a listening gRPC server; both closed on exit."""
    from shock.cluster.runtime.runtime import Runtime
    from shock.cluster.service import ServerAddress, start_server

    scheduler = Runtime(request, settings)
    try:
        server, port = start_server(
            scheduler, ServerAddress(options.host or DEFAULT_HOST, options.port or 0),
            endpoint.token, endpoint.tls, users=endpoint.users,
        )  # fmt: skip
    except BaseException:
        scheduler.journal.close()
        raise
    try:
        yield scheduler, port
    finally:
        server.stop(grace=1.0).wait(timeout=5)
        scheduler.journal.close()


@hookimpl
def register_backends(register: Register) -> None:
    register(GrpcBackend())
