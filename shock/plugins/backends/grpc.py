"""The `grpc` backend: the scheduler service in this process, local worker agents as child
processes (one per server of the cluster), real job processes on their GPUs."""

from __future__ import annotations

import shlex
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from shock.api import ClusterRuntime, Register, RunRequest, RunResult, ShockError, hookimpl
from shock.cluster.defaults import DEFAULT_JOB_COMMAND

if TYPE_CHECKING:
    from shock.api import RunOptions

# Round length of a local cluster run unless --round-length says otherwise: real jobs are
# short, and the preset's rounds (minutes) would leave GPUs idle behind finished jobs.
LOCAL_ROUND_LENGTH_S = 30.0


DEFAULT_LOCAL_WORKERS = 2
DEFAULT_GPUS_PER_WORKER = 2
DEFAULT_GPU_TYPE = "v100"


@dataclass(frozen=True, slots=True)
class GrpcOptions:
    """`shock run --backend grpc` options. The local workers are one per server of the run's
    cluster: `--cluster` (a cluster file's servers bring their CPUs and memory), or N workers
    of G GPUs of one type, `type=N*G`, when any of the three worker options is given or no
    `--cluster` is (2 workers of 2 V100s)."""

    local_workers: int | None = field(
        default=None,
        metadata={"help": "Local worker agents to start (default 2); with --gpus-per-worker and "
                          "--gpu-type they replace --cluster."},
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

    def __post_init__(self) -> None:
        if (self.local_workers is not None and self.local_workers < 1) or (
            self.gpus_per_worker is not None and self.gpus_per_worker < 1
        ):
            raise ValueError("--local-workers and --gpus-per-worker must be >= 1")
        if self.heartbeat is not None and not self.heartbeat > 0:
            raise ValueError("--heartbeat must be > 0")
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

    def adjust_run(self, run: RunOptions) -> RunOptions:
        """The local workers' cluster; rounds default to LOCAL_ROUND_LENGTH_S."""
        run = replace(
            run,
            round_length_s=(
                LOCAL_ROUND_LENGTH_S if run.round_length_s is None else run.round_length_s
            ),
            cluster_runtime=self.cluster_runtime(run.cluster_runtime),
        )
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


class GrpcBackend:
    name = "grpc"
    description = "real jobs on local worker agents over gRPC (one worker per server)"
    # Real jobs: progress and batch-size changes come from the jobs, not from a model.
    simulates_jobs = False
    options_type = GrpcOptions

    def run(self, request: RunRequest) -> RunResult:
        # Imported here: loading the plugin must not need the cluster extra.
        try:
            from shock.cluster.auth import new_token
            from shock.cluster.local import LocalWorkers, LocalWorkerSpec
            from shock.cluster.scheduler import ClusterScheduler, SchedulerSettings
            from shock.cluster.service import ServerAddress, start_server
        except ImportError as exc:
            raise ShockError(
                f"the grpc backend needs the cluster extra (pip install 'shock[cluster]'): {exc}"
            ) from None
        runtime = request.config.cluster_runtime
        with tempfile.TemporaryDirectory(prefix="shock-grpc-") as scratch:
            state_dir = Path(runtime.state_dir) if runtime.state_dir else Path(scratch)
            servers = request.cluster.servers()
            settings = SchedulerSettings(
                state_dir=state_dir,
                heartbeat_s=runtime.heartbeat_s,
                dead_after_s=max(5.0, 5 * runtime.heartbeat_s),
                min_workers=len(servers),
            )
            token = new_token()
            scheduler = ClusterScheduler(request, settings)
            server, port = start_server(scheduler, ServerAddress(port=0), token)
            workers = LocalWorkers()
            try:
                with _sigterm_as_interrupt():
                    first_device = 0
                    specs = []
                    for server_spec in servers:
                        devices = tuple(range(first_device, first_device + server_spec.num_gpus))
                        first_device += server_spec.num_gpus
                        specs.append(
                            LocalWorkerSpec(
                                server_spec.worker_type,
                                server_spec.num_gpus,
                                devices,
                                server_spec.cpus,
                                server_spec.memory_gb,
                            )
                        )
                    workers.start(
                        specs,
                        f"127.0.0.1:{port}",
                        token,
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
                server.stop(grace=1.0).wait(timeout=5)
                scheduler.journal.close()


@hookimpl
def register_backends(register: Register) -> None:
    register(GrpcBackend())
