"""End to end on loopback: Pollux on the gRPC cluster resizes a job both ways. A scheduler
service (`shock serve --policy pollux`) and two 1-GPU workers as real processes; two elastic
Pollux `bert` jobs (`shock submit --elastic`, then the same request through the Jobs
service's client) train as its built-in stand-in (the small Transformer; gloo on the CPU for
a gang).

What happens is the objective's, step by step, each step started by the test once the state
before it is in the journal (never after some seconds):

1. job A is submitted while only worker a is up: it runs on its one GPU;
2. once A has trained, worker b joins (the round ends at once). A is alone with two GPUs and
   may have twice the most it has had: bert's goodput on 2 nodes of 1 GPU is 1.37x its goodput
   on one (`table_for`), so A grows to a gang of 2, resuming from its checkpoint;
3. once the gang has trained, job B is submitted. At the next round Pollux's power mean with
   p = -1 makes any allocation that leaves a job without GPUs worth about 2e-3 (the 1e-3 floor
   of the starved job dominates), against about 1 when each job has one GPU: A shrinks to one
   GPU and B takes the other, A resuming from the step its gang stopped at.

`restart_penalty_s=0`: a stand-in restarts in seconds, and with Pollux's 30 s a job resized
once could not shrink before it is 30 s old (max(age - restarts x 30, 0) / (age + 30)), which
would tie the outcome to seconds passing. Ties then keep the current allocation (the search
sorts stably, with it first). `gpus_per_node=1` makes Pollux's nodes the
workers. What happens after step 3 (the job left alone may grow again) is the policy's; the
checks hold for every launch.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_procs import SHOCK, Processes, free_port, processes, query
from timeline_checks import check_timeline

from shock.cluster.client import JobsClient
from shock.cluster.runtime.job_messages import Submission
from shock.results.document import load_result

pytestmark = pytest.mark.slow
TOKEN = "test-token-elastic-run"
WAIT_S = 300  # bounds each wait for a state
JOB_TYPE = "bert (batch size 16)"
# Training steps of the two jobs. A must still be training when B arrives: before that it
# trains through a worker's start, its growth to a gang and one round at most (380-580 steps
# in our runs; fewer under load, as the starts slow down with the training).
A_STEPS, B_STEPS = 1000, 300
ROUND_S = 4
POLLUX = [
    "--policy", "pollux", "--policy-option", "gpus_per_node=1",
    "--policy-option", "restart_penalty_s=0", "--policy-option", "patience=10",
]  # fmt: skip
# (run_id, job_id, worker, gpus, resumed_from_step, last_step, end_reason, launched_at,
# ended_at)
Run = tuple[Any, ...]


def _runs(state_dir: Path) -> list[Run]:
    return query(
        state_dir,
        "SELECT run_id, job_id, worker_id, gpus, resumed_from_step, last_step, end_reason, "
        "launched_at, ended_at FROM runs ORDER BY run_id",
    )


def _launches(state_dir: Path, job_id: int) -> list[list[Run]]:
    """A job's launches in order: each one's runs (a gang's ranks launch together, rank 0
    first)."""
    launches: dict[float, list[Run]] = {}
    for run in _runs(state_dir):
        if run[1] == job_id:
            launches.setdefault(run[7], []).append(run)
    return list(launches.values())


def _gpus(launch: list[Run]) -> int:
    return sum(len(json.loads(run[3])) for run in launch)


def _completed(state_dir: Path) -> dict[int, int]:
    """Completed jobs and the step each completed at."""
    rows: list[Run] = query(
        state_dir, "SELECT job_id, step FROM jobs WHERE completed_at IS NOT NULL"
    )
    return {int(job_id): int(step) for job_id, step in rows}


def _gang_trained(state_dir: Path) -> bool:
    """A has run as a gang of 2 that trained past the step it resumed at."""
    return any(
        len(launch) == 2 and launch[0][4] is not None and launch[0][5] > launch[0][4]
        for launch in _launches(state_dir, 0)
    )


def _wait(procs: Processes, state_dir: Path, done: Callable[[], bool], what: str) -> None:
    """Until `done`, failing at once (with the logs) when a process or a job failed, or
    after WAIT_S."""

    def failed() -> str | None:
        for name, process in procs.named.items():
            if process.poll() is not None:
                return f"{name} exited with {process.returncode}"
        ended = query(state_dir, "SELECT job_id, ended_state, message FROM jobs "
                                 "WHERE ended_state IS NOT NULL")  # fmt: skip
        return f"jobs ended: {ended}" if ended else None

    deadline = time.monotonic() + WAIT_S
    while not done():
        problem = failed()
        if problem is not None:
            break
        if time.monotonic() > deadline:
            problem = f"timed out after {WAIT_S} s"
            break
        time.sleep(0.2)
    else:
        return
    logs = "\n".join(f"--- {name}\n{procs.log(name)[-3000:]}" for name in procs.named)
    raise AssertionError(f"{problem} waiting for {what}; runs: {_runs(state_dir)}\n{logs}")


def _submit_with_cli(address: str, steps: int) -> int:
    completed = subprocess.run(
        [*SHOCK, "submit", "--scheduler", address, "--job-type", JOB_TYPE, "--elastic",
         "--steps", str(steps)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "SHOCK_TOKEN": TOKEN},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return int(completed.stdout.split()[-1])


def test_pollux_grows_and_shrinks_jobs_on_the_grpc_cluster(tmp_path: Path) -> None:
    state_dir, port = tmp_path / "state", free_port()
    address, env = f"127.0.0.1:{port}", {"SHOCK_TOKEN": TOKEN}
    result_path = tmp_path / "result.json"

    def worker(name: str) -> None:
        procs.start(f"worker-{name}", [
            *SHOCK, "worker", "--scheduler", address, "--gpus", "1", "--simulated",
            "--heartbeat", "0.5", "--checkpoint-every", "1", "--log-dir",
            str(tmp_path / name), "--rendezvous-host", "127.0.0.1", "--no-warm",
        ], env)  # fmt: skip

    with processes(tmp_path / "logs") as procs:
        serve = procs.start("serve", [
            *SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port), *POLLUX,
            "--round-length", str(ROUND_S), "--heartbeat", "0.5", "--min-workers", "1",
            "--json", str(result_path),
        ], env)  # fmt: skip
        worker("a")
        _wait(procs, state_dir, lambda: bool(query(state_dir, "SELECT 1 FROM workers")),
              "worker a to register")  # fmt: skip
        assert _submit_with_cli(address, A_STEPS) == 0
        _wait(procs, state_dir, lambda: any(run[5] for run in _runs(state_dir)),
              "job A to train on worker a")  # fmt: skip
        worker("b")
        _wait(procs, state_dir, lambda: _gang_trained(state_dir),
              "job A to grow to a gang of 2 on both workers and train")  # fmt: skip
        assert 0 not in _completed(state_dir), "A finished before B came: raise A_STEPS"
        # B straight through the Jobs service (the same request; no CLI start-up while A
        # trains on).
        with JobsClient(address, TOKEN) as client:
            submission = Submission(job_type=JOB_TYPE, steps=B_STEPS, elastic=True)
            assert client.submit(submission) == 1
        _wait(procs, state_dir, lambda: len(_completed(state_dir)) == 2,
              "both jobs to complete")  # fmt: skip
        # The service stops on SIGTERM and writes its results document.
        serve.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            serve.wait(timeout=60)
        assert serve.returncode == 0, procs.log("serve")[-3000:]

    launches = {job_id: _launches(state_dir, job_id) for job_id in (0, 1)}
    counts = {job_id: [_gpus(launch) for launch in ls] for job_id, ls in launches.items()}
    context = f"GPUs per launch {counts}; runs {_runs(state_dir)}"

    # A ran on 1 GPU, then on 2 (it grew), then on 1 next to B (it shrank).
    a_launches, b_first = launches[0], launches[1][0][0]
    grown = next((i for i, launch in enumerate(a_launches) if len(launch) == 2), None)
    assert grown is not None and set(counts[0][:grown]) == {1}, context
    shrunk = grown + 1
    assert len(a_launches) > shrunk, f"A finished before B came (raise A_STEPS): {context}"
    assert counts[0][shrunk] == 1, context
    # The shrink made room for B: A on one worker and B on the other, side by side.
    a_after = a_launches[shrunk][0]
    assert a_after[2] != b_first[2], context
    assert max(a_after[7], b_first[7]) < min(a_after[8], b_first[8]), context

    # Every relaunch resumed, on every rank, at the step its previous launch stopped at:
    # its checkpoint (a launch ends by checkpointing where it stopped). Growth and shrink
    # came after the test saw training, so both restored trained steps, the shrink more.
    for job_id, job_launches in launches.items():
        assert all(run[4] == 0 for run in job_launches[0]), context
        for before, after in itertools.pairwise(job_launches):
            assert before[0][6] == "preempted", context
            assert all(run[4] == before[0][5] for run in after), (job_id, before, after)
    grow_step, shrink_step = a_launches[grown][0][4], a_launches[shrunk][0][4]
    assert 0 < grow_step < shrink_step, context

    # Each job completed exactly once, with all its steps; nothing ran after.
    assert _completed(state_dir) == {0: A_STEPS, 1: B_STEPS}
    for job_id, job_launches in launches.items():
        ends = [launch[0][6] for launch in job_launches]
        assert ends.count("done") == 1 and ends[-1] == "done", context
        assert job_launches[-1][0][5] == (A_STEPS if job_id == 0 else B_STEPS), context
        checkpoints = (state_dir / "checkpoints" / f"job-{job_id}").glob("ckpt-*.pt")
        assert max(int(path.stem.split("-")[1]) for path in checkpoints) == job_launches[-1][0][5]

    # No GPU was held by two runs at once: runs on the same worker's GPU never overlap.
    holders = sorted(
        (run[2], gpu, run[7], run[8]) for run in _runs(state_dir) for gpu in json.loads(run[3])
    )
    for (worker_a, gpu_a, _, end_a), (worker_b, gpu_b, start_b, _) in itertools.pairwise(holders):
        if (worker_a, gpu_a) == (worker_b, gpu_b):
            assert end_a is not None and end_a <= start_b, holders

    # The results document says the same: A's segments on 1 and on 2 GPUs, B done too.
    document = load_result(result_path)
    check_timeline(document)
    assert document.timeline is not None
    segment_gpus = {job.job_id: [s.gpus for s in job.segments] for job in document.timeline.jobs}
    assert {1, 2} <= set(segment_gpus[0]), segment_gpus
    assert sorted(job.job_id for job in document.jobs) == [0, 1]
