"""Dynamic jobs in the simulator: batch-size changes rescale steps and keep epochs."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_mechanism import make_mechanism, run_round
from test_simulator import simulate

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs
from shock.core.trace import read_trace
from shock.engine.dynamics import (
    BatchSchedule,
    batch_schedules,
    follow_schedule,
    rescale,
    whole_epochs_alone_s,
)
from shock.engine.epochs import epoch_profile, num_epochs, steps_per_epoch
from shock.engine.runner import bundled_trace_path

LM10 = "LM (batch size 10)"


def schedule_of(job: JobSpec) -> BatchSchedule:
    table = default_throughputs()
    return batch_schedules([job], default_registry(), table, ("v100",), "test")[job.job_id]


def test_rescaling_keeps_completed_and_total_epochs() -> None:
    per_epoch_10 = steps_per_epoch("LM", 10)  # 5968
    job = JobSpec(0, LM10, total_steps=per_epoch_10 * 22 + 100, mode="gns")
    schedule = schedule_of(job)
    assert schedule.total_epochs == pytest.approx(22 + 100 / per_epoch_10)
    steps_done = per_epoch_10 * 11.25
    new = rescale(schedule, steps_done, 10, 20)
    per_epoch_20 = steps_per_epoch("LM", 20)
    assert new.job_type == "LM (batch size 20)"
    assert new.steps_done / per_epoch_20 == pytest.approx(11.25, rel=1e-12)
    total_epochs = new.total_steps / per_epoch_20
    assert schedule.total_epochs <= total_epochs < schedule.total_epochs + 1 / per_epoch_20
    # And back again: still the same epochs.
    back = rescale(schedule, new.steps_done, 20, 10)
    assert back.steps_done == pytest.approx(steps_done, rel=1e-12)
    assert back.total_steps == job.total_steps


def test_a_gns_job_alone_runs_its_epochs_at_each_batch_size() -> None:
    per_epoch = steps_per_epoch("LM", 10)
    job = JobSpec(0, LM10, total_steps=per_epoch * 23, mode="gns")
    schedule = schedule_of(job)
    assert schedule.batch_sizes == (10,) * 11 + (20,) * 10 + (40, 10)
    # The profile rules (the preset's own are its simulator's, tested elsewhere).
    result = simulate([job], cluster="1:0:0", preset="shockwave", adaptation_rules="profile")
    record = result.records[0]
    # Batch sizes change at round boundaries, so the run lags the ideal by a few rounds'
    # difference in speed at most; it is much faster than staying at batch size 10.
    static = simulate(
        [replace(job, mode="static")], cluster="1:0:0", preset="shockwave",
        adaptation_rules="profile",
    )
    # The preset's T_alone is Shockwave's (samples / bs per epoch, unrounded): with 23 whole
    # epochs it differs from the schedule's (ceil(samples / bs) steps) by the rounding only.
    assert record.isolated_runtime_s == pytest.approx(schedule.isolated_runtime_s, rel=1e-3)
    assert record.isolated_runtime_s < schedule.isolated_runtime_s
    assert record.jct_s == pytest.approx(schedule.isolated_runtime_s, rel=0.02)
    assert record.jct_s < 0.9 * static.records[0].jct_s
    assert result.metrics.worst_ftf_rho == pytest.approx(1.0, abs=0.02)


def test_static_jobs_have_no_schedule() -> None:
    jobs = [
        JobSpec(0, LM10, 1000, mode="static"),
        JobSpec(1, "Transformer (batch size 32)", 1000, mode="gns"),  # never adapts
    ]
    assert batch_schedules(jobs, default_registry(), default_throughputs(), ("v100",), "t") == {}


def dynamic_jobs(count: int) -> list[JobSpec]:
    path = bundled_trace_path("shockwave_220_multigpu_dynamic.trace")
    trace = read_trace(path, default_registry())
    # Shorter jobs keep the test quick; their batch sizes still change.
    return [replace(j, total_steps=max(1, j.total_steps // 8)) for j in trace.jobs[:count]]


@pytest.mark.parametrize(
    "policy", default_registry().names("policy")
)
def test_every_policy_runs_a_dynamic_trace(policy: str) -> None:
    jobs = dynamic_jobs(14)
    table = default_throughputs()
    assert len(batch_schedules(jobs, default_registry(), table, ("v100",), "t")) >= 3
    options: dict[str, object] = {"cluster": "8:0:0", "preset": "shockwave"}
    if "cost" in policy:
        options["prices"] = "v100=2.48"
    result = simulate(jobs, policy=policy, **options)
    assert result.unfinished_jobs == 0
    assert len(result.records) == len(jobs)
    assert all(math.isfinite(r) for r in result.rhos)


def test_shockwave_preset_uses_jobs_in_trace_for_rho() -> None:
    # Two static jobs on one GPU, the second arriving late: Shockwave's rho divides by
    # max(1, 2 jobs / 1 GPU) for both, whatever the overlap.
    jobs = [
        JobSpec(0, LM10, 20_000),
        JobSpec(1, LM10, 20_000, arrival_time=50_000.0),
    ]
    result = simulate(jobs, cluster="1:0:0", preset="shockwave")
    assert result.metrics.rounds > 0
    for record, rho in zip(result.records, result.rhos, strict=True):
        assert rho == pytest.approx(record.jct_s / (record.isolated_runtime_s * 2), rel=1e-12)
    default = simulate(jobs, cluster="1:0:0", preset="default")
    # Time-averaged contention: each job was alone, so rho is JCT / T_alone.
    assert default.rhos[1] == pytest.approx(
        default.records[1].jct_s / default.records[1].isolated_runtime_s, rel=1e-9
    )


def test_policies_see_the_new_batch_size_rates_and_steps() -> None:
    per_epoch = steps_per_epoch("LM", 10)
    job = JobSpec(0, LM10, total_steps=per_epoch * 23, mode="gns")
    schedule = schedule_of(job)
    mechanism = make_mechanism("1:0:0", policy="max_min_fairness")
    state = mechanism.admit(job)
    state.steps_done = per_epoch * 11.5  # half-way through the first bs-20 epoch
    assert follow_schedule(mechanism, state, schedule)
    assert not follow_schedule(mechanism, state, schedule)  # already there
    seen = mechanism._policy_input(0.0).jobs[0]
    table = default_throughputs()
    assert seen.job_type == "LM (batch size 20)"
    assert seen.steps_done == pytest.approx(11.5 * steps_per_epoch("LM", 20))
    assert seen.total_steps == math.ceil(schedule.total_epochs * steps_per_epoch("LM", 20))
    assert state.rates == [table.throughput("LM (batch size 20)", 1, "v100")]
    assert mechanism.need_allocation
    # And a round runs at the new throughput.
    (assignment,) = run_round(mechanism, 0.0)
    assert assignment.rate == table.throughput("LM (batch size 20)", 1, "v100")


def test_run_time_alone_adds_every_epoch_in_order() -> None:
    """T_alone from runs of equal batch sizes is the per-epoch profile's sum, to the bit,
    whether the pattern is drawn again or the schedule's is passed."""
    registry = default_registry()
    table = default_throughputs()
    jobs = [replace(j, total_steps=j.total_steps * 3) for j in dynamic_jobs(40)]
    schedules = batch_schedules(jobs, registry, table, ("v100",), "t")
    assert len(schedules) >= 5
    for job in jobs:
        pattern = registry.get("adaptation", job.mode).batch_sizes(job, num_epochs(job, "t"))
        expected = sum(epoch_profile(job, pattern, table, "v100", "t").durations_s)
        drawn = whole_epochs_alone_s(job, registry, table, ("v100",), "t")
        assert drawn is not None and drawn.hex() == float(expected).hex()
        if job.job_id in schedules:
            given = schedules[job.job_id].batch_sizes
            passed = whole_epochs_alone_s(job, registry, table, ("v100",), "t", given)
            assert passed is not None and passed.hex() == drawn.hex()

