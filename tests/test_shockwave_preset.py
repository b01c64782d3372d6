"""`--preset shockwave` follows Shockwave's simulator for every policy: allocations recomputed
after arrivals and completions at most every 1000 s (never for a batch-size change), new jobs
held until then, and 20 s lost by a job that did not run in the previous round, which its
priority does not count as time received."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from event_recorder import EventRecorder
from test_mechanism import HUGE, make_mechanism
from test_simulator import LM, rate, simulate

from shock.core.executor import PlannedUnit, RoundPlan
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.run import MechanismConfig
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request
from shock.plugins.backends.simulator import SimulatedExecutor

SHOCKWAVE = {"cluster": "1:0:0", "policy": "max_min_fairness", "preset": "shockwave"}


def steps_for(seconds: float) -> int:
    return int(rate(LM) * seconds)


def jct(result: object, job_id: int) -> float:
    records = {r.job_id: r for r in result.records}  # type: ignore[attr-defined]
    return float(records[job_id].jct_s)


def test_the_runs_first_round_is_free_and_a_later_start_pays_20_s() -> None:
    jobs = [JobSpec(0, LM, steps_for(300)), JobSpec(1, LM, steps_for(500), arrival_time=400)]
    result = simulate(jobs, **SHOCKWAVE)
    # Job 0 runs from the run's first round on, every round: it never pays.
    assert jct(result, 0) == pytest.approx(300, abs=0.1)
    # Job 1 starts later on an idle cluster: it did not run in the previous round.
    assert jct(result, 1) == pytest.approx(520, abs=0.1)


def test_a_short_last_round_is_not_charged() -> None:
    # Job 1 needs 100 s, less than the 120 s round minus Shockwave's 5 s grace.
    jobs = [JobSpec(0, LM, steps_for(300)), JobSpec(1, LM, steps_for(100), arrival_time=400)]
    assert jct(simulate(jobs, **SHOCKWAVE), 1) == pytest.approx(100, abs=0.1)


def test_shocks_own_rule_charges_only_moves_after_a_first_start() -> None:
    jobs = [JobSpec(0, LM, steps_for(300)), JobSpec(1, LM, steps_for(500), arrival_time=400)]
    result = simulate(jobs, cluster="1:0:0", policy="max_min_fairness", preemption_overhead_s=20.0)
    assert jct(result, 1) == pytest.approx(500, abs=0.1)


def test_new_jobs_wait_for_the_next_allocation_at_most_every_1000_s() -> None:
    jobs = [
        JobSpec(0, LM, steps_for(3000)),
        JobSpec(1, LM, steps_for(3000), arrival_time=200),
        JobSpec(2, LM, steps_for(300), arrival_time=500),
    ]
    result = simulate(jobs, **{**SHOCKWAVE, "cluster": "3:0:0"})
    # Job 1: the first allocation was at t = 0, so the next one may come at once (round 240).
    assert jct(result, 1) == pytest.approx(240 - 200 + 20 + 3000, abs=0.2)
    # Job 2 arrives 260 s after that allocation: it waits until 1000 s have passed (the round
    # at 1320), although a GPU is free all along.
    assert jct(result, 2) == pytest.approx(1320 - 500 + 20 + 300, abs=0.2)
    default = simulate(jobs, cluster="3:0:0", policy="max_min_fairness", preset="default")
    assert jct(default, 2) < 600


@pytest.mark.parametrize("reallocate", [True, False])
def test_a_batch_size_change_asks_for_an_allocation_only_when_configured(
    reallocate: bool,
) -> None:
    config = MechanismConfig(round_length_s=120.0, reallocate_on_batch_size_change=reallocate)
    mechanism = make_mechanism("1:0:0", policy="max_min_fairness", config=config)
    job = mechanism.admit(JobSpec(0, LM, HUGE))
    mechanism.plan_round(0.0)
    assert not mechanism.need_allocation
    mechanism.change_job_type(job, "LM (batch size 40)", HUGE // 2, 0.0)
    assert mechanism.need_allocation is reallocate


def test_policies_that_replan_every_round_ignore_the_minimum_interval() -> None:
    config = MechanismConfig(round_length_s=120.0, min_allocation_interval_s=1000.0)
    mechanism = make_mechanism("2:0:0", policy="shockwave", config=config)
    mechanism.admit(JobSpec(0, LM, steps_for(20_000)))
    for round_index in range(5):
        mechanism.plan_round(round_index * 120.0)
    assert mechanism.stats.allocations == 5


def test_rho_counts_every_epoch_whole_as_shockwave_does() -> None:
    # ImageNet's 100,000 samples at batch size 32: 3,125 steps an epoch; 2.2 epochs of steps.
    resnet = "ResNet-50 (batch size 32)"
    job = JobSpec(0, resnet, 6875, mode="static")
    per_epoch_s = (100_000 / 32) / rate(resnet)
    shockwave = simulate([job], **SHOCKWAVE)
    # Shockwave's T_alone: 3 epochs, the last one whole.
    assert shockwave.records[0].isolated_runtime_s == pytest.approx(3 * per_epoch_s)
    shock = simulate([job], cluster="1:0:0", policy="max_min_fairness")
    assert shock.records[0].isolated_runtime_s == pytest.approx(6875 / rate(resnet))


def _rounds_at_one_step_per_second(tmp_path: Path, policy: str) -> tuple[list[list[int]], dict]:
    """Two 600-step jobs on one GPU at 1 step/s under the preset: who ran each round, JCTs."""
    table = tmp_path / "one_step_per_second.json"
    table.write_text(json.dumps({"v100": {f"('{LM}', 1)": {"null": 1.0}}}))
    registry = default_registry()
    recorder = EventRecorder()
    registry.manager.register(recorder)
    options = RunOptions(cluster="1:0:0", policy=policy, preset="shockwave", throughputs=str(table))
    trace = Trace((JobSpec(0, LM, 600), JobSpec(1, LM, 600)), "two jobs")
    result = registry.get("backend", "simulator").run(build_request(options, registry, trace))
    rounds = [[job for ids, _, _ in assignments for job in ids] for assignments in recorder.rounds]
    return rounds, {r.job_id: r.jct_s for r in result.records}


@pytest.mark.parametrize("policy", ["gandiva_fair", "max_min_fairness"])
def test_a_restarted_job_is_owed_the_20_s_it_lost_and_runs_again(
    tmp_path: Path, policy: str
) -> None:
    rounds, jcts = _rounds_at_one_step_per_second(tmp_path, policy)
    # Job 1 starts in round 2 and loses 20 s: it received 100 s to job 0's 120 s, so it has
    # the higher priority and runs round 3 too (no restart); then job 0 is owed, and so on.
    # Counting the 20 s as received, the two would tie and take turns, each round a restart.
    assert rounds[:8] == [[0], [1], [1], [0], [0], [1], [1], [0]]
    # Job 1: rounds 2-3, 6-7, 10-11 (100 + 120 steps each pair); it needs 60 s of round 11.
    assert jcts[1] == pytest.approx(10 * 120 + 60)
    # Job 0: 120 + 2 x 220 steps by round 9, then its last 40 steps (too short to be charged).
    assert jcts[0] == pytest.approx(10 * 120 + 60 + 40)


@pytest.mark.parametrize("counts_as_received", [True, False])
def test_the_time_a_restart_costs_counts_as_received_only_when_configured(
    counts_as_received: bool,
) -> None:
    config = MechanismConfig(round_length_s=120.0, overhead_counts_as_received=counts_as_received)
    mechanism = make_mechanism("1:0:0", policy="max_min_fairness", config=config)
    job = mechanism.admit(JobSpec(0, LM, HUGE))
    (assignment,) = mechanism.plan_round(0.0)
    before, worker_before = job.time_so_far[0], mechanism.worker_time[0]
    mechanism.credit(assignment, 100, 120.0, overhead_s=20.0)
    received = 120.0 if counts_as_received else 100.0
    assert job.time_so_far[0] - before == pytest.approx(received)
    assert mechanism.worker_time[0] - worker_before == pytest.approx(received)
    # It held its GPU for the whole 120 s either way.
    assert job.time_run_s == pytest.approx(120.0)


@pytest.mark.parametrize("preset", ["shockwave", "default"])
def test_a_restarted_job_holds_its_gpu_for_its_planned_steps_and_does_fewer(preset: str) -> None:
    request = build_request(
        RunOptions(cluster="1:0:0", preset=preset), trace=Trace((JobSpec(0, LM, HUGE),))
    )
    executor = SimulatedExecutor()
    executor.start(request, request.trace.jobs)
    speed = rate(LM)
    unit = PlannedUnit((0,), (LM,), "v100", (0,), (speed,), (float(HUGE),), 20.0, False)
    (progress,) = executor.run_round(RoundPlan(2, 1000.0, 1120.0, (unit,))).units
    if preset == "shockwave":
        # Shockwave's simulator: the job keeps the time its round's steps take, t, and does
        # (t - 20) / t of them; its priority then counts t - 20 s as received.
        planned = int(speed * 120)
        held = planned / speed
        assert progress.exec_s == pytest.approx(held, abs=1e-9)
        assert progress.steps == (int(planned * ((held - 20) / held)),)
    else:
        # shock's: it starts 20 s late and runs its steps to the round's end.
        assert progress.exec_s == pytest.approx(20 + int(speed * 100) / speed, abs=1e-9)
        assert progress.steps == (int(speed * 100),)
