"""`python -m shock.workloads.run` driven over stdin/stdout exactly as the agent contract says:
launch, progress, lease request and renewal, preempt, SIGTERM, relaunch resumes, done."""

from __future__ import annotations

import json
import os
import queue
import re
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="job processes need PyTorch (pip install .[cluster])")

TIMEOUT_S = 60.0


class JobProcess:
    """One job run; its stdout lines are decoded as they arrive."""

    def __init__(
        self,
        checkpoint_dir: Path,
        *extra: str,
        job_type: str = "LM (batch size 80)",
        target_steps: int = 200,
        replies: dict[str, dict] | None = None,
    ):
        command = [
            sys.executable,
            "-m",
            "shock.workloads.run",
            "--job-id",
            "7",
            "--job-type",
            job_type,
            "--target-steps",
            str(target_steps),
            "--checkpoint-dir",
            str(checkpoint_dir),
            "--seed",
            "0",
            "--report-every-s",
            "0.02",
            *extra,
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.messages: list[dict] = []
        # Answered by the reader thread the moment the message arrives, as an agent would.
        self._replies = dict(replies or {})
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            reply = self._replies.pop(json.loads(line)["type"], None)
            if reply is not None:
                self.send(reply)
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: dict | str) -> None:
        assert self.process.stdin is not None
        text = message if isinstance(message, str) else json.dumps(message)
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def expect(self, kind: str) -> dict:
        """The next message of this type (every line must be JSON)."""
        while True:
            line = self._lines.get(timeout=TIMEOUT_S)
            if line is None:
                raise AssertionError(f"stdout closed before a {kind!r} message: {self.messages}")
            message = json.loads(line)  # anything not JSON on stdout breaks the contract
            self.messages.append(message)
            if message["type"] == kind:
                return message

    def finish(self) -> int:
        self.expect_eof()
        return self.process.wait(timeout=TIMEOUT_S)

    def expect_eof(self) -> None:
        while (line := self._lines.get(timeout=TIMEOUT_S)) is not None:
            self.messages.append(json.loads(line))


def test_contract_round_trip(tmp_path):
    checkpoints = tmp_path / "job-7"

    # Run 1: a 100-step lease; the job asks for more with 10 steps (~0.1 s) left and keeps
    # training; the renewal (20 more steps) arrives well before the lease runs out.
    # No periodic checkpoint (however slowly the steps run): the only one is at the lease's end.
    renewal = {"lease_request": {"type": "lease", "steps": 20}}
    no_periodic = ("--checkpoint-every-s", "1e9")
    run = JobProcess(checkpoints, "--lease-steps", "100", *no_periodic, replies=renewal)
    started = run.expect("started")
    limits = started.pop("limits")
    assert started == {
        "type": "started",
        "job_id": 7,
        "step": 0,
        "batch_size": 80,
        "resumed_from_step": 0,
    }
    # What the process runs under, as it reads them (inherited from this one here).
    data_limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    assert limits == {
        "threads": 1,
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [],
        "memory_limit_bytes": None if data_limit == resource.RLIM_INFINITY else data_limit,
    }
    progress = run.expect("progress")
    assert progress["batch_size"] == 80 and progress["steps_per_s"] > 0
    assert {"step", "steps_per_s", "batch_size", "loss"} <= progress.keys()
    assert run.expect("lease_request")["step"] == 90  # 10% of 100 steps left
    checkpoint = run.expect("checkpoint")
    assert checkpoint == {
        "type": "checkpoint",
        "step": 120,
        "path": str(checkpoints / "ckpt-120.pt"),
    }
    assert run.expect("exit") == {
        "type": "exit",
        "reason": "lease_expired",
        "step": 120,
        "target_steps": 200,
    }
    assert run.finish() == 0
    assert Path(checkpoint["path"]).exists()
    # Its log (stderr) has a progress line per report: what `shock logs` shows of the job.
    assert run.process.stderr is not None
    assert re.search(r"^step \d+/200 loss \S+ steps/s \S+ batch size 80$",
                     run.process.stderr.read(), re.MULTILINE)  # fmt: skip

    # Run 2: resumes at 120; a malformed line is ignored; preempt stops it at a boundary.
    run = JobProcess(checkpoints)
    assert run.expect("started")["resumed_from_step"] == 120
    run.send("this is not json")
    run.expect("progress")
    run.send({"type": "preempt"})
    preempted = run.expect("exit")
    assert preempted["reason"] == "preempted" and 120 < preempted["step"] < 200
    assert run.finish() == 0

    # Run 3: SIGTERM is a preemption too.
    run = JobProcess(checkpoints)
    assert run.expect("started")["resumed_from_step"] == preempted["step"]
    run.expect("progress")
    run.process.send_signal(signal.SIGTERM)
    terminated = run.expect("exit")
    assert terminated["reason"] == "preempted"
    assert run.finish() == 0

    # Run 4: stdin closed at once (EOF is ignored); runs to the end, exactly the target.
    run = JobProcess(checkpoints)
    assert run.process.stdin is not None
    run.process.stdin.close()
    assert run.expect("started")["resumed_from_step"] == terminated["step"]
    assert run.expect("exit") == {
        "type": "exit",
        "reason": "done",
        "step": 200,
        "target_steps": 200,
    }
    assert run.finish() == 0
    last_progress = [m for m in run.messages if m["type"] == "progress"][-1]
    assert last_progress["step"] == 200 and last_progress["samples"] == 200 * 80


def test_batch_size_approval_over_stdio(tmp_path):
    approval = {"batch_size_request": {"type": "batch_size", "batch_size": 20}}
    run = JobProcess(
        tmp_path,
        "--adaptation",
        "gns",
        "--adaptation-window-samples",
        "50",
        job_type="LM (batch size 10)",
        target_steps=60,
        replies=approval,
    )
    run.expect("started")
    request = run.expect("batch_size_request")
    assert request == {"type": "batch_size_request", "step": 20, "batch_size": 20, "reason": "gns"}
    done = run.expect("exit")
    assert done["reason"] == "done" and done["step"] == done["target_steps"] < 60
    assert run.finish() == 0
    progress = [m for m in run.messages if m["type"] == "progress"]
    assert progress[-1]["batch_size"] == 20 and progress[-1]["samples"] == 600


def test_job_whose_agent_is_gone_checkpoints_and_exits(tmp_path):
    command = [sys.executable, "-m", "shock.workloads.run", "--job-id", "1"]
    command += ["--job-type", "LM (batch size 80)", "--target-steps", "1000000"]
    command += ["--checkpoint-dir", str(tmp_path), "--report-every-s", "0.05"]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    assert json.loads(process.stdout.readline())["type"] == "started"
    assert json.loads(process.stdout.readline())["type"] == "progress"
    process.stdout.close()  # the agent died: the job's next report hits a closed pipe
    assert process.wait(timeout=TIMEOUT_S) == 0
    assert process.stdin is not None
    process.stdin.close()
    found = list(tmp_path.glob("ckpt-*.pt"))
    assert len(found) == 1 and 0 < int(found[0].stem.split("-")[1]) < 1_000_000


def test_unknown_job_type_is_an_error_message_and_exit_1(tmp_path):
    run = JobProcess(tmp_path, job_type="VGG-16 (batch size 32)")
    error = run.expect("error")
    assert "no workload for model family 'VGG-16'" in error["message"]
    assert run.finish() == 1


def test_missing_cuda_device_is_refused():
    import torch

    from shock.workloads.workload import check_device

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        check_device("cuda:0")
    with pytest.raises(ValueError, match="expected cpu or cuda:N"):
        check_device("tpu")


def test_bad_arguments_are_an_error_message_and_exit_1():
    process = subprocess.run(
        [sys.executable, "-m", "shock.workloads.run", "--job-id", "x"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert process.returncode == 1
    error = json.loads(process.stdout)
    assert error["type"] == "error" and "--job-id" in error["message"]
