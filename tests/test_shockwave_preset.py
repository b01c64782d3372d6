"""`--preset shockwave` follows Shockwave's simulator for every policy: allocations recomputed
after arrivals and completions at most every 1000 s (never for a batch-size change), new jobs
held until then, and 20 s lost by a job that did not run in the previous round."""

from __future__ import annotations

import pytest
from test_mechanism import HUGE, make_mechanism
from test_simulator import LM, rate, simulate

from shock.core.mechanism import MechanismConfig
from shock.core.model import JobSpec

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
