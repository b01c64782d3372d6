"""The cluster as a service, end to end on loopback: a real `shock serve` without a trace, a
real `shock worker`, real (tiny) training jobs, and the user commands `shock submit`, `jobs`,
`cancel`, `logs` and `watch` as people run them."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster_procs import SHOCK, Processes, free_port, job_command_options, query, wait_for

pytestmark = pytest.mark.slow

WORKER_TOKEN = "worker-secret-1"
TOKENS = {"alice": "alice-secret-1", "bob": "bob-secret-1", "root": "root-secret-1"}
LONG = ["--job-type", "ResNet-18 (batch size 32)", "--steps", str(10**7)]
SHORT = ["--job-type", "LM (batch size 20)", "--steps", "60"]
STATES = {"queued", "running", "done", "cancelled", "failed"}


def _users_file(path: Path) -> Path:
    lines = []
    for name, token in TOKENS.items():
        digest = hashlib.sha256(token.encode()).hexdigest()
        weight = 2 if name == "alice" else 1
        admin = "true" if name == "root" else "false"
        lines.append(f'[[user]]\nname = "{name}"\nweight = {weight}\n'
                     f'token_sha256 = "{digest}"\nadmin = {admin}\n')  # fmt: skip
    path.write_text("\n".join(lines))
    return path


@dataclass
class Service:
    procs: Processes
    state_dir: Path
    address: str
    serve_args: list[str]
    serve: subprocess.Popen[bytes]
    admin_token: str

    def cli(self, *args: str, token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SHOCK, *args, "--scheduler", self.address], capture_output=True, text=True,
            timeout=120, env={**os.environ, "SHOCK_TOKEN": token},
        )  # fmt: skip

    def ok(self, *args: str, token: str) -> str:
        done = self.cli(*args, token=token)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def submit(self, *args: str, token: str) -> int:
        return int(self.ok("submit", *args, token=token).strip().splitlines()[-1])

    def jobs(self, token: str | None = None) -> dict[int, dict[str, Any]]:
        listed = self.ok("jobs", "--json", token=token or self.admin_token)
        return {job["id"]: job for job in json.loads(listed)}

    def wait_job(self, job_id: int, what: str, test: Any, timeout_s: float = 120) -> dict:
        found: dict[str, Any] = {}

        def check() -> bool:
            listed = self.cli("jobs", "--json", token=self.admin_token)
            if listed.returncode != 0:
                assert "unreachable" in listed.stderr, listed.stderr  # (re)starting
                return False
            found.update(next(job for job in json.loads(listed.stdout) if job["id"] == job_id))
            return bool(test(found))

        wait_for(check, timeout_s, f"job {job_id} {what}")
        return found


def _start(tmp: Path, users: Path | None, token: str, admin_token: str) -> Service:
    procs = Processes(tmp / "logs")
    port = free_port()
    state_dir, address = tmp / "state", f"127.0.0.1:{port}"
    serve_args = [*SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port),
                  "--policy", "fifo", "--round-length", "4", "--heartbeat", "0.5",
                  "--dead-after", "5"]  # fmt: skip
    if users is not None:
        serve_args += ["--users", str(users)]
    env = {"SHOCK_TOKEN": token}
    serve = procs.start("serve", serve_args, env)
    procs.start("worker", [
        *SHOCK, "worker", "--scheduler", address, "--gpus", "1", "--gpu-type", "v100",
        "--simulated", "--heartbeat", "0.5", "--checkpoint-every", "1",
        "--log-dir", str(tmp / "worker-logs"), "--scheduler-timeout", "120",
        *job_command_options(),
    ], env)  # fmt: skip
    wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM workers")), 60, "the worker")
    return Service(procs, state_dir, address, serve_args, serve, admin_token)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("service")
    started = _start(tmp, _users_file(tmp / "users.toml"), WORKER_TOKEN, TOKENS["root"])
    try:
        yield started
    finally:
        started.procs.stop_all()


def _cancel_all(service: Service) -> None:
    """Leave the one GPU free for the next test."""
    for job_id, job in service.jobs().items():
        if job["state"] in ("queued", "running"):
            done = service.cli("cancel", str(job_id), token=service.admin_token)
            assert done.returncode == 0 or "already" in done.stderr, done.stderr


def test_submit_list_cancel_and_the_cancelled_jobs_gpu_goes_to_the_queued_job(
    service: Service,
) -> None:
    first = service.submit(*LONG, token=TOKENS["alice"])
    service.wait_job(first, "running past a checkpoint",
                     lambda j: j["state"] == "running" and j["checkpoint_step"] > 0)  # fmt: skip
    second = service.submit(*SHORT, token=TOKENS["bob"])
    listed = service.jobs()
    assert listed[second]["state"] == "queued" and listed[second]["user"] == "bob"
    running = listed[first]
    assert running["user"] == "alice" and running["gpus"][0]["worker"] == "worker-1"
    assert running["gpus"][0]["gpus"] == [0] and running["rho"] > 0

    printed = service.ok("cancel", str(first), token=TOKENS["alice"])
    assert f"job {first} cancelled" in printed
    done = service.wait_job(second, "done", lambda j: j["state"] == "done")
    assert done["step"] == 60
    cancelled = service.jobs()[first]
    assert cancelled["state"] == "cancelled" and cancelled["gpus"] == []
    assert "cancelled by alice" in cancelled["message"]
    # The queued job ran only once the cancelled one was gone (fifo: it waited behind it).
    (ended_at,) = query(service.state_dir, f"SELECT ended_at FROM jobs WHERE job_id = {first}")
    launches = query(service.state_dir, f"SELECT launched_at FROM runs WHERE job_id = {second}")
    assert launches and all(at >= ended_at[0] for (at,) in launches)
    # The cancelled job stopped with a checkpoint (kept) and never ran again.
    last = query(service.state_dir, "SELECT end_reason, launched_at FROM runs WHERE job_id = "
                 f"{first} ORDER BY run_id DESC LIMIT 1")  # fmt: skip
    assert last[0][0] == "preempted"
    assert any((service.state_dir / "checkpoints" / f"job-{first}").iterdir())

    watched = service.ok("watch", str(first), token=TOKENS["bob"])
    assert "submitted by alice" in watched and "cancelled by alice" in watched
    assert watched.strip().splitlines()[-1].startswith(f"job {first} is cancelled at step ")
    logs = service.ok("logs", str(first), token=TOKENS["alice"])
    assert "==> run " in logs and "on worker-1" in logs


def test_a_user_cannot_cancel_another_users_job_and_an_admin_can(service: Service) -> None:
    job_id = service.submit(*LONG, token=TOKENS["alice"])
    refused = service.cli("cancel", str(job_id), token=TOKENS["bob"])
    assert refused.returncode != 0
    assert "belongs to alice" in refused.stderr and "Traceback" not in refused.stderr
    assert service.jobs()[job_id]["state"] in ("queued", "running")
    # Nor may bob submit as alice, nor read her job's output; the worker token is no user's.
    assert service.cli("submit", *SHORT, "--user", "alice", token=TOKENS["bob"]).returncode != 0
    assert service.cli("logs", str(job_id), token=TOKENS["bob"]).returncode != 0
    unknown = service.cli("submit", "--job-type", "Foo (batch size 8)", "--steps", "9",
                          token=TOKENS["bob"])  # fmt: skip
    assert unknown.returncode != 0 and "no workload for model family 'Foo'" in unknown.stderr
    stranger = service.cli("jobs", token=WORKER_TOKEN)
    assert stranger.returncode != 0 and "refused" in stranger.stderr
    # An admin may, and may submit for others.
    service.ok("cancel", str(job_id), token=TOKENS["root"])
    assert service.jobs()[job_id]["state"] == "cancelled"
    assert "cancelled by root" in service.jobs()[job_id]["message"]
    again = service.cli("cancel", str(job_id), token=TOKENS["root"])
    assert again.returncode != 0 and "cancelled already" in again.stderr
    for_bob = service.submit(*SHORT, "--user", "bob", token=TOKENS["root"])
    assert service.jobs()[for_bob]["user"] == "bob"
    _cancel_all(service)


def test_jobs_json_lists_objects_with_id_user_and_state(service: Service) -> None:
    job_id = service.submit(*SHORT, "--weight", "2", token=TOKENS["bob"])
    document = json.loads(service.ok("jobs", "--json", token=TOKENS["bob"]))
    assert isinstance(document, list) and document
    for job in document:
        assert isinstance(job["id"], int) and isinstance(job["user"], str)
        assert job["state"] in STATES
        assert isinstance(job["gpus"], list) and isinstance(job["queued_s"], float)
    assert len({job["id"] for job in document}) == len(document)
    mine = next(job for job in document if job["id"] == job_id)
    assert (mine["user"], mine["weight"], mine["target_steps"]) == ("bob", 2.0, 60)
    only_bob = json.loads(service.ok("jobs", "--json", "--user", "bob", token=TOKENS["alice"]))
    assert only_bob and {job["user"] for job in only_bob} == {"bob"}
    _cancel_all(service)


def test_a_killed_service_restarts_with_every_job_and_running_ones_resume(
    tmp_path: Path,
) -> None:
    token = "lab-of-one-token"
    # No users file: the cluster token is the one admin's.
    service = _start(tmp_path, None, token, token)
    try:
        running = service.submit(*LONG, token=token)
        queued = service.submit(*LONG, "--user", "carol", token=token)
        service.wait_job(
            running, "running past a checkpoint",
            lambda j: j["state"] == "running" and j["checkpoint_step"] > 0,
        )  # fmt: skip
        ((recorded,),) = query(
            service.state_dir, f"SELECT COUNT(*) FROM job_events WHERE job_id = {running}"
        )
        os.kill(service.serve.pid, signal.SIGKILL)
        service.serve.wait(timeout=10)
        ((saved,),) = query(
            service.state_dir, f"SELECT checkpoint_step FROM jobs WHERE job_id = {running}"
        )
        service.serve = service.procs.start("serve-2", service.serve_args, {"SHOCK_TOKEN": token})
        resumed = service.wait_job(
            running, "training again after the restart",
            lambda j: j["state"] == "running" and j["step"] > saved,
        )  # fmt: skip
        # `watch` replays the whole history, the part before the crash included.
        history = service.ok("watch", str(running), "--no-follow", token=token).splitlines()
        assert "submitted by admin" in history[0] and len(history) > recorded
        for before_the_crash in ("launched as run", "started on worker-1 GPU 0",
                                 "checkpoint at step"):  # fmt: skip
            assert any(before_the_crash in line for line in history[:recorded]), history
        assert history[-1].startswith(f"job {running} is ")
        jobs = service.jobs(token)
        assert jobs[queued]["state"] == "queued" and jobs[queued]["user"] == "carol"
        assert resumed["user"] == "admin"
        # No step before its checkpoint was lost: every later run resumed at or after it.
        later = query(service.state_dir, "SELECT resumed_from_step FROM runs WHERE job_id = "
                      f"{running} AND resumed_from_step IS NOT NULL ORDER BY run_id")  # fmt: skip
        assert all(step >= saved for (step,) in later[1:]), (saved, later)
        # The restarted service takes requests: a clean stop (SIGTERM) leaves both jobs kept.
        service.ok("cancel", str(queued), token=token)
        os.kill(service.serve.pid, signal.SIGTERM)
        assert service.serve.wait(timeout=60) == 0, service.procs.log("serve-2")
        states = dict(query(service.state_dir, "SELECT job_id, ended_state FROM jobs"))
        assert states == {running: None, queued: "cancelled"}
    finally:
        service.procs.stop_all()
