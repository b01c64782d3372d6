"""The shockwave policy: planner feasibility, priorities, predictor, options."""

from __future__ import annotations

import math
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
from shock.core.runner import RunOptions, build_request
from shock.core.solver import SolverSpec, is_installed
from shock.core.throughputs import default_throughputs
from shock.plugins.policies.shockwave.options import ShockwaveOptions
from shock.plugins.policies.shockwave.planner import (
    PlanJob,
    PlanProblem,
    breakpoints,
    log_progress_points,
    solve_plan,
)
from shock.plugins.policies.shockwave.policy import Shockwave
from shock.plugins.policies.shockwave.predictor import (
    ModeObservations,
    attained_alone_s,
    calibration_factor,
    posterior_shares,
    predicted_remaining_s,
)

HIGHS = SolverSpec("highs", time_limit_s=5.0, mip_gap=1e-6)

plan_jobs = st.lists(
    st.builds(
        PlanJob,
        job_id=st.integers(0, 10**6),
        gpus=st.sampled_from([1, 1, 1, 2, 2, 4, 8]),
        progress=st.floats(0.0, 0.99),
        progress_per_round=st.floats(0.001, 0.3),
        remaining_s=st.floats(0.0, 1e5),
        weight=st.floats(1.0, 20.0),
        ftf_min_rounds=st.integers(0, 6),
    ),
    min_size=1,
    max_size=14,
    unique_by=lambda job: job.job_id,
)


@settings(max_examples=25, deadline=None)
@given(
    jobs=plan_jobs,
    capacity=st.sampled_from([8, 12, 16]),
    rounds=st.integers(1, 6),
    pieces=st.integers(0, 3),
)
def test_every_planned_round_fits_the_cluster_with_whole_gangs(
    jobs: list[PlanJob], capacity: int, rounds: int, pieces: int
) -> None:
    problem = PlanProblem(tuple(jobs), rounds, capacity, 120.0, 0.1, pieces)
    plan = solve_plan(problem, HIGHS)
    x = plan.rounds
    assert x.shape == (len(jobs), rounds)
    assert set(np.unique(x)) <= {0.0, 1.0}  # a gang runs whole or not at all
    gpus = np.array([job.gpus for job in jobs])
    assert np.all(gpus @ x <= capacity)
    if plan.ftf_enforced:
        for job, row in zip(jobs, x, strict=True):
            assert row.sum() >= min(job.ftf_min_rounds, rounds)


def test_the_plan_is_optimal_for_the_exact_log_utilities() -> None:
    # Two equal single-GPU jobs, one GPU, 4 rounds: Nash welfare splits the rounds evenly;
    # the more-progressed job needs fewer rounds for the same log gain, so the other gets more.
    jobs = (
        PlanJob(0, 1, 0.1, 0.05, 1000.0, 1.0),
        PlanJob(1, 1, 0.1, 0.05, 1000.0, 1.0),
    )
    plan = solve_plan(PlanProblem(jobs, 4, 1, 120.0, 0.0), HIGHS)
    assert [plan.rounds_of(0), plan.rounds_of(1)] == [2, 2]
    skewed = (PlanJob(0, 1, 0.5, 0.05, 1000.0, 1.0), PlanJob(1, 1, 0.05, 0.05, 1000.0, 1.0))
    plan = solve_plan(PlanProblem(skewed, 4, 1, 120.0, 0.0), HIGHS)
    best = max(
        range(5),
        key=lambda n: math.log(0.5 + 0.05 * n) + math.log(0.05 + 0.05 * (4 - n)),
    )
    assert plan.rounds_of(0) == best


def test_the_makespan_term_favours_the_longest_job() -> None:
    jobs = (PlanJob(0, 1, 0.5, 0.01, 1e5, 1.0), PlanJob(1, 1, 0.5, 0.01, 1e3, 1.0))
    even = solve_plan(PlanProblem(jobs, 4, 1, 120.0, 0.0), HIGHS)
    pushed = solve_plan(PlanProblem(jobs, 4, 1, 120.0, 10.0), HIGHS)
    assert even.rounds_of(0) == 2
    assert pushed.rounds_of(0) == 4


def test_an_infeasible_ftf_constraint_is_dropped() -> None:
    jobs = tuple(PlanJob(j, 1, 0.1, 0.05, 1000.0, 2.0, ftf_min_rounds=3) for j in range(3))
    plan = solve_plan(PlanProblem(jobs, 3, 2, 120.0, 0.1), HIGHS)  # needs 9 of 6 slots
    assert not plan.ftf_enforced
    feasible = solve_plan(PlanProblem(jobs[:2], 3, 2, 120.0, 0.1), HIGHS)
    assert feasible.ftf_enforced and feasible.rounds.sum() == 6


def test_log_pieces_meet_the_log_at_their_breakpoints() -> None:
    assert breakpoints(10, 0) == list(range(11))
    assert breakpoints(10, 2) == [0, 5, 10]
    job = PlanJob(0, 1, 0.0, 0.4, 0.0, 1.0)
    points = log_progress_points(job, 4)
    assert points[0] == pytest.approx(math.log(1e-4))
    assert points[1] == pytest.approx(math.log(0.4))
    assert points[3] == points[4] == 0.0  # capped at progress 1


@pytest.mark.skipif(not is_installed("scip"), reason="SCIP is not installed")
def test_pyomo_path_agrees_with_highs() -> None:
    jobs = tuple(
        PlanJob(j, g, p, 0.05, r, w)
        for j, (g, p, r, w) in enumerate(
            [(1, 0.1, 5e3, 1.0), (2, 0.3, 8e4, 3.0), (1, 0.0, 2e3, 1.0), (4, 0.6, 1e4, 1.0)]
        )
    )
    problem = PlanProblem(jobs, 5, 4, 120.0, 0.2)
    by_highs = solve_plan(problem, HIGHS)
    by_scip = solve_plan(problem, SolverSpec("scip", mip_gap=1e-9))

    def welfare(rounds: list[int]) -> float:
        logs = sum(
            job.weight * log_progress_points(job, 5)[n] for job, n in zip(jobs, rounds, strict=True)
        )
        longest = max(job.remaining_s - 120.0 * n for job, n in zip(jobs, rounds, strict=True))
        return logs - 0.2 * max(longest, 0.0) / (5 * 120.0)

    highs_rounds = [by_highs.rounds_of(j) for j in range(4)]
    scip_rounds = [by_scip.rounds_of(j) for j in range(4)]
    assert welfare(highs_rounds) == pytest.approx(welfare(scip_rounds), abs=1e-6)


# Predictor.


def test_dirichlet_posterior_on_a_known_sequence() -> None:
    # 10 epochs seen at bs 32, 5 at 64, none at 128; one pseudo-epoch per mode.
    assert posterior_shares([10, 5, 0], 1.0) == pytest.approx([11 / 18, 6 / 18, 1 / 18])
    observations = ModeObservations((32, 64, 128), (60.0, 40.0, 30.0), (10.0, 5.0, 0.0))
    mean_epoch = (11 * 60 + 6 * 40 + 1 * 30) / 18
    assert predicted_remaining_s(observations, 20, 1.0) == pytest.approx(20 * mean_epoch)
    # A job measured at half the table's speed takes twice as long.
    assert predicted_remaining_s(observations, 20, 1.0, calibration_factor(10, 5)) == (
        pytest.approx(40 * mean_epoch)
    )
    assert attained_alone_s(observations) == pytest.approx(10 * 60 + 5 * 40)
    # No prior: the observed shares alone.
    assert posterior_shares([3, 1, 0], 0.0) == pytest.approx([0.75, 0.25, 0.0])


def test_the_predictor_learns_a_batch_size_change() -> None:
    """Feed the policy a GNS-like job: 10 epochs at bs 32, then bs 64; its predicted remaining
    time moves toward the faster mode's epoch duration as epochs at 64 are seen."""
    table = default_throughputs()
    policy = Shockwave().for_run(0)
    per_epoch = {32: 1563, 64: 782}
    remaining: list[float] = []
    for step in range(30):
        size = 32 if step < 10 else 64
        epochs_done = float(step)
        job_type = f"ResNet-18 (batch size {size})"
        rate = table.throughput(job_type, 1, "v100")
        steps = per_epoch[size]
        job = PolicyJob(0, job_type, 1, 1.0, 0.0, 100 * steps, epochs_done * steps)
        problem = PolicyInput(
            now=step * 100.0,
            jobs=(job,),
            worker_types=("v100",),
            capacity=np.array([1.0]),
            throughputs=np.array([[rate]]),
            table=table,
            round_length_s=120.0,
        )
        policy.allocate(problem, HIGHS)
        remaining.append(policy.last_outlook[0].remaining_s / (100 - epochs_done))
    history = policy.history[0]
    assert history.epochs_by_mode[32] == pytest.approx(10.0)
    assert history.epochs_by_mode[64] == pytest.approx(19.0)
    duration_64 = history.epoch_duration_by_mode[64]
    # Per-epoch prediction falls after the switch and approaches the bs-64 duration.
    assert remaining[20] < remaining[10]
    assert abs(remaining[29] - duration_64) < abs(remaining[12] - duration_64)


# Priorities and rounds.


def test_a_starved_job_rises_in_priority_until_it_runs() -> None:
    """One GPU, four jobs of about 12 rounds alone each; the policy's round order is followed
    by hand. A job that waits sees its rho (its priority) rise every round, no job waits more
    than a bounded streak, and all finish."""
    table = default_throughputs()
    types = ["ResNet-18 (batch size 32)", "LM (batch size 20)", "ResNet-50 (batch size 64)"]
    rates = {t: table.throughput(t, 1, "v100") for t in types}
    jobs = {j: (types[j % 3], int(rates[types[j % 3]] * 1500)) for j in range(4)}
    done = dict.fromkeys(jobs, 0.0)
    policy = Shockwave().for_run(0)
    waited = dict.fromkeys(jobs, 0)
    longest_wait = 0
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
            if j in previous_rho and waited[j] > 0:
                assert rho[j] > previous_rho[j]  # waiting raises its priority
        done[runner] = min(done[runner] + rates[jobs[runner][0]] * 120.0, jobs[runner][1])
        for j in active:
            waited[j] = 0 if j == runner else waited[j] + 1
            longest_wait = max(longest_wait, waited[j])
        previous_rho = rho
        round_index += 1
        assert round_index < 200
    assert longest_wait <= 6
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
