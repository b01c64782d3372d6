"""Refusals that say what is wrong, as people meet them through the CLI: a worker the
scheduler will not take exits at once with "refused: ..." (non-zero, so a service manager
does not restart it in a loop), a user is told which token case they are in, and values
that mean nothing (0 GPUs, a weight of 0) are refused before anything is sent."""

from __future__ import annotations

import io
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_procs import SHOCK, SIX_JOBS, write_trace
from shock_cli import run_shock
from test_cluster_state import DrivenWorker

from shock.cli.cluster_commands import REFUSED_EXIT_STATUS, WEIGHTED_POLICY, _policy_for
from shock.cluster.oplog import configure_logging
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.runtime.state import RuntimeSettings
from shock.cluster.service import ServerAddress, start_server
from shock.cluster.users import User, Users, hash_token
from shock.engine.runner import DEFAULT_POLICY, RunOptions, build_request

TOKEN = "cluster-token-1"
USERS = Users((User("alice", 2.0, hash_token("alice-token")),
               User("bob", 1.0, hash_token("bob-token\n"))))  # fmt: skip


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """A scheduler serving gRPC in this process, with one 1-GPU v100 worker registered."""
    trace = write_trace(tmp_path / "one.trace", SIX_JOBS[:1])
    request = build_request(RunOptions(trace=str(trace), cluster="v100=1"))
    scheduler = Runtime(request, RuntimeSettings(state_dir=tmp_path / "state"))
    DrivenWorker(scheduler)
    server, port = start_server(scheduler, ServerAddress(port=0), TOKEN, users=USERS)
    try:
        yield scheduler, f"127.0.0.1:{port}"
    finally:
        server.stop(grace=0).wait(timeout=5)
        scheduler.journal.close()


def test_a_worker_the_scheduler_refuses_exits_at_once_saying_why(
    service: tuple[Runtime, str], tmp_path: Path
) -> None:
    _, address = service
    # Its timeout is longer than the test waits: only a refusal ends it in time.
    completed = subprocess.run(
        [*SHOCK, "worker", "--scheduler", address, "--gpus", "2", "--gpu-type", "v100",
         "--simulated", "--no-warm", "--log-dir", str(tmp_path / "logs"),
         "--scheduler-timeout", "600"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "SHOCK_TOKEN": TOKEN},
    )  # fmt: skip
    assert completed.returncode == REFUSED_EXIT_STATUS
    assert "refused: " in completed.stderr
    assert "workers of type v100 have 1 GPUs each; this one declares 2" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_users_are_told_which_token_case_they_are_in(
    service: tuple[Runtime, str], tmp_path: Path
) -> None:
    _, address = service

    def jobs(token: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SHOCK, *(args or ("jobs",)), "--scheduler", address], capture_output=True,
            text=True, timeout=120, env={**os.environ, "SHOCK_TOKEN": token},
        )  # fmt: skip

    worker_token = jobs(TOKEN)
    assert worker_token.returncode == 2 and "this is the cluster (worker) token" in " ".join(
        worker_token.stderr.split()
    )
    newline = jobs("bob-token")
    assert newline.returncode == 2
    assert "followed by a newline" in " ".join(newline.stderr.split())
    # A stream (watch) is refused the same way; an unknown user is named, not an empty table.
    unknown = jobs("nobodys-token", "watch", "0")
    assert unknown.returncode == 2 and "unknown token: no user in the users file has it" in (
        " ".join(unknown.stderr.split())
    )
    nobody = jobs("alice-token", "jobs", "--user", "nobody")
    assert nobody.returncode == 2
    assert "no user 'nobody' in the users file (users: alice, bob)" in " ".join(
        nobody.stderr.split()
    )
    assert "Traceback" not in worker_token.stderr + newline.stderr + unknown.stderr


@pytest.mark.parametrize(
    ("option", "value"), [("--weight", "0"), ("--scale-factor", "0"), ("--steps", "0")]
)
def test_zero_is_refused_like_a_negative_value(tmp_path: Path, option: str, value: str) -> None:
    args = {"--job-type": "ResNet-18 (batch size 32)", "--steps": "10", option: value}
    completed = run_shock("submit", *[part for pair in args.items() for part in pair],
                          "--token", "t", cwd=tmp_path)  # fmt: skip
    assert completed.returncode == 2 and option in completed.stderr
    assert "Traceback" not in completed.stderr


def test_an_elastic_command_is_refused_before_it_is_sent(tmp_path: Path) -> None:
    completed = run_shock("submit", "--elastic", "--token", "t", "--", "python", "train.py",
                          cwd=tmp_path)  # fmt: skip
    assert completed.returncode == 2 and "--elastic" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_with_a_users_file_the_default_policy_honours_weights_and_others_warn() -> None:
    assert _policy_for(None, USERS) == WEIGHTED_POLICY
    assert _policy_for(None, None) == DEFAULT_POLICY
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("info", "text", stream)
        assert _policy_for("fifo", USERS) == "fifo"
        assert _policy_for("gandiva_fair", USERS) == "gandiva_fair"
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    (warning,) = stream.getvalue().splitlines()
    assert "WARNING policy-ignores-weights --policy fifo ignores the users' weights" in warning
    assert f"use --policy {WEIGHTED_POLICY}" in warning
