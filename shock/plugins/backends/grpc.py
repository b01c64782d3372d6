"""The `grpc` backend: the scheduler service in this process, local worker agents as child
processes (one per server of the cluster), real job processes on their GPUs."""

from __future__ import annotations

import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from shock.cluster.defaults import DEFAULT_JOB_COMMAND
from shock.core.errors import ShockError
from shock.core.hookspecs import Register, hookimpl
from shock.core.results import RunResult
from shock.core.run import RunRequest


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
