"""End to end on loopback: Pollux on the gRPC cluster with elastic jobs. `shock run --backend
grpc --policy pollux --preset pollux` on a Pollux workload CSV; its job (Pollux's `bert`,
run by its stand-in, the small Transformer of `python -m shock.workloads.run`) changes GPU
count between rounds: relaunched on its new GPUs (one process per GPU, gloo on the CPU),
resuming from its checkpoint."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cluster_procs import SHOCK, query
from timeline_checks import check_timeline

from shock.cluster.runtime.state import TrackedJob, launch_steps, samples_per_step
from shock.core.model import JobSpec
from shock.results.document import load_result
from shock.traces.pollux import read_pollux_csv
from shock.workloads.families import parse_job_type

# bert at batch size 256: 480 steps of the stand-in. Pollux starts a job on one GPU and
# lets it grow to twice the most it has had; capped at two here to keep the test short.
TRACE = """name,time,application,num_replicas,batch_size
bert-0,0,bert,1,256
"""
STEPS = 480
# Restarts cost nothing to the policy here (a stand-in restarts in seconds, not Pollux's
# 30 s), so Pollux grows the job as soon as its limit allows.
RESIZE_NOW = ["--preemption-overhead", "0", "--policy-option", "restart_penalty_s=0",
              "--policy-option", "max_gpus_per_job=2"]  # fmt: skip


def _runs(state_dir: Path) -> dict[int, list[tuple]]:
    """Each job's runs: (run_id, worker, gpus, resumed_from_step, last_step, end_reason,
    launched_at, ended_at), in launch order."""
    rows: list[tuple[Any, ...]] = query(
        state_dir,
        "SELECT job_id, run_id, worker_id, gpus, resumed_from_step, last_step, end_reason, "
        "launched_at, ended_at FROM runs ORDER BY run_id",
    )
    runs: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        runs[int(row[0])].append(row[1:])
    return runs


def _launches(job_runs: list[tuple]) -> list[list[tuple]]:
    """A job's runs grouped by launch (a gang's ranks launch together), rank 0 first."""
    launches: dict[float, list[tuple]] = {}
    for run in job_runs:
        launches.setdefault(run[6], []).append(run)
    return list(launches.values())


def test_a_pollux_job_trains_its_samples_as_steps_of_its_stand_in(tmp_path: Path) -> None:
    trace = tmp_path / "workload.csv"
    trace.write_text(TRACE)
    (spec,) = read_pollux_csv(trace).jobs
    assert parse_job_type(spec.job_type) == ("Transformer", 256)
    assert samples_per_step(spec) == 256
    assert spec.total_steps == STEPS * 256 and launch_steps(spec) == STEPS
    assert TrackedJob(spec).target_steps == STEPS
    # A Gavel trace's job counts steps.
    gavel = JobSpec(0, "ResNet-18 (batch size 32)", 1000)
    assert samples_per_step(gavel) == 1 and launch_steps(gavel) == 1000


@pytest.mark.slow
def test_pollux_resizes_jobs_on_the_grpc_cluster_resuming_from_checkpoints(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "workload.csv"
    trace.write_text(TRACE)
    state_dir, json_path = tmp_path / "state", tmp_path / "result.json"
    completed = subprocess.run(
        [*SHOCK, "run", "--backend", "grpc", "--trace", str(trace), "--local-workers", "1",
         "--gpus-per-worker", "4", "--policy", "pollux", "--preset", "pollux",
         "--round-length", "15", *RESIZE_NOW, "--state-dir", str(state_dir),
         "--checkpoint-every", "1", "--json", str(json_path), "--quiet"],
        capture_output=True, text=True, timeout=400, start_new_session=True,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(json_path.read_text())
    assert document["unfinished_jobs"] == 0
    assert [job["id"] for job in document["jobs"]] == [0]

    # Every job completed exactly once, at its last step, and was never launched after.
    done: list[tuple[Any, ...]] = query(
        state_dir, "SELECT job_id, step, completed_at FROM jobs ORDER BY job_id"
    )
    assert [(job_id, step) for job_id, step, _ in done] == [(0, STEPS)]
    runs = _runs(state_dir)
    for job_id, _, completed_at in done:
        launches = _launches(runs[job_id])
        finished = [launch for launch in launches if launch[0][5] == "done"]
        assert len(finished) == 1, runs[job_id]
        assert finished[0][0][4] == STEPS
        assert all(launch is finished[0] or launch[0][5] == "preempted" for launch in launches)
        assert all(run[6] <= completed_at for run in runs[job_id])

    # At least one job ran on different GPU counts over time: in the journal's launches and
    # in the engine's timeline.
    counts = {
        job_id: [sum(len(json.loads(run[2])) for run in launch) for launch in _launches(job_runs)]
        for job_id, job_runs in runs.items()
    }
    assert any(len(set(job_counts)) > 1 for job_counts in counts.values()), counts
    result = load_result(json_path)
    check_timeline(result)
    assert result.timeline is not None
    segment_gpus = {job.job_id: {s.gpus for s in job.segments} for job in result.timeline.jobs}
    assert any(len(gpus) > 1 for gpus in segment_gpus.values()), segment_gpus

    # No GPU was given twice: runs on the same worker's GPU never overlap in time.
    holders = sorted(
        (run[1], gpu, run[6], run[7])
        for job_runs in runs.values()
        for run in job_runs
        for gpu in json.loads(run[2])
    )
    for (worker_a, gpu_a, _, end_a), (worker_b, gpu_b, start_b, _) in itertools.pairwise(holders):
        if (worker_a, gpu_a) == (worker_b, gpu_b):
            assert end_a is not None and end_a <= start_b, holders

    # Every relaunch (a resize included) resumed, on every rank, at the step the launch
    # before it stopped at (the step the job reports restoring from its checkpoint); the
    # first started from nothing. (On a loaded machine a launch may be resized before its
    # first step, then its relaunch rightly resumes at 0; the final checkpoint is checked.)
    for job_id, job_runs in runs.items():
        launches = _launches(job_runs)
        assert all(run[3] in (0, None) for run in launches[0])
        for before, after in itertools.pairwise(launches):
            stopped = before[0][4]
            assert all(run[3] == stopped for run in after), (job_id, before, after)
        checkpoints = (state_dir / "checkpoints" / f"job-{job_id}").glob("ckpt-*.pt")
        assert max(int(path.stem.split("-")[1]) for path in checkpoints) == STEPS
