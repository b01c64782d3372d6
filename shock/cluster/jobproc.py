"""One job run as an OS process, speaking the job protocol (docs/cluster.md, "Job contract").

The agent starts the job command with the contract's arguments, reads JSON lines from its
stdout (each becomes a `JobEvent`, or a lease request the agent answers), and writes lease,
preempt and batch-size messages to its stdin. The process is its own process group (so it
can be stopped with all its children) and gets SIGTERM, which the contract treats as
"preempt", if the agent dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from shock.cluster.bounds import (
    UNBOUNDED,
    JobBounds,
    apply_to_running,
    child_setup,
    thread_environment,
    threads_for,
)
from shock.cluster.command_launch import start_command
from shock.cluster.runtime.messages import (
    BatchSizeRequest,
    Checkpoint,
    Exit,
    JobEvent,
    JobLimits,
    Launch,
    Progress,
    Started,
)

_PR_SET_PDEATHSIG = 1
_LINGER_S = 30.0
# A job's log line that says what its agent did (launch, end), so no log is ever empty.
_AGENT = b"[shock] "
_TAIL_BYTES = 4096


def die_with_parent() -> None:
    """In a child: get SIGTERM when the thread that started it dies (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def job_arguments(launch: Launch, device: str, checkpoint_every_s: float | None) -> list[str]:
    args = [
        "--job-id", str(launch.job_id),
        "--job-type", launch.job_type,
        "--target-steps", str(launch.target_steps),
        "--checkpoint-dir", launch.checkpoint_dir,
        "--seed", str(launch.seed),
        "--device", device,
    ]  # fmt: skip
    if launch.adaptation:
        args += ["--adaptation", launch.adaptation]
    if launch.lease_s > 0:
        args += ["--lease-s", f"{launch.lease_s:.3f}"]
    if checkpoint_every_s is not None:
        args += ["--checkpoint-every-s", str(checkpoint_every_s)]
    if launch.cpus > 0:
        args += ["--num-threads", str(threads_for(launch.cpus))]
    if launch.world_size > 1:
        args += [
            "--world-size", str(launch.world_size),
            "--rank", str(launch.rank),
            "--local-rank", str(launch.local_rank),
            "--master-addr", launch.master_addr,
            "--master-port", str(launch.master_port),
        ]  # fmt: skip
    return args


def parse_job_line(line: str) -> dict[str, Any] | None:
    """A job's stdout line as a message, or None when it is not a JSON object with a type."""
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return None
    return message


def event_from_message(message: dict[str, Any]) -> JobEvent | None:
    """The job event for a job message; None for messages the agent handles itself (lease
    requests) or does not know."""
    kind = message["type"]

    def num(name: str, default: float = 0) -> Any:
        # JSON allows Infinity and NaN; neither is a step count or a rate.
        value = message.get(name, default)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return value if number and math.isfinite(value) else default

    if kind == "started":
        return JobEvent(Started(
            step=int(num("step")),
            batch_size=int(num("batch_size")),
            resumed_from_step=int(num("resumed_from_step")),
            limits=job_limits(message.get("limits")),
        ))  # fmt: skip
    if kind == "progress":
        return JobEvent(Progress(
            step=int(num("step")),
            steps_per_s=float(num("steps_per_s")),
            batch_size=int(num("batch_size")),
            loss=float(num("loss")),
            target_steps=int(num("target_steps")),
        ))  # fmt: skip
    if kind == "checkpoint":
        return JobEvent(Checkpoint(step=int(num("step")), path=str(message.get("path", ""))))
    if kind == "batch_size_request":
        return JobEvent(BatchSizeRequest(
            step=int(num("step")),
            batch_size=int(num("batch_size")),
            reason=str(message.get("reason", "")),
        ))  # fmt: skip
    if kind == "exit":
        return JobEvent(Exit(
            reason=str(message.get("reason", "")),
            step=int(num("step")),
            target_steps=int(num("target_steps")),
        ))  # fmt: skip
    if kind == "error":
        return JobEvent(Exit(reason="error", message=str(message.get("message", ""))))
    return None


def job_limits(raw: object) -> JobLimits | None:
    """The `limits` a job reported in its "started" line; None when absent or malformed."""
    if not isinstance(raw, dict):
        return None
    threads, cpus, memory = raw.get("threads"), raw.get("cpus"), raw.get("memory_limit_bytes")
    if not isinstance(threads, int) or not _is_int(threads):
        return None
    if not isinstance(cpus, list) or not all(map(_is_int, cpus)):
        return None
    memory_limit = memory if isinstance(memory, int) and _is_int(memory) else 0
    return JobLimits(threads, tuple(cpus), memory_limit)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def last_log_line(path: Path) -> str:
    """The last line a job wrote to its log (not the agent's own), for a one-line reason."""
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - _TAIL_BYTES))
            lines = log.read().splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        text = line.decode(errors="replace").strip()
        if text and not line.startswith(_AGENT):
            return text[:300]
    return ""


class JobProcess:
    """A running job: its process, a reader thread for its messages and a writer for the
    agent's commands (stdout and stdin for the built-in harness; two pipes for a person's
    own command, whose stdout and stderr go to its log)."""

    def __init__(
        self,
        launch: Launch,
        command: Sequence[str],
        device: str,
        log_path: Path,
        on_event: Callable[[JobProcess, JobEvent], None],
        on_lease_request: Callable[[JobProcess, int], None],
        checkpoint_every_s: float | None = None,
        env: dict[str, str] | None = None,
        warm: subprocess.Popen[bytes] | None = None,
        bounds: JobBounds = UNBOUNDED,
    ) -> None:
        """`warm`: a started `shock.workloads.warm` process to launch instead of `command`.
        `bounds`: its CPU and memory bounds (`shock/cluster/bounds.py`)."""
        self.launch = launch
        self.bounds = bounds
        self.run_id = launch.run_id
        self.job_id = launch.job_id
        self.step = 0
        self.checkpoint_step = 0
        self.saw_exit = False
        self.is_command = bool(launch.command)
        self.spoke = False  # it sent a message of the contract (it uses shock.job)
        # When the job last said anything (a job that stays silent loses its lease).
        self.last_heard = time.monotonic()
        self.log_path = log_path
        self._on_event = on_event
        self._on_lease_request = on_lease_request
        self._stdin_lock = threading.Lock()
        self._stop_requested = False
        self._failure: str | None = None  # why the agent ended it, if it did
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        self._events: IO[bytes] | None
        self._commands: IO[bytes] | None
        base_env = dict(os.environ) if env is None else env
        if self.is_command:
            self.note(f"run {launch.run_id} of job {launch.job_id}: {' '.join(launch.command)}"
                      f" in {launch.workdir or '.'} on {device}")  # fmt: skip
            started = start_command(launch, device, checkpoint_every_s, base_env, bounds,
                                    self._log, die_with_parent)  # fmt: skip
            self.process = started.process
            self._events, self._commands = started.events, started.commands
        else:
            self.note(f"run {launch.run_id} of job {launch.job_id}: {launch.job_type} on {device}")
            arguments = job_arguments(launch, device, checkpoint_every_s)
            if warm is not None:
                self.process = warm
                self._events, self._commands = warm.stdout, warm.stdin
                apply_to_running(warm.pid, bounds)  # before the launch line: it is still idle
                self.send({"argv": arguments, "stderr": str(log_path)})
            else:
                self.process = subprocess.Popen(
                    [*command, *arguments],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._log,
                    start_new_session=True,  # its own process group: stop it with its children
                    preexec_fn=child_setup(bounds, die_with_parent),
                    env=thread_environment(base_env, bounds),
                )
                self._events, self._commands = self.process.stdout, self.process.stdin
        self._reader = threading.Thread(target=self._read, name=f"job-{self.run_id}", daemon=True)
        self._reader.start()

    def note(self, text: str) -> None:
        """One line of the agent's own in the job's log."""
        with contextlib.suppress(OSError, ValueError):
            self._log.write(_AGENT + text.encode(errors="replace") + b"\n")
            self._log.flush()

    def _read(self) -> None:
        events = self._events
        assert events is not None
        for raw in events:
            self.last_heard = time.monotonic()
            message = parse_job_line(raw.decode(errors="replace"))
            event = None if message is None else event_from_message(message)
            if message is None or (event is None and message["type"] != "lease_request"):
                if self.is_command:
                    # Its own channel carries only messages: garbage there is a broken job.
                    shown = raw.decode(errors="replace").strip()[:80]
                    self.fail(f"wrote something that is not a job message on the job "
                              f"channel: {shown!r}")  # fmt: skip
                    break
                self._log.write(b"[agent] not a job message: " + raw)
                continue
            assert message is not None
            self.spoke = True
            if isinstance(message.get("step"), int):
                self.step = message["step"]
            if message["type"] == "lease_request":
                self._on_lease_request(self, self.step)
                continue
            assert event is not None
            payload = event.payload
            if isinstance(payload, Checkpoint):
                self.checkpoint_step = payload.step
            if isinstance(payload, Exit):
                if self.saw_exit:
                    continue
                self.saw_exit = True
                payload = replace(payload, exit_code=self._wait_for_exit())
                event = JobEvent(payload)
                self._note_exit(payload)
            self._on_event(self, event)
        code = self.process.wait()
        if not self.saw_exit:
            self.saw_exit = True
            exit = self._unannounced_exit(code)
            self._note_exit(exit)
            self._on_event(self, JobEvent(exit))
        self._log.close()

    def _unannounced_exit(self, code: int) -> Exit:
        """How a process that ended without an exit line ended."""
        if self._failure is not None:
            return Exit(reason="error", step=self.step, exit_code=code, message=self._failure)
        if self.is_command and code == 0:
            # A command that does not use shock.job: it ran to its end.
            done = max(self.step, self.launch.target_steps)
            return Exit(reason="done", step=done, target_steps=done, exit_code=0)
        if self.is_command and self._stop_requested:
            # Stopped by its preemption (SIGTERM) without a word: back to its checkpoint.
            return Exit(reason="preempted", step=self.checkpoint_step, exit_code=code)
        line = last_log_line(self.log_path)
        message = f"exited with code {code}" + (f": {line}" if line else "")
        return Exit(reason="crashed", step=self.step, exit_code=code, message=message)

    def _note_exit(self, exit: Exit) -> None:
        detail = f": {exit.message}" if exit.message else ""
        self.note(f"run {self.run_id} ended ({exit.reason}) at step {exit.step}, exit code "
                  f"{exit.exit_code}{detail}")  # fmt: skip

    def fail(self, message: str) -> None:
        """End the job now as failed with this reason (the agent's decision)."""
        if self._failure is None:
            self._failure = message
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def _wait_for_exit(self) -> int:
        """The exit line is the job's last word: a process that lingers after it is ended."""
        try:
            return self.process.wait(timeout=_LINGER_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()

    @property
    def finished(self) -> bool:
        return self.saw_exit and not self._reader.is_alive()

    def send(self, message: dict[str, object]) -> None:
        """Write one message to the job's stdin; a job that already exited is ignored."""
        stdin = self._commands
        if stdin is None:
            return
        with self._stdin_lock:
            try:
                stdin.write((json.dumps(message) + "\n").encode())
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def preempt(self) -> None:
        self._stop_requested = True
        self.send({"type": "preempt"})
        if self.is_command and not self.spoke and self.process.poll() is None:
            # A command that has not spoken the contract yet (a script without shock.job, or
            # one still importing) gets the contract's SIGTERM: it stops, and resumes from
            # its last checkpoint. One that speaks it stops at its next step on the message
            # alone (frameworks such as Lightning treat SIGTERM as a failure). Its own
            # process only: its children (data loaders) are its to end.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)

    def kill(self, grace_s: float) -> None:
        """SIGTERM (the contract's preempt), then SIGKILL the group after `grace_s`."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=5)
        self._reader.join(timeout=5)
