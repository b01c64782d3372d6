"""The shockwave policy: planner feasibility, priorities, predictor, options."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shock_cli import run_shock

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.policy_options import parse_policy_options, typed_options
from shock.core.solver import SolverSpec, is_installed
from shock.core.throughputs import default_throughputs
from shock.engine.runner import RunOptions, build_request
from shock.plugins.policies.shockwave.options import ShockwaveOptions
from shock.plugins.policies.shockwave.planner import (
    PlanJob,
    PlanProblem,
    greedy_rounds,
    log_utility,
    rank_rounds,
    solve_counts,
    solve_plan,
)
from shock.plugins.policies.shockwave.policy import Shockwave
from shock.plugins.policies.shockwave.predictor import (
    JobProfile,
    Measurement,
    RoundRun,
    calibration_factor,
    momentum_average,
    posterior_remaining_s,
    running_calibration_factor,
)
from shock.plugins.policies.shockwave.profile import whole_seconds

HIGHS = SolverSpec("highs", time_limit_s=5.0, mip_gap=1e-6)

plan_jobs = st.lists(
    st.builds(
        PlanJob,
        job_id=st.integers(0, 10**6),
        gpus=st.sampled_from([1, 1, 1, 2, 2, 4, 8]),
        epochs=st.floats(1.0, 200.0),
        epochs_done=st.floats(0.0, 0.99),
        epoch_s=st.floats(10.0, 600.0),
        remaining_s=st.floats(0.0, 1e5),
        priority=st.floats(1.0, 1e4),
        ftf_slack_s=st.floats(-1e3, 1e5),
    ),
    min_size=1,
    max_size=14,
    unique_by=lambda job: job.job_id,
)


def _fits(rounds: np.ndarray, jobs: list[PlanJob], capacity: int) -> bool:
    gpus = np.array([job.gpus for job in jobs])
    return set(np.unique(rounds)) <= {0.0, 1.0} and bool(np.all(gpus @ rounds <= capacity))


@settings(max_examples=25, deadline=None)
@given(
    jobs=plan_jobs,
    capacity=st.sampled_from([8, 12, 16]),
    rounds=st.integers(1, 6),
    ranking=st.sampled_from(["milp", "greedy", "slack"]),
)
def test_every_planned_round_fits_the_cluster_with_whole_gangs(
    jobs: list[PlanJob], capacity: int, rounds: int, ranking: str
) -> None:
    jobs = [replace(job, epochs_done=job.epochs_done * job.epochs) for job in jobs]
    problem = PlanProblem(tuple(jobs), rounds, capacity, 120.0, 1e-3)
    plan = solve_plan(problem, HIGHS, ranking=ranking)
    assert plan.rounds.shape == (len(jobs), rounds)
    assert _fits(plan.rounds, jobs, capacity)  # a gang runs whole or not at all
    # The first MILP's counts respect the window's GPU-rounds; placing never adds rounds.
    gpus = np.array([job.gpus for job in jobs])
    assert gpus @ np.array(plan.counts) <= capacity * rounds
    assert np.all(plan.rounds.sum(axis=1) <= np.array(plan.counts))
    if plan.ftf_enforced:  # every job's time left after the window is within its slack
        assert all(job.ftf_slack_s >= 0 for job in jobs)


def test_nash_welfare_favours_the_job_with_less_progress() -> None:
    """Two equal jobs, one GPU, 4 rounds, no makespan term: the log gains most where progress
    is lowest, so the job at 10% gets more of the window than the job at 50%."""
    jobs = (
        PlanJob(0, 1, epochs=20, epochs_done=2, epoch_s=60.0, remaining_s=1080.0),
        PlanJob(1, 1, epochs=20, epochs_done=10, epoch_s=60.0, remaining_s=600.0),
    )
    counts, _ = solve_counts(PlanProblem(jobs, 4, 1, 120.0, 0.0), HIGHS, with_ftf=False)
    assert counts[0] > counts[1] and counts.sum() == 4


def test_the_makespan_term_favours_the_longest_job() -> None:
    jobs = (
        PlanJob(0, 1, epochs=100, epochs_done=50, epoch_s=60.0, remaining_s=1e5),
        PlanJob(1, 1, epochs=100, epochs_done=30, epoch_s=60.0, remaining_s=3e3),
    )
    # Without it the log's steeper piece (progress 0.3 < 0.5) takes every round.
    without = solve_plan(PlanProblem(jobs, 4, 1, 120.0, 0.0), HIGHS)
    pushed = solve_plan(PlanProblem(jobs, 4, 1, 120.0, 1e-3), HIGHS)
    assert without.counts == (0, 4)
    assert pushed.counts == (4, 0)


def test_priorities_weight_the_relaxed_plan_and_the_ftf_plan_ignores_them() -> None:
    base = PlanJob(0, 1, epochs=20, epochs_done=4, epoch_s=60.0, remaining_s=960.0)
    jobs = (replace(base, priority=50.0, ftf_slack_s=-1.0), replace(base, job_id=1))
    relaxed = solve_plan(PlanProblem(jobs, 4, 1, 120.0, 0.0), HIGHS)
    assert not relaxed.ftf_enforced and relaxed.counts == (4, 0)
    # The first job must leave at most 360 s after the window: it needs 600 s of the 480 s
    # the window has, so the FTF plan is infeasible and dropped.
    tight = (replace(base, ftf_slack_s=360.0), replace(base, job_id=1, ftf_slack_s=1e4))
    assert not solve_plan(PlanProblem(tight, 4, 1, 120.0, 0.0), HIGHS).ftf_enforced
    loose = (replace(base, ftf_slack_s=600.0), replace(base, job_id=1, ftf_slack_s=1e4))
    held = solve_plan(PlanProblem(loose, 4, 1, 120.0, 0.0), HIGHS)
    assert held.ftf_enforced and held.counts[0] >= 3  # 960 - 60 p <= 600 needs 6 epochs


@settings(max_examples=25, deadline=None)
@given(
    counts_gpus=st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from([1, 1, 2, 4])), min_size=1, max_size=10
    ),
    priorities=st.lists(st.floats(1.0, 1e3), min_size=10, max_size=10),
)
def test_ranking_keeps_counts_and_capacity(
    counts_gpus: list[tuple[int, int]], priorities: list[float]
) -> None:
    """The ranking MILP keeps every job's count whenever the counts can be placed at all
    (the greedy placement placing them whole proves they can); every placement keeps every
    round within capacity with whole gangs."""
    capacity, window = 8, 6
    counts = [c for c, _ in counts_gpus]
    gpus = [g for _, g in counts_gpus]
    while sum(c * g for c, g in zip(counts, gpus, strict=True)) > capacity * window:
        biggest = max(range(len(counts)), key=lambda j: counts[j] * gpus[j])
        counts[biggest] -= 1
    prios = priorities[: len(counts)]
    by_milp, solved = rank_rounds(counts, gpus, prios, capacity, window, HIGHS)
    greedy = greedy_rounds(counts, gpus, prios, capacity, window)
    if list(greedy.sum(axis=1).astype(int)) == counts:
        assert solved
    if solved:
        assert list(by_milp.sum(axis=1).astype(int)) == counts
    for rounds in (by_milp, greedy):
        assert np.all(np.array(gpus) @ rounds <= capacity)
        assert set(np.unique(rounds)) <= {0.0, 1.0}


def test_ranking_runs_high_priority_jobs_first() -> None:
    # Two 1-GPU jobs of 2 rounds each on one GPU: the high-priority one takes rounds 0 and 1.
    rounds, _ = rank_rounds([2, 2], [1, 1], [1.0, 100.0], 1, 4, HIGHS)
    assert list(rounds[1]) == [1.0, 1.0, 0.0, 0.0]
    greedy = greedy_rounds([2, 2], [1, 1], [1.0, 100.0], 1, 4)
    assert list(greedy[1]) == [1.0, 1.0, 0.0, 0.0]


def test_log_utility_meets_the_log_at_the_bases() -> None:
    bases = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert log_utility(0.0, bases, 1e-6) == pytest.approx(math.log(1e-6))
    assert log_utility(0.4, bases, 1e-6) == pytest.approx(math.log(0.4))
    assert log_utility(0.3, bases, 1e-6) == pytest.approx((math.log(0.2) + math.log(0.4)) / 2)
    assert log_utility(1.0, bases, 1e-6) == 0.0


@pytest.mark.skipif(not is_installed("scip"), reason="SCIP is not installed")
def test_pyomo_path_agrees_with_highs() -> None:
    jobs = tuple(
        PlanJob(j, g, epochs=e, epochs_done=d, epoch_s=s, remaining_s=r, priority=w)
        for j, (g, e, d, s, r, w) in enumerate(
            [(1, 50, 5, 100.0, 5e3, 1.0), (2, 80, 20, 300.0, 8e4, 3.0),
             (1, 20, 0, 90.0, 2e3, 1.0), (4, 30, 18, 400.0, 1e4, 1.0)]
        )
    )
    problem = PlanProblem(jobs, 5, 4, 120.0, 1e-4)
    _, by_highs = solve_counts(problem, HIGHS, with_ftf=False)
    _, by_scip = solve_counts(problem, SolverSpec("scip", mip_gap=1e-9), with_ftf=False)
    assert by_highs == pytest.approx(by_scip, abs=1e-6)


# Predictor.


def test_dirichlet_posterior_on_a_known_sequence() -> None:
    """Shockwave's posterior by hand: 10 epochs, modes 32 (60 s) and 64 (30 s), 3 done."""
    profile = JobProfile((32,) * 4 + (64,) * 6, (60.0,) * 4 + (30.0,) * 6)
    # prior 5 per mode; seen epochs 0..3 (all at 32): concentrations 9 and 5 of 14;
    # expected epochs 90/14 and 50/14, less the 4 seen at 32: 34/14 and 50/14 left.
    expected = (34 / 14) * 60.0 + (50 / 14) * 30.0
    # rescaled by left / max(left, int(84/14 + 1)) = 7 / 7.
    assert posterior_remaining_s(profile, 3) == pytest.approx(expected)
    assert posterior_remaining_s(profile, 10) == 0.0
    # Calibrated: a job measured at half the profile's speed takes twice as long.
    half_speed = [Measurement(120.0, 100 / 60 / 2, 32), Measurement(240.0, 100 / 60 / 2, 32)]
    assert posterior_remaining_s(
        profile, 3, calibration_factor(1.0, half_speed, profile.durations_s, 3200)
    ) == pytest.approx(2 * expected)
    assert profile.done_s(3) == 180.0 and profile.mean_epoch_s(3) == 60.0
    assert profile.mean_epoch_s(5) == pytest.approx((4 * 60 + 2 * 30) / 6)


def test_calibration_counts_samples_from_time_zero_as_shockwave_does() -> None:
    # 3,200 samples an epoch: 100 steps at batch size 32 in 60 s, 50 at 64 in 30 s.
    profile = JobProfile((32,) * 4 + (64,) * 6, (60.0,) * 4 + (30.0,) * 6)
    at_32 = 100 / 60  # steps/s at batch size 32, as profiled
    durations = profile.durations_s
    # Run from t = 0 at the profiled speed: 4 epochs in 240 s on both sides.
    on_time = [Measurement(120.0, at_32, 32), Measurement(240.0, at_32, 32)]
    assert calibration_factor(1.0, on_time, durations, 3200) == 1.0
    # Within 40% nothing changes, and an earlier calibration stays (it is sticky).
    assert calibration_factor(1.8, on_time, durations, 3200) == 1.8
    # A job first measured at 1,200 s: its rate at batch size 32 counts from time 0
    # (64,000 samples), while the profile walks 10 epochs in 420 s and goes on at its last
    # epoch's pace (115,200 samples): 44% apart, so the durations grow by 115,200 / 64,000.
    late = [Measurement(1200.0, at_32, 32)]
    assert calibration_factor(1.0, late, durations, 3200) == pytest.approx(1.8)
    # Nothing measured, or no dataset: unchanged.
    assert calibration_factor(1.3, [], durations, 3200) == 1.3
    assert calibration_factor(1.0, late, durations, 0) == 1.0


def test_running_calibration_compares_speeds_at_the_batch_size_each_round_ran() -> None:
    # Profile: 60 s epochs at batch size 32, 30 s at 64; rounds of 120 s.
    profile = JobProfile((32,) * 4 + (64,) * 6, (60.0,) * 4 + (30.0,) * 6)
    # On the profile's pace (2 epochs a round at 32, 4 at 64), whatever the waits between.
    on_pace = [RoundRun(2.0, 32), RoundRun(4.0, 64)]
    assert running_calibration_factor(1.0, on_pace, 120.0, profile) == 1.0
    # A restart cost of 20 s in every round (5/6 of the pace) stays within the 40% tolerance,
    # and an earlier factor stays (sticky, as Shockwave's).
    restarted = [RoundRun(2.0 * 5 / 6, 32), RoundRun(4.0 * 5 / 6, 64)]
    assert running_calibration_factor(1.0, restarted, 120.0, profile) == 1.0
    assert running_calibration_factor(1.7, restarted, 120.0, profile) == 1.7
    # Half the profile's speed at both sizes: durations double.
    half = [RoundRun(1.0, 32), RoundRun(2.0, 64), RoundRun(2.0, 64)]
    assert running_calibration_factor(1.0, half, 120.0, profile) == pytest.approx(2.0)
    # Twice as fast: durations halve.
    double = [RoundRun(4.0, 32), RoundRun(8.0, 64)]
    assert running_calibration_factor(1.0, double, 120.0, profile) == pytest.approx(0.5)
    # A batch size the profile lacks has no reference speed; nothing run, nothing changes.
    assert running_calibration_factor(1.3, [RoundRun(0.1, 128)], 120.0, profile) == 1.3
    assert running_calibration_factor(1.3, [], 120.0, profile) == 1.3


def test_running_calibration_follows_a_job_slower_than_its_profile() -> None:
    """A job that runs at 40% of the table's speed (a real cluster slower than profiled) has
    its durations scaled by 2.5 at the next plan; one on the table's speed keeps them."""
    table = default_throughputs()
    job_type = "ResNet-18 (batch size 32)"
    rate = table.throughput(job_type, 1, "v100")
    for speed, expected in ((0.4, 2.5), (1.0, 1.0)):
        policy = Shockwave().for_run(0)
        job = PolicyJob(0, job_type, 1, 1.0, 0.0, 1563 * 400, 0.0, mode="static")
        for index in range(9):  # the 9th round re-plans, and so re-calibrates
            problem = PolicyInput(
                120.0 * index, (job,), ("v100",), np.array([1.0]), np.array([[rate]]),
                table, None, 120.0,
            )
            policy.allocate(problem, HIGHS)
            job = replace(job, steps_done=job.steps_done + speed * rate * 120.0)
        # The profile's epochs are whole seconds, so the factor is close to, not exactly, 2.5.
        assert policy.tracked[0].calibration == pytest.approx(expected, rel=0.02)


def test_profile_durations_are_whole_seconds_as_shockwave_reads_them() -> None:
    assert whole_seconds(0.86) == 1.0 and whole_seconds(41.5) == 42.0
    assert whole_seconds(42.5) == 42.0 and whole_seconds(0.2) == 1.0


def test_a_static_job_is_predicted_up_to_shockwave_current_epoch_quirk() -> None:
    # Shockwave counts the epoch in progress as seen, so a static job is predicted one epoch
    # short (and a job in its last epoch as done).
    profile = JobProfile((64,) * 8, (45.0,) * 8)
    for done in range(9):
        assert posterior_remaining_s(profile, done) == pytest.approx(45.0 * max(7 - done, 0))


def test_the_posterior_after_a_batch_size_change() -> None:
    """10 epochs at 32 (60 s), then 30 at 64 (30 s); 20 done: epochs 0..20 seen (10 and 11),
    prior 20 per mode, concentrations 30 and 31 of 61, expected 1200/61 and 1240/61 epochs
    of 40, less those seen; rescaled by 20 / max(20, int(19 + 1))."""
    profile = JobProfile((32,) * 10 + (64,) * 30, (60.0,) * 10 + (30.0,) * 30)
    expected = (1200 / 61 - 10) * 60.0 + (1240 / 61 - 11) * 30.0
    assert posterior_remaining_s(profile, 20) == pytest.approx(expected)
    for done in range(41):  # bounded by the slowest and the fastest mode
        predicted = posterior_remaining_s(profile, done)
        assert 0.0 <= predicted <= 60.0 * (40 - done) + 1e-9


def test_momentum_average_of_finish_time_estimates() -> None:
    # 1000 held for 100 s, 2000 for 300 s: average 1750; 0.9 x 1750 + 0.1 x 2000.
    series = [(0.0, 1000.0), (100.0, 2000.0)]
    assert momentum_average(series, 400.0, 0.9) == pytest.approx(0.9 * 1750 + 0.1 * 2000)
    assert momentum_average(series, 100.0, 0.9) == pytest.approx(0.9 * 1000 + 0.1 * 2000)
    assert momentum_average([(50.0, 700.0)], 50.0, 0.9) == pytest.approx(700.0)
    with pytest.raises(ValueError):
        momentum_average([], 0.0, 0.9)


def test_rho_is_a_ratio_of_durations_from_arrival_or_of_absolute_times() -> None:
    # Arrived at 800 s, now 1000 s, 500 s left at its share, target 1200 s.
    since_arrival = Shockwave()
    assert since_arrival._rho(1000.0, 500.0, 1200.0, 800.0) == pytest.approx(700 / 400)
    artifact = Shockwave(ShockwaveOptions(rho_since_arrival=False))
    assert artifact._rho(1000.0, 500.0, 1200.0, 800.0) == pytest.approx(1500 / 1200)
    # The FTF constraint's slack holds rho to rho_max on the same durations: with
    # rho_max 1.2, a window ending at 1100 s may leave the job 1.2 x 400 - 300 s short.
    loose = ShockwaveOptions(rho_max=1.2)
    assert Shockwave(loose)._ftf_slack(1200.0, 800.0, 1100.0) == pytest.approx(180.0)
    artifact_loose = Shockwave(replace(loose, rho_since_arrival=False))
    assert artifact_loose._ftf_slack(1200.0, 800.0, 1100.0) == pytest.approx(1.2 * 1200 - 1100)
    # Priorities: 1 at or below rho_max, rho^lambda above, rho^100 with under a round left,
    # capped.
    policy = Shockwave()
    assert policy._priority(0.99, 5000.0, 120.0) == 1.0
    assert policy._priority(1.2, 5000.0, 120.0) == pytest.approx(1.2**12)
    assert policy._priority(1.1, 60.0, 120.0) == pytest.approx(1.1**100)
    assert policy._priority(2.0, 60.0, 120.0) == pytest.approx(1e6)


def test_the_policy_builds_each_job_profile_from_its_adaptation_mode() -> None:
    table = default_throughputs()
    policy = Shockwave().for_run(0)
    job_type = "ResNet-18 (batch size 32)"
    rate = table.throughput(job_type, 1, "v100")
    jobs = tuple(
        PolicyJob(j, job_type, 1, 1.0, 0.0, 1563 * 40, 0.0, mode=mode)
        for j, mode in enumerate(["static", "accordion"])
    )
    problem = PolicyInput(
        0.0, jobs, ("v100",), np.array([2.0]), np.array([[rate], [rate]]), table, None, 120.0
    )
    policy.allocate(problem, HIGHS)
    static, accordion = (policy.tracked[j].profile for j in (0, 1))
    assert set(static.batch_sizes) == {32} and static.epochs == 40
    assert set(accordion.batch_sizes) == {32, 256} and accordion.epochs == 40
    assert policy.last_outlook[1].remaining_s < policy.last_outlook[0].remaining_s


def _lone_job_rounds(policy: Shockwave, job: PolicyJob, start: float, rounds: int) -> PolicyJob:
    """Run `job` alone on one GPU for `rounds` rounds from `start`, as the simulator would."""
    table = default_throughputs()
    rate = table.throughput(job.job_type, 1, "v100")
    for index in range(rounds):
        problem = PolicyInput(
            start + 120.0 * index, (job,), ("v100",), np.array([1.0]), np.array([[rate]]),
            table, None, 120.0,
        )
        policy.allocate(problem, HIGHS)
        job = replace(job, steps_done=job.steps_done + rate * 120.0)
    return job


@pytest.mark.parametrize("calibration", ["artifact", "running", "off"])
def test_a_late_accordion_job_is_calibrated_as_in_shockwaves_simulator(calibration: str) -> None:
    # Admitted at 4,080 s at batch size 5: its measured samples/s, counted back to time 0,
    # fall far below the profile's, which reaches batch size 80 within those 4,000 s. shock's
    # default ("running") compares its speed with the profile's at batch size 5: on pace.
    policy = Shockwave().with_options({"calibration": calibration})
    job = PolicyJob(0, "LM (batch size 5)", 1, 1.0, 4055.0, 11935 * 60, 0.0, mode="accordion")
    _lone_job_rounds(policy, job, 4080.0, 9)  # the 9th round re-plans, and so re-calibrates
    assert policy.stats.plans == 2
    factor = policy.tracked[0].calibration
    assert factor > 1.4 if calibration == "artifact" else factor == 1.0


def test_periodic_replans_come_every_8_rounds_from_the_start() -> None:
    policy = Shockwave().for_run(0)
    job = PolicyJob(0, "ResNet-18 (batch size 32)", 1, 1.0, 0.0, 10**7, 0.0, mode="static")
    _lone_job_rounds(policy, job, 0.0, 17)
    assert policy.stats.plans == 3  # rounds 1, 9 and 17


# Priorities and rounds.


def test_a_starved_job_rises_in_priority_until_it_runs() -> None:
    """One GPU, four jobs of about 12 rounds alone each; the policy's round order is followed
    by hand. A job that waits sees its rho (its priority) rise every round; every job starts
    within the first planning window and all finish without an idle round. (Shockwave runs
    long stretches here: a plan holds for 8 rounds while no job leaves, and the makespan term
    keeps the longest job running.)"""
    table = default_throughputs()
    types = ["ResNet-18 (batch size 32)", "LM (batch size 20)", "ResNet-50 (batch size 64)"]
    rates = {t: table.throughput(t, 1, "v100") for t in types}
    jobs = {j: (types[j % 3], int(rates[types[j % 3]] * 1500)) for j in range(4)}
    done = dict.fromkeys(jobs, 0.0)
    policy = Shockwave().for_run(0)
    waited = dict.fromkeys(jobs, 0)
    first_run: dict[int, int] = {}
    previous_rho: dict[int, float] = {}
    round_index = 0
    while any(done[j] < total for j, (_, total) in jobs.items()):
        active = [j for j, (_, total) in jobs.items() if done[j] < total]
        current = tuple(
            PolicyJob(j, jobs[j][0], 1, 1.0, 0.0, jobs[j][1], done[j]) for j in active
        )
        throughputs = np.array([[rates[jobs[j][0]]] for j in active])
        problem = PolicyInput(
            round_index * 120.0, current, ("v100",), np.array([1.0]), throughputs, table,
            None, 120.0,
        )
        allocation = policy.allocate(problem, HIGHS)
        assert allocation.round_order is not None
        runner = allocation.round_order[0]
        rho = {j: policy.last_outlook[j].rho for j in active}
        for j in active:
            # Waiting raises its rho (its targets are re-estimated only when jobs leave).
            if set(previous_rho) == set(active) and waited[j] > 0:
                assert rho[j] > previous_rho[j]
        done[runner] = min(done[runner] + rates[jobs[runner][0]] * 120.0, jobs[runner][1])
        first_run.setdefault(runner, round_index)
        for j in active:
            waited[j] = 0 if j == runner else waited[j] + 1
        previous_rho = rho
        round_index += 1
        assert round_index < 200
    assert all(first <= ShockwaveOptions().num_rounds for first in first_run.values())
    assert round_index <= 4 * 1500 / 120 + 4  # the GPU never idled


def test_rounds_follow_the_policy_order_and_fill_every_gpu() -> None:
    """In the mechanism, the shockwave round order is realised with whole gangs and GPUs
    are left idle only when no waiting job fits."""
    from test_mechanism import make_mechanism, run_round

    mechanism = make_mechanism("4:0:0", policy="shockwave")
    sizes = [1, 1, 2, 4, 1, 2, 1]
    for job_id, size in enumerate(sizes):
        mechanism.admit(JobSpec(job_id, "ResNet-18 (batch size 32)", 400_000, size))
    for round_index in range(12):
        assignments = run_round(mechanism, round_index * mechanism.config.round_length_s)
        used = sum(len(a.gpus) for a in assignments)
        running = {a.job.job_id for a in assignments}
        waiting = [j for j in mechanism.active.values() if j.job_id not in running]
        assert all(j.scale_factor > 4 - used for j in waiting)


def test_options_are_typed_and_checked() -> None:
    options = typed_options(
        ShockwaveOptions(), parse_policy_options(["k=0.5", "lambda=3", "ftf-constraint=no"]), "s"
    )
    assert options.k == 0.5 and options.lambda_ == 3.0 and options.ftf_constraint is False
    with pytest.raises(InputError, match="no option 'kappa'"):
        typed_options(ShockwaveOptions(), {"kappa": "1"}, "shockwave")
    with pytest.raises(InputError, match="expected int"):
        typed_options(ShockwaveOptions(), {"num_rounds": "ten"}, "shockwave")
    with pytest.raises(InputError, match="num_rounds must be >= 1"):
        typed_options(ShockwaveOptions(), {"num_rounds": "0"}, "shockwave")
    with pytest.raises(InputError, match="takes no options"):
        default_registry().get("policy", "max_min_fairness").with_options({"k": "1"})
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_policy_options(["k"])


def test_cli_runs_shockwave_with_options(tmp_path: Path) -> None:
    trace = tmp_path / "small.trace"
    made = run_shock("trace", "generate-dynamic", str(trace), "--jobs", "8", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    common = ["run", "--policy", "shockwave", "--trace", str(trace), "--cluster", "4:0:0"]
    done = run_shock(
        *common, "--preset", "shockwave", "--policy-option", "num_rounds=4",
        "--policy-option", "k=1", "--quiet", cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "jobs measured" in done.stdout and "8" in done.stdout
    bad = run_shock(*common, "--policy-option", "num_rounds=many", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--policy-option num_rounds" in bad.stderr and "expected int" in bad.stderr


def test_shockwave_cannot_be_partitioned() -> None:
    with pytest.raises(InputError, match="cannot be partitioned"):
        build_request(RunOptions(policy="shockwave", partitions=2))
