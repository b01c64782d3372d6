"""Local worker agents as child processes (`shock run --backend grpc --local-workers N`).

Each worker is its own process group, gets the token through its environment (not argv,
which any user can read) and SIGTERM if this process dies; `stop` always ends every process
it started within a bounded time.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shock.cluster.defaults import TOKEN_ENV
from shock.cluster.jobproc import die_with_parent


@dataclass(frozen=True, slots=True)
class LocalWorkerSpec:
    gpu_type: str
    gpus: int
    cuda_devices: tuple[int, ...]  # this worker's slice of the machine's devices, if any
    # CPU cores and memory (GB) it offers (a cluster file's server); 0: the machine's.
    cpus: float = 0.0
    memory_gb: float = 0.0


def worker_command(
    spec: LocalWorkerSpec,
    scheduler: str,
    job_command: Sequence[str],
    log_dir: Path,
    heartbeat_s: float,
    checkpoint_every_s: float | None,
) -> list[str]:
    command = [
        sys.executable, "-m", "shock", "worker",
        "--scheduler", scheduler,
        "--gpus", str(spec.gpus),
        "--gpu-type", spec.gpu_type,
        "--log-dir", str(log_dir),
        "--heartbeat", str(heartbeat_s),
        "--scheduler-timeout", "60",
        # All on this machine: a gang's ranks meet on loopback.
        "--rendezvous-host", "127.0.0.1",
    ]  # fmt: skip
    if job_command:
        command += ["--job-command", shlex.join(job_command)]
    if checkpoint_every_s is not None:
        command += ["--checkpoint-every", str(checkpoint_every_s)]
    if spec.cpus > 0:
        command += ["--cpus", repr(spec.cpus)]
    if spec.memory_gb > 0:
        command += ["--memory-gb", repr(spec.memory_gb)]
    return command


class LocalWorkers:
    """Worker processes started by this process."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        specs: Sequence[LocalWorkerSpec],
        scheduler: str,
        token: str,
        job_command: Sequence[str],
        log_dir: Path,
        heartbeat_s: float = 1.0,
        checkpoint_every_s: float | None = None,
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        for index, spec in enumerate(specs):
            env = dict(os.environ)
            env[TOKEN_ENV] = token
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in spec.cuda_devices)
            with (log_dir / f"worker-{index + 1}.log").open("ab") as log:
                self.processes.append(
                    subprocess.Popen(
                        worker_command(
                            spec, scheduler, job_command, log_dir / f"worker-{index + 1}",
                            heartbeat_s, checkpoint_every_s,
                        ),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                        preexec_fn=die_with_parent,
                    )
                )

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM every worker (they preempt their jobs), SIGKILL what is left."""
        for process in self.processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process in self.processes:
            _signal_group(process, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
