"""End to end on loopback: a job on 2 GPUs placed across two 1-GPU workers runs as a gang of
two processes (one per worker, gloo on the CPU), trains, is preempted as one and resumes at
its checkpointed step. Real training jobs (`python -m shock.workloads.run`)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from cluster_procs import SHOCK, free_port, processes, query, wait_for

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.trace import write_trace

pytestmark = pytest.mark.slow
TOKEN = "test-token-gang"
WAIT_S = 300  # bounds each wait for a state


def _runs(state_dir: Path) -> list[tuple]:
    """(run_id, worker, resumed_from_step, last_step, end_reason, launched_at) of job 0."""
    return query(
        state_dir,
        "SELECT run_id, worker_id, resumed_from_step, last_step, end_reason, launched_at "
        "FROM runs WHERE job_id = 0 ORDER BY run_id",
    )


def _gangs(state_dir: Path) -> list[list[tuple]]:
    """Job 0's runs grouped by launch: the ranks of each gang, rank 0 first."""
    gangs: dict[float, list[tuple]] = {}
    for run in _runs(state_dir):
        gangs.setdefault(run[5], []).append(run)
    return list(gangs.values())


def _resumed_after_preemption(state_dir: Path) -> tuple[list[tuple], list[tuple]] | None:
    """A gang that trained and was preempted, and the next, which every rank of resumed at
    its last step and then trained on; None until there is one."""
    gangs = _gangs(state_dir)
    for before, after in itertools.pairwise(gangs):
        stopped = before[0][3]
        if (
            before[0][4] == "preempted"
            and stopped > 0
            and len(after) == 2
            and all(rank[2] == stopped for rank in after)
            and after[0][3] > stopped
        ):
            return before, after
    return None


def _losses(log: Path, rank: int) -> list[float]:
    pattern = re.compile(rf"^rank {rank}/2: step \d+/\d+ loss (\S+)", re.MULTILINE)
    return [float(value) for value in pattern.findall(log.read_text(errors="replace"))]


def test_a_two_gpu_job_across_two_workers_trains_as_a_gang_and_resumes(tmp_path: Path) -> None:
    # Job 0 needs both GPUs, job 1 one: max-min fairness takes turns between them, so the
    # gang is preempted and relaunched. Neither finishes before the test has seen that.
    specs = [
        JobSpec(0, "Recommendation (batch size 32)", 10**7, scale_factor=2),
        JobSpec(1, "A3C", 10**7),
    ]
    trace = tmp_path / "gang.trace"
    write_trace(specs, trace, default_registry(), "gavel")
    state_dir, port = tmp_path / "state", free_port()
    address, env = f"127.0.0.1:{port}", {"SHOCK_TOKEN": TOKEN}
    with processes(tmp_path / "logs") as procs:
        procs.start("serve", [
            *SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port),
            "--trace", str(trace), "--round-length", "20", "--heartbeat", "0.5",
            "--min-workers", "2",
        ], env)  # fmt: skip
        for name in ("a", "b"):
            procs.start(f"worker-{name}", [
                *SHOCK, "worker", "--scheduler", address, "--gpus", "1", "--simulated",
                "--heartbeat", "0.5", "--checkpoint-every", "2", "--log-dir",
                str(tmp_path / name), "--rendezvous-host", "127.0.0.1",
            ], env)  # fmt: skip
        wait_for(lambda: _resumed_after_preemption(state_dir) is not None, WAIT_S,
                 "job 0 preempted and resumed at its checkpoint")
    found = _resumed_after_preemption(state_dir)
    assert found is not None
    before, after = found
    # Every launch of job 0 was a gang of 2 runs, one on each worker.
    gangs = _gangs(state_dir)
    assert all(sorted(rank[1] for rank in gang) == ["worker-1", "worker-2"] for gang in gangs)
    # Preempted as one: both ranks stopped at the step rank 0 checkpointed.
    assert before[0][4] == before[1][4] == "preempted"
    assert before[0][3] == before[1][3]
    checkpoints = (state_dir / "checkpoints" / "job-0").glob("ckpt-*.pt")
    assert before[0][3] <= max(int(path.stem.split("-")[1]) for path in checkpoints)
    # Both ranks trained (each logs its part), and the lead's loss fell across the runs.
    # Which agent registered first (and so is worker-1) is up to them: look in both log dirs.
    def log_of(run: tuple) -> Path:
        name = f"job-0-run-{run[0]}.log"
        found = [d / name for d in (tmp_path / "a", tmp_path / "b") if (d / name).exists()]
        assert len(found) == 1, (name, found)
        return found[0]

    assert _losses(log_of(before[1]), 1), log_of(before[1]).read_text()
    lead = _losses(log_of(before[0]), 0) + _losses(log_of(after[0]), 0)
    assert len(lead) >= 2 and lead[-1] < lead[0], lead
