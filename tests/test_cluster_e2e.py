"""End to end on loopback: `shock run --backend grpc`, and the fault tests (a worker killed,
the scheduler killed and restarted). Jobs run the stand-in program `tests/fake_job.py`
(cluster_procs.JOB_COMMAND)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from subprocess import Popen

import pytest
from cluster_procs import (
    SHOCK,
    SIX_JOBS,
    Processes,
    free_port,
    job_command_options,
    processes,
    query,
    wait_for,
    write_trace,
)
from timeline_checks import check_timeline

from shock.results.document import load_result

pytestmark = pytest.mark.slow
TOKEN = "test-token-123"


def runs_by_job(state_dir: Path) -> dict[int, list[tuple]]:
    rows = query(
        state_dir,
        "SELECT job_id, run_id, worker_id, resumed_from_step, last_step, end_reason, "
        "launched_at, ended_at FROM runs ORDER BY run_id",
    )
    runs: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        runs[int(row[0])].append(row[1:])
    return runs


def assert_all_complete_once(state_dir: Path, jobs: list[tuple[str, int]]) -> None:
    """Every job completed exactly once at its target step, never launched afterwards."""
    done = query(state_dir, "SELECT job_id, step, completed_at FROM jobs ORDER BY job_id")
    assert [(job_id, step) for job_id, step, _ in done] == [
        (i, steps) for i, (_, steps) in enumerate(jobs)
    ]
    runs = runs_by_job(state_dir)
    for job_id, _, completed_at in done:
        assert completed_at is not None
        finished = [r for r in runs[job_id] if r[4] == "done"]
        assert len(finished) == 1, (job_id, runs[job_id])
        assert finished[0][3] == jobs[job_id][1]  # the job itself reported the target step
        assert all(r[5] <= completed_at for r in runs[job_id]), "launched after completion"


# Real jobs run a step in milliseconds: four times the steps make each outlast a few 10 s
# rounds, so the six jobs take turns on the four GPUs (preempted, then resumed).
LONG_JOBS = [(job_type, 4 * steps) for job_type, steps in SIX_JOBS]


def test_six_jobs_on_two_workers_complete_with_preemption_and_resume(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "six.trace", LONG_JOBS)
    state_dir = tmp_path / "state"
    json_path = tmp_path / "result.json"
    completed = subprocess.run(
        [*SHOCK, "run", "--backend", "grpc", "--trace", str(trace), "--local-workers", "2",
         "--gpus-per-worker", "2", "--round-length", "10", "--state-dir", str(state_dir),
         "--checkpoint-every", "3", "--json", str(json_path), "--quiet",
         *job_command_options()],
        capture_output=True, text=True, timeout=400, start_new_session=True,
        env={**os.environ, "COLUMNS": "200"},  # the header on one line, however long the path
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "max_min_fairness_perf · grpc" in completed.stdout
    assert "cluster v100=4" in completed.stdout
    document = json.loads(json_path.read_text())
    assert document["backend"] == "grpc"
    assert document["unfinished_jobs"] == 0
    assert [job["id"] for job in document["jobs"]] == list(range(6))
    assert all(job["jct_s"] > 0 for job in document["jobs"])
    assert document["metrics"]["rounds"] >= 2
    assert_all_complete_once(state_dir, LONG_JOBS)
    runs = runs_by_job(state_dir)
    # The engine's timeline on real workers: consistent with the records, and a job the
    # journal shows resumed has several segments.
    result = load_result(json_path)
    check_timeline(result)
    assert result.timeline is not None
    assert len(result.timeline.rounds.time_s) == document["metrics"]["rounds"]
    assert result.timeline.capacity == (4,)
    segments = {job.job_id: job.segments for job in result.timeline.jobs}
    assert all(segments[job_id] for job_id in range(6))
    resumed_ids = [job_id for job_id, job_runs in runs.items() if any(r[2] for r in job_runs)]
    assert any(len(segments[job_id]) > 1 for job_id in resumed_ids)
    # Preempted in one round and resumed from its checkpoint in a later one (moving across
    # workers is certain in the killed-worker test below).
    resumed = [job_id for job_id, job_runs in runs.items() if any(r[2] for r in job_runs)]
    assert resumed, runs
    for job_runs in runs.values():
        for before, after in itertools.pairwise(job_runs):
            assert before[4] == "preempted"
            assert after[2] == before[3]  # resumed exactly where the preempted run stopped
    assert {r[1] for job_runs in runs.values() for r in job_runs} == {"worker-1", "worker-2"}
    # Every process it started is gone: no worker, no job left behind.
    leftover = subprocess.run(["pgrep", "-f", str(state_dir)], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""


def _serve(
    state_dir: Path, trace: Path | None, port: int, policy: str = "max_min_fairness_perf"
) -> list[str]:
    args = [*SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port),
            "--round-length", "10", "--heartbeat", "0.5", "--dead-after", "3",
            "--min-workers", "2", "--policy", policy]  # fmt: skip
    return args + (["--trace", str(trace)] if trace else [])


def _worker(address: str, log_dir: Path) -> list[str]:
    return [*SHOCK, "worker", "--scheduler", address, "--gpus", "2", "--gpu-type", "v100",
            "--simulated", "--heartbeat", "0.5", "--checkpoint-every", "2",
            "--log-dir", str(log_dir), "--scheduler-timeout", "60",
            *job_command_options()]  # fmt: skip


def _start_cluster(
    procs: Processes, tmp_path: Path, port: int, policy: str = "max_min_fairness_perf"
) -> tuple[Popen, Popen]:
    """`shock serve` and two workers; the first worker to start is worker-1."""
    state_dir, address = tmp_path / "state", f"127.0.0.1:{port}"
    env = {"SHOCK_TOKEN": TOKEN}
    trace = write_trace(tmp_path / "six.trace", SIX_JOBS)
    serve = procs.start("serve", _serve(state_dir, trace, port, policy), env)
    first = procs.start("worker-a", _worker(address, tmp_path / "a"), env)
    wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM workers")), 60, "worker-1")
    procs.start("worker-b", _worker(address, tmp_path / "b"), env)
    return serve, first


def test_killed_worker_loses_at_most_a_checkpoint_interval(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with processes(tmp_path / "logs") as procs:
        serve, victim = _start_cluster(procs, tmp_path, free_port())
        # Kill worker-1 once its jobs made progress past a checkpoint.
        wait_for(
            lambda: bool(query(state_dir, "SELECT 1 FROM runs JOIN jobs USING (job_id) "
                               "WHERE last_step > 60 AND runs.ended_at IS NULL "
                               "AND worker_id = 'worker-1' AND checkpoint_step > 0")),
            60, "a checkpoint on worker-1",
        )  # fmt: skip
        os.kill(victim.pid, signal.SIGKILL)
        assert serve.wait(timeout=150) == 0, procs.log("serve")
    assert_all_complete_once(state_dir, SIX_JOBS)
    assert query(state_dir, "SELECT dead_at IS NOT NULL FROM workers WHERE worker_id = "
                 "'worker-1'") == [(1,)]  # fmt: skip
    rates = {str(job_type): float(str(rate)) for job_type, rate in
             query(state_dir, "SELECT job_type, steps_per_s FROM throughputs")}  # fmt: skip
    runs = runs_by_job(state_dir)
    lost_runs = resumed_from_checkpoint = 0
    for job_id, job_runs in runs.items():
        for before, after in itertools.pairwise(job_runs):
            if before[4] != "lost":
                continue
            lost_runs += 1
            assert after[1] == "worker-2"  # resumed on the other worker, from its checkpoint
            resumed_from_checkpoint += after[2] > 0
            # At most one checkpoint interval (2 s) of steps at the job's measured rate.
            rate = rates[SIX_JOBS[job_id][0]]
            assert before[3] - after[2] <= 2 * rate * 1.2 + 1, (before, after)
    assert lost_runs >= 1, runs
    # A job that had not yet checkpointed restarts from 0 (within the bound above).
    assert resumed_from_checkpoint >= 1, runs


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "shockwave"])
def test_killed_scheduler_restarts_from_its_journal(tmp_path: Path, policy: str) -> None:
    state_dir, port = tmp_path / "state", free_port()
    with processes(tmp_path / "logs") as procs:
        first, _ = _start_cluster(procs, tmp_path, port, policy)
        wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM jobs WHERE checkpoint_step > 0")),
                 60, "a checkpoint")  # fmt: skip
        # The engine's state is journaled as each round ends: kill once there is one.
        wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM meta WHERE key = 'engine_state'")),
                 120, "a journaled engine state")  # fmt: skip
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=5)
        saved = query(state_dir, "SELECT value FROM meta WHERE key = 'engine_state'")
        time.sleep(1.5)
        second = procs.start(
            "serve-2", _serve(state_dir, None, port, policy), {"SHOCK_TOKEN": TOKEN}
        )
        assert second.wait(timeout=150) == 0, procs.log("serve-2")
        assert "jobs measured" in procs.log("serve-2")
        assert "starts afresh" not in procs.log("serve-2")
    assert_all_complete_once(state_dir, SIX_JOBS)
    if policy == "shockwave":  # its targets and plan were journaled, and taken back
        (document,) = (json.loads(value)["engine"]["policy"] for (value,) in saved)
        assert document["name"] == "shockwave" and document["state"]["jobs"]


def started_processes(state_dir: Path) -> str:
    """The command lines of live processes that name the run's state directory."""
    found = subprocess.run(["pgrep", "-af", str(state_dir)], capture_output=True, text=True)
    return found.stdout.strip()


# Jobs that cannot finish before they are interrupted, whatever the machine's load.
ENDLESS_JOBS = [(job_type, 10**9) for job_type, _ in SIX_JOBS]


def test_ctrl_c_stops_every_process_it_started(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "endless.trace", ENDLESS_JOBS)
    state_dir = tmp_path / "state"
    process = subprocess.Popen(
        [*SHOCK, "run", "--backend", "grpc", "--trace", str(trace), "--local-workers", "2",
         "--gpus-per-worker", "1", "--round-length", "10", "--state-dir", str(state_dir),
         "--quiet", *job_command_options()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        # A job process is alive and training: the run is in progress when interrupted.
        wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM runs WHERE last_step > 10 "
                                    "AND ended_at IS NULL")),
                 120, "a job running")  # fmt: skip
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 2, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    # A process killed as its parent exits may take a moment to go; one left behind stays.
    wait_for(lambda: not started_processes(state_dir), 30, "every process it started to exit")
    assert query(state_dir, "SELECT count(*) FROM jobs WHERE completed_at IS NOT NULL") == [(0,)]
    # The preempted jobs checkpointed on their way out.
    assert query(state_dir, "SELECT count(*) FROM runs WHERE end_reason IS NULL") in ([(0,)], [])
