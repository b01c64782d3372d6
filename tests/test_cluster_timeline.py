"""Where a cluster run's time went (shock/cluster/timeline.py), and warm job processes
(shock/cluster/warm.py) that take a launch with torch already imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shock.cluster.journal import Journal
from shock.cluster.timeline import (
    RunTiming,
    average_rates,
    run_timings,
    start_overheads,
    steady_rates,
)
from shock.cluster.warm import WarmPool
from shock.core.model import JobSpec

LM = "LM (batch size 20)"


def _journal_with_two_runs(state_dir: Path) -> None:
    """Job 0 (10 steps/s): launched 1 s into round 1 at t=100, started at 103, trains
    through round 2 on the same GPU, preempted at round 3 (t=130) at step 250, exits at 131.
    Relaunched in round 4 (t=145) on another GPU, done at step 400 at t=162."""
    journal = Journal(state_dir)
    journal.add_jobs([JobSpec(job_id=0, job_type=LM, total_steps=400)])
    here = [{"jobs": [0], "worker": "worker-1", "gpus": [0]}]
    there = [{"jobs": [0], "worker": "worker-1", "gpus": [1]}]
    journal.add_round(1, 100.0, here)
    journal.add_round(2, 115.0, here)
    journal.add_round(3, 130.0, [])
    journal.add_round(4, 145.0, there)
    first = journal.add_run(0, "worker-1", (0,), 101.0, 150.0, 0)
    journal.set_run_started(first, 0, 103.0)
    journal.set_run_step(first, 250)
    journal.end_run(first, 131.0, "preempted")
    second = journal.add_run(0, "worker-1", (1,), 145.5, 170.0, 250)
    journal.set_run_started(second, 250, 147.0)
    journal.set_run_step(second, 400)
    journal.record_completion(0, 162.0, second, 400)
    journal.end_run(second, 162.0, "done")
    journal.close()


def test_lost_time_counts_from_the_round_start_until_training_stopped(tmp_path: Path) -> None:
    _journal_with_two_runs(tmp_path)
    first, second = run_timings(tmp_path, {LM: 10.0})
    # Trained from the round start (100) until preempted at 130: 30 s for 250 steps (25 s).
    assert first.dispatch_wait_s == pytest.approx(1.0)
    assert first.startup_s == pytest.approx(2.0)
    assert first.active_s == pytest.approx(30.0)
    assert first.lost_s == pytest.approx(5.0)
    assert not first.completed
    # 145 -> 162 for 150 steps (15 s): 2 s lost.
    assert second.lost_s == pytest.approx(2.0)
    assert second.completed and not second.relaunched_on_kept_gpus
    # Trained 103 -> 130 (27 s) and 147 -> 162 (15 s): 400 steps in 42 s.
    assert average_rates([first, second]) == {LM: pytest.approx(400 / 42)}
    # Round start -> "started": 3 s and 2 s.
    assert start_overheads([first, second]) == {LM: pytest.approx(2.5)}


def _trained(job_type: str, steps: int, seconds: float) -> RunTiming:
    return RunTiming(0, 0, job_type, 0.0, 0.0, 1.0, seconds + 1.0, steps, 0.0, False, False)


def test_steady_rates_charge_the_slow_first_steps_per_launch() -> None:
    # 20 steps/s once warm, 1.5 s lost per launch: runs of 5, 10 and 30 s of steady training.
    runs = [_trained(LM, 20 * s, s + 1.5) for s in (5, 10, 30)]
    fitted = steady_rates(runs)[LM]
    assert fitted.steps_per_s == pytest.approx(20.0)
    assert fitted.warmup_s == pytest.approx(1.5)
    assert average_rates(runs)[LM] < 20.0 * 0.95  # the average blames the rate instead
    # One run length only: nothing to fit, the average and no warm-up.
    single = steady_rates([_trained(LM, 100, 6.0), _trained(LM, 100, 4.0)])[LM]
    assert (single.steps_per_s, single.warmup_s) == (pytest.approx(20.0), 0.0)


def test_a_type_without_a_rate_gets_no_lost_time(tmp_path: Path) -> None:
    _journal_with_two_runs(tmp_path)
    timings = run_timings(tmp_path, {})
    assert all(t.lost_s != t.lost_s for t in timings)  # NaN
    assert average_rates(timings) == {LM: pytest.approx(400 / 42)}


def test_a_warm_process_runs_the_launch_it_is_given(tmp_path: Path) -> None:
    """A spare started ahead of time becomes the job named in its launch line: it trains,
    checkpoints and exits with the contract's messages, its stderr in the run's log."""
    from shock.cluster.jobproc import job_arguments
    from shock.cluster.runtime.messages import Launch

    pool = WarmPool(1, tmp_path / "warm.log", env={"OMP_NUM_THREADS": "1", "PATH": ""})
    pool.fill()
    process = pool.take()
    assert process is not None and pool.take() is None
    launch = Launch(
        run_id=1, job_id=0, job_type=LM, target_steps=3, checkpoint_dir=str(tmp_path / "ck"),
        gpus=(0,), lease_s=0.0, seed=0, adaptation="static",
    )  # fmt: skip
    line = {"argv": job_arguments(launch, "cpu", None), "stderr": str(tmp_path / "job.log")}
    out, _ = process.communicate((json.dumps(line) + "\n").encode(), timeout=120)
    messages = [json.loads(raw) for raw in out.decode().splitlines()]
    assert process.returncode == 0
    assert messages[0]["type"] == "started"
    last = messages[-1]
    assert (last["type"], last["reason"], last["step"]) == ("exit", "done", 3)
    assert (tmp_path / "ck").is_dir()


def test_a_spare_that_is_never_launched_ends_when_the_pool_closes(tmp_path: Path) -> None:
    pool = WarmPool(1, tmp_path / "warm.log", env={"OMP_NUM_THREADS": "1", "PATH": ""})
    pool.fill()
    spare = pool._spares[0]
    pool.close()
    assert spare.poll() is not None


def test_a_bad_launch_line_is_reported_as_a_job_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "shock.workloads.warm"], input=b"not json\n",
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert json.loads(result.stdout)["type"] == "error"


def test_a_spare_that_dies_before_its_launch_turns_warming_off(tmp_path: Path) -> None:
    pool = WarmPool(1, tmp_path / "warm.log", env={"OMP_NUM_THREADS": "1", "PATH": ""})
    pool.fill()
    pool._spares[0].kill()
    pool._spares[0].wait(timeout=10)
    pool.fill()
    assert pool.size == 0 and pool.take() is None


def test_round_lengths_are_the_gaps_between_round_starts(tmp_path: Path) -> None:
    from shock.cluster.timeline import round_lengths

    _journal_with_two_runs(tmp_path)
    assert round_lengths(tmp_path) == [15.0, 15.0, 15.0]
