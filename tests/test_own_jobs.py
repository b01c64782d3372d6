"""People's own training scripts on the cluster, end to end on loopback: a real `shock serve`,
a real `shock worker`, scripts that use `shock.job` submitted with `shock submit -- python
script.py`, preempted by competing jobs and resumed; and each bad input or fault ending that
job alone with a one-line reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster_procs import SHOCK, Processes, free_port, query, wait_for

pytestmark = pytest.mark.slow

TOKEN = "own-jobs-secret-1"
# Exactly the issue's loop; a step sleeps 5 ms so that 2000 steps span several rounds.
SCRIPT = """\
import time
from shock import job
with job.session() as s:                    # outside shock: a local session
    state = s.restore() or {"step": 0}      # the last checkpoint, or None
    for step in s.steps(total=2000, start=state["step"]):   # stops early when preempted
        time.sleep(0.005)                   # one training step
        state["step"] = step + 1
        if s.checkpoint_due():
            s.checkpoint(state)             # atomic; any picklable/torch-saveable object
    s.checkpoint(state)                     # after the loop: done or preempted
"""
CRASH = "print('about to fail', flush=True)\n1 / 0\n"
GARBAGE = """\
import os, time
from shock import job
with job.session() as s:
    os.write(int(os.environ["SHOCK_CHANNEL"].split(",")[1]), b"hello there\\n")
    for step in s.steps(total=100000):
        time.sleep(0.01)
"""
UNPICKLABLE = """\
import threading
from shock import job
with job.session() as s:
    for step in s.steps(total=10):
        pass
    s.checkpoint({"step": s.step, "lock": threading.Lock()})
"""
SILENT = "import time\ntime.sleep(600)\n"


@dataclass
class Service:
    procs: Processes
    state_dir: Path
    address: str
    serve_args: list[str]
    workdir: Path

    def cli(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        # The options before the arguments: after `--` everything is the job's command.
        return subprocess.run(
            [*SHOCK, command, "--scheduler", self.address, *args], capture_output=True, text=True,
            timeout=120, env={**os.environ, "SHOCK_TOKEN": TOKEN}, cwd=self.workdir,
        )  # fmt: skip

    def submit(self, *args: str) -> int:
        done = self.cli("submit", *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return int(done.stdout.strip().splitlines()[-1])

    def job_row(self, job_id: int) -> dict[str, Any]:
        rows = query(self.state_dir, "SELECT step, target_steps, completed_at, ended_state, "
                     f"message FROM jobs WHERE job_id = {job_id}")  # fmt: skip
        if not rows:
            return {}
        step, target, completed, ended, message = rows[0]
        state = "done" if completed is not None else ended or "active"
        return {"step": step, "target": target, "state": state, "message": message}

    def wait_over(self, job_id: int, timeout_s: float = 150) -> dict[str, Any]:
        wait_for(lambda: self.job_row(job_id).get("state") in ("done", "failed", "cancelled"),
                 timeout_s, f"job {job_id} to end")  # fmt: skip
        return self.job_row(job_id)

    def runs(self, job_id: int) -> list[tuple[Any, ...]]:
        return query(self.state_dir, "SELECT run_id, resumed_from_step, end_reason FROM runs "
                     f"WHERE job_id = {job_id} ORDER BY run_id")  # fmt: skip

    def listed(self) -> dict[int, dict[str, Any]]:
        """`shock jobs --json`, once the service answers (it may be restarting)."""
        found: dict[int, dict[str, Any]] = {}

        def answered() -> bool:
            done = self.cli("jobs", "--json")
            if done.returncode != 0:
                assert "unreachable" in done.stderr, done.stderr
                return False
            found.update({job["id"]: job for job in json.loads(done.stdout)})
            return True

        wait_for(answered, 60, "the service to answer")
        return found


def _start(tmp: Path, procs: Processes) -> Service:
    port = free_port()
    state_dir, address = tmp / "state", f"127.0.0.1:{port}"
    serve_args = [*SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port),
                  "--policy", "max_min_fairness", "--round-length", "2", "--heartbeat", "0.3",
                  "--dead-after", "5"]  # fmt: skip
    env = {"SHOCK_TOKEN": TOKEN}
    procs.start("serve", serve_args, env)
    # `python` on the worker's PATH is this interpreter, as in a user's activated venv.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    procs.start("worker", [
        *SHOCK, "worker", "--scheduler", address, "--gpus", "1", "--gpu-type", "v100",
        "--simulated", "--heartbeat", "0.3", "--checkpoint-every", "0.5",
        "--log-dir", str(tmp / "worker-logs"), "--scheduler-timeout", "120",
        "--report-timeout", "6",
    ], {**env, "PATH": path})  # fmt: skip
    wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM workers")), 60, "the worker")
    workdir = tmp / "work"
    workdir.mkdir(exist_ok=True)
    return Service(procs, state_dir, address, serve_args, workdir)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("own-jobs")
    procs = Processes(tmp / "logs")
    try:
        yield _start(tmp, procs)
    finally:
        procs.stop_all()


def test_the_issues_script_is_preempted_resumed_and_ends_with_exactly_2000_steps(
    service: Service,
) -> None:
    (service.workdir / "script.py").write_text(SCRIPT)
    first = service.submit("--name", "mine", "--", "python", "script.py")
    # A competitor: the fair policy alternates the one GPU between the two every round.
    second = service.submit("--", "python", "script.py")
    for job_id in (first, second):
        row = service.wait_over(job_id)
        assert row["state"] == "done", row
        assert (row["step"], row["target"]) == (2000, 2000)
        runs = service.runs(job_id)
        assert len(runs) >= 2, runs
        assert "preempted" in [reason for _, _, reason in runs]
        assert any(resumed and resumed > 0 for _, resumed, _ in runs), runs
    listed = service.listed()
    assert listed[first]["job_type"] == "mine" and listed[second]["job_type"] == "script.py"
    assert listed[first]["state"] == "done" and listed[first]["step"] == 2000
    assert listed[first]["command"] == ["python", "script.py"]
    logs = service.cli("logs", str(first)).stdout
    assert "==> run " in logs and "python script.py" in logs and "ended (done)" in logs
    # Following a job that has ended prints its whole output once and stops.
    assert service.cli("logs", str(first), "--follow").stdout == logs


def test_bad_submissions_are_refused_in_one_line_and_create_no_job(service: Service) -> None:
    before = query(service.state_dir, "SELECT COUNT(*) FROM jobs")[0][0]
    for args, expected in (
        (["--gpus", "0", "--", "python", "script.py"], "--gpus"),
        (["--gpus", "5", "--", "python", "script.py"], "the cluster has 1 v100"),
        (["--scale-factor", "0", "--job-type", "LM (batch size 20)", "--steps", "9"], "--gpus"),
        (["--job-type", "LM (batch size 20)"], "needs --steps"),
        (["--job-type", "LM (batch size 20)", "--steps", "0"], "--steps"),
    ):
        done = service.cli("submit", *args)
        assert done.returncode != 0, (args, done.stdout)
        assert expected in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert query(service.state_dir, "SELECT COUNT(*) FROM jobs")[0][0] == before


def test_each_faulty_job_fails_alone_with_its_reason_and_survives_a_restart(
    service: Service,
) -> None:
    work = service.workdir
    (work / "script.py").write_text(SCRIPT)
    (work / "crash.py").write_text(CRASH)
    (work / "garbage.py").write_text(GARBAGE)
    (work / "unpicklable.py").write_text(UNPICKLABLE)
    (work / "silent.py").write_text(SILENT)
    (work / "not-executable.sh").write_text("#!/bin/sh\necho hi\n")
    good = service.submit("--", "python", "script.py")
    faults = {
        service.submit("--", "no-such-command-here"): "cannot start 'no-such-command-here'",
        service.submit("--", "./not-executable.sh"): "Permission denied",
        service.submit("--", "python", "crash.py"): "ZeroDivisionError: division by zero",
        service.submit("--", "python", "garbage.py"): "not a job message on the job channel",
        service.submit("--", "python", "silent.py"): "lost its lease: no progress report",
        service.submit("--", "python", "unpicklable.py"): "cannot checkpoint a dict at step 10",
    }
    for job_id, reason in faults.items():
        row = service.wait_over(job_id)
        assert row["state"] == "failed" and reason in row["message"], row
        assert "\n" not in row["message"]
    # Nothing is lost across a scheduler restart (kill -9, then the same state directory).
    serve = service.procs.started[0]
    os.killpg(serve.pid, signal.SIGKILL)
    serve.wait(timeout=10)
    service.procs.started[0] = service.procs.start("serve-2", service.serve_args,
                                                   {"SHOCK_TOKEN": TOKEN})  # fmt: skip
    row = service.wait_over(good, timeout_s=180)
    assert row["state"] == "done" and row["step"] == 2000, row
    listed = service.listed()
    for job_id, reason in faults.items():
        assert listed[job_id]["state"] == "failed" and reason in listed[job_id]["message"]
        assert listed[job_id]["gpus"] == []
        logs = service.cli("logs", str(job_id))
        assert logs.returncode == 0 and reason in logs.stdout, logs.stdout
    assert "about to fail" in service.cli("logs", str(next(iter(faults)) + 2)).stdout
