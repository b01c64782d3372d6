"""Helpers for the cluster tests: a trace of stand-in jobs and child processes that are
always stopped (own process groups, SIGKILL at the end)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.trace import write_trace as save_trace

HERE = Path(__file__).parent
# The job program the cluster tests run. Switch to the real training harness by setting it
# to None (the agents' default, `python -m shock.workloads.run`).
JOB_COMMAND: list[str] | None = None
SHOCK = [sys.executable, "-m", "shock"]

# (job type, steps): 6 jobs of 4 families, ~8-15 s each alone with the stand-in job.
SIX_JOBS = [
    ("ResNet-18 (batch size 32)", 240),
    ("ResNet-50 (batch size 32)", 120),
    ("Transformer (batch size 32)", 150),
    ("LM (batch size 32)", 300),
    ("ResNet-18 (batch size 32)", 200),
    ("Recommendation (batch size 32)", 400),
]


def write_trace(path: Path, jobs: list[tuple[str, int]]) -> Path:
    """The jobs as a Gavel trace, all arriving at time 0."""
    specs = [
        JobSpec(i, job_type, steps, command="python3 train.py", working_directory="wd",
                num_steps_arg="--num_steps")
        for i, (job_type, steps) in enumerate(jobs)
    ]  # fmt: skip
    save_trace(specs, path, default_registry(), "gavel")
    return path


def job_command_options() -> list[str]:
    return [] if JOB_COMMAND is None else ["--job-command", " ".join(JOB_COMMAND)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """Child processes in their own process groups; `stop_all` kills what is left."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []
        self.named: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None
              ) -> subprocess.Popen[bytes]:  # fmt: skip
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})}, start_new_session=True,
            )  # fmt: skip
        self.started.append(process)
        self.named[name] = process
        return process

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_all(self) -> None:
        for process in self.started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


@contextlib.contextmanager
def processes(log_dir: Path) -> Iterator[Processes]:
    group = Processes(log_dir)
    try:
        yield group
    finally:
        group.stop_all()


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def query(state_dir: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the journal (read-only, next to a live scheduler)."""
    path = state_dir / "journal.sqlite"
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # the scheduler has not created it yet
        raise  # a broken query must fail the test, not read as "nothing yet"
    finally:
        db.close()

