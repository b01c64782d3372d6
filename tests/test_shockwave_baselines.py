"""Shockwave's baselines as its simulator states them (`--preset shockwave`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from instances import generated_input

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.solver import SolverSpec
from shock.engine.allocation_check import allocate_checked
from shock.engine.runner import RunOptions, build_request, bundled_trace_path
from shock.plugins.policies.max_sum_throughput import MaxSumThroughput

SOLVER = SolverSpec(name="highs")


def two_models_on_one_gpu() -> object:
    """Two single-GPU jobs on one V100: the first steps 10x faster than the second."""
    problem = generated_input(2, (0, 0, 1), seed=3, multi_gpu=False)
    jobs = tuple(dataclasses.replace(job, scale_factor=1) for job in problem.jobs)
    throughputs = np.array([[0.0, 0.0, 10.0], [0.0, 0.0, 1.0]])
    return dataclasses.replace(problem, jobs=jobs, throughputs=throughputs)


def test_raw_throughput_gives_the_gpu_to_the_fastest_stepping_job() -> None:
    problem = two_models_on_one_gpu()
    raw = MaxSumThroughput().with_options({"raw_throughput": "true"}).allocate(problem, SOLVER)
    assert raw.fractions[0, 2] == pytest.approx(1.0, abs=1e-6)
    assert raw.fractions[1, 2] == pytest.approx(0.0, abs=1e-6)
    assert raw.objective == pytest.approx(10.0, rel=1e-6)


def test_normalised_throughput_weighs_both_jobs_alike() -> None:
    # Each job counts its share of its own best rate, so neither is worth more: the GPU's
    # time is split, where raw steps/s would give it all to the first job.
    fractions = MaxSumThroughput().allocate(two_models_on_one_gpu(), SOLVER).fractions
    assert fractions[:, 2].sum() == pytest.approx(1.0, abs=1e-6)
    assert fractions[1, 2] > 0.1


def test_the_artifact_presets_sum_raw_steps_and_the_default_does_not() -> None:
    registry = default_registry()
    trace = str(bundled_trace_path("shockwave_120_multigpu_dynamic.trace"))
    for preset, raw in (("shockwave", True), ("default", False), ("gavel", True)):
        request = build_request(
            RunOptions(policy="max_sum_throughput_perf", preset=preset, trace=trace,
                       cluster="32:0:0"),
            registry,
        )
        assert request.policy.options.raw_throughput is raw


def test_shockwave_preset_runs_allox_as_shockwaves_simulator() -> None:
    registry = default_registry()
    trace = str(bundled_trace_path("shockwave_120_multigpu_dynamic.trace"))
    shockwave = build_request(
        RunOptions(policy="allox", preset="shockwave", trace=trace, cluster="32:0:0"), registry
    ).policy
    assert (shockwave.alpha, shockwave.may_oversubscribe) == (0.2, True)
    assert shockwave.name == "allox"
    default = build_request(
        RunOptions(policy="allox", preset="default", trace=trace, cluster="32:0:0"), registry
    ).policy
    assert (default.alpha, default.may_oversubscribe) == (1.0, False)


def test_allox_alpha_option_is_checked() -> None:
    from shock.plugins.policies.allox import AlloX

    with pytest.raises(InputError, match="alpha"):
        AlloX().with_options({"alpha": "1.5"})


def test_bad_raw_throughput_value_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="raw_throughput"):
        MaxSumThroughput().with_options({"raw_throughput": "maybe"})


# AlloX as Gavel's and Shockwave's simulators run it (`gavel_gangs=true`). Two V100s; job 0 a
# 2-GPU gang, jobs 1 and 2 single-GPU; lane times R / T ignore the gang's size: 100, 300, 600 s.
def gang_problem(now: float = 0.0, gang_steps: float = 100.0) -> object:
    from test_policies_heuristics import problem

    return problem(
        {"v100": 2}, [[1.0], [1.0], [1.0]], scale_factors=[2, 1, 1],
        steps=[gang_steps, 300.0, 600.0], now=now,
    )


def test_gavel_gangs_give_a_gang_one_lane_and_a_share_of_one_over_its_size() -> None:
    from shock.plugins.policies.allox import AlloX

    policy = AlloX().with_options({"gavel_gangs": "true"}).for_run(0)
    first = allocate_checked(policy, gang_problem(), SOLVER)
    # Two lanes, three jobs: least sum of k x p puts the shortest (the gang, 100 s) at k = 2
    # ahead of one job, the other alone at k = 1: 2 x 100 + 300 + 600. Of the two k = 1 jobs
    # the shorter heads the lone lane. The gang gets 1/2 of a V100, job 1 a whole one.
    np.testing.assert_allclose(first.fractions[:, 0], [0.5, 1.0, 0.0])
    # Job 1's shares add up to 1: it keeps its GPU. The gang's do not: it is matched again,
    # now longer than job 2 (1,000 s left), so job 2 heads the one free lane while the gang
    # keeps its 1/2: the shares ask for 2 x 0.5 + 1 + 1 = 3 GPUs of the 2.
    second = allocate_checked(policy, gang_problem(120.0, gang_steps=1000.0), SOLVER)
    np.testing.assert_allclose(second.fractions[:, 0], [0.5, 1.0, 1.0])
    assert policy.may_oversubscribe


def test_shock_allox_never_oversubscribes() -> None:
    from shock.plugins.policies.allox import AlloX

    policy = AlloX().for_run(0)
    for now in (0.0, 120.0):
        fractions = allocate_checked(policy, gang_problem(now), SOLVER).fractions
        assert (fractions[:, 0] * [2, 1, 1]).sum() <= 2.0 + 1e-9
    assert not policy.may_oversubscribe


def test_gavel_gang_shares_survive_snapshot_and_restore() -> None:
    from shock.plugins.policies.allox import AlloX

    policy = AlloX().with_options({"gavel_gangs": "true"}).for_run(0)
    policy.allocate(gang_problem(), SOLVER)
    copy = AlloX().with_options({"gavel_gangs": "true"}).for_run(0)
    copy.restore(policy.snapshot())
    np.testing.assert_array_equal(
        copy.allocate(gang_problem(120.0), SOLVER).fractions,
        policy.allocate(gang_problem(120.0), SOLVER).fractions,
    )


# Gavel's and Shockwave's min_total_duration: their bisection's end, then the centre.
@given(st.floats(min_value=1.0, max_value=1e9, allow_nan=False))
def test_gavel_bisection_ends_within_five_percent_above_the_optimum(best: float) -> None:
    from shock.plugins.policies.min_total_duration import gavel_bisection_end

    end = gavel_bisection_end(best)
    # The search starts at [100 s, 10^6 s] (below 100 s it ends just above 100 s). Where the
    # optimum lies in the top 5% of a decade that no midpoint reached, the search moves on
    # to the next decade and ends within 5% above the decade's start instead.
    assert max(best, 100.0) <= end < 1.05**2 * max(best, 100.0)


def test_gavel_bisection_by_hand() -> None:
    from shock.plugins.policies.min_total_duration import gavel_bisection_end

    # [100, 1e6]: midpoints 500,050, 250,075, 125,087.5, 62,593.75, 31,346.875 (all >= 20,000,
    # so each is the new top), 15,723.4375 (< 20,000: the new bottom), 23,535.15625 (top),
    # 19,629.296875 (bottom), 21,582.2265625 (top; 1.05 x 19,629.3 = 20,610.8 is below it, so
    # go on), 20,605.76171875 (top); 20,610.8 >= 20,605.8: stop.
    assert gavel_bisection_end(20_000.0) == pytest.approx(20_605.76171875)
    # No midpoint of [1e8, 1e9] reaches 971,875,001 (the last is 971,875,000), so the search
    # widens to [1e9, 1e10] and halves down to 1,035,156,250.
    assert gavel_bisection_end(971_875_001.0) == pytest.approx(1_035_156_250.0)


def barrier_gradient(x, rates, floors, scale, capacity):  # type: ignore[no-untyped-def]
    return (
        -1.0 / x
        + (1.0 / (1.0 - x.sum(axis=1)))[:, None]
        + scale[:, None] / (capacity - scale @ x)[None, :]
        - rates / ((rates * x).sum(axis=1) - floors)[:, None]
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_analytic_centre_zeroes_the_barriers_gradient(seed: int) -> None:
    from shock.lp.analytic_centre import analytic_centre, is_strictly_feasible

    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    rates = rng.uniform(0.5, 5.0, (m, n))
    scale = rng.integers(1, 3, m).astype(float)
    capacity = rng.integers(1, 5, n).astype(float)
    start = np.full((m, n), 0.4 * min(1.0 / n, float(capacity.min() / scale.sum())))
    floors = 0.5 * (rates * start).sum(axis=1)  # the start meets them with room
    assert is_strictly_feasible(start, rates, floors, scale, capacity)
    centre = analytic_centre(start, rates, floors, scale, capacity)
    assert is_strictly_feasible(centre, rates, floors, scale, capacity)
    gradient = barrier_gradient(centre, rates, floors, scale, capacity)
    assert np.abs(gradient).max() < 1e-4 * max(1.0, np.abs(1.0 / centre).max())


def test_analytic_centre_of_a_symmetric_box_by_hand() -> None:
    # Two jobs on 2 GPUs at rate 1 with floor 0.2: by symmetry x1 = x2 = t maximising
    # log t + log(t - 0.2) + log(1 - t), twice, plus log(2 - 2t): the derivative
    # 1/t + 1/(t - 0.2) - 1/(1 - t) - 1/(2 - 2t) = 0, i.e. 1/t + 1/(t - 0.2) = 1.5 / (1 - t),
    # whose one root in (0.2, 1) is found below by bisection.
    from shock.lp.analytic_centre import analytic_centre

    def derivative(t: float) -> float:
        return 1 / t + 1 / (t - 0.2) - 1.5 / (1 - t)

    low, high = 0.2 + 1e-12, 1 - 1e-12
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if derivative(middle) > 0 else (low, middle)
    centre = analytic_centre(
        np.array([[0.5], [0.5]]), np.ones((2, 1)), np.array([0.2, 0.2]), np.ones(2),
        np.array([2.0]),
    )
    np.testing.assert_allclose(centre[:, 0], [low, low], atol=1e-7)


def test_gavel_bisection_gives_every_job_slack_within_the_bracket() -> None:
    from shock.plugins.policies.min_total_duration import MinTotalDuration, makespan

    problem = generated_input(12, (4, 4, 4), seed=5, multi_gpu=True)
    exact = MinTotalDuration(True).allocate(problem, SOLVER)
    policy = MinTotalDuration(True).with_options({"gavel_bisection": "true"})
    centred = allocate_checked(policy, problem, SOLVER)
    remaining = problem.steps_remaining
    best = makespan(problem.throughputs, remaining, exact.fractions)
    ends = makespan(problem.throughputs, remaining, centred.fractions)
    # The centre meets the floors of the bisection's end, T* <= T_b < 1.05 T*, with room.
    assert best * (1 - 1e-9) <= ends < 1.05 * best
    rates = (problem.throughputs * centred.fractions).sum(axis=1)
    left = remaining > 0
    assert (rates[left] > remaining[left] / (1.05 * best)).all()
    assert (centred.fractions > 0).sum() > (exact.fractions > 1e-9).sum()


def test_shockwave_preset_sets_gavel_bisection() -> None:
    registry = default_registry()
    trace = str(bundled_trace_path("shockwave_120_multigpu_dynamic.trace"))
    for preset, expected in (("shockwave", True), ("gavel", False)):
        policy = build_request(
            RunOptions(policy="min_total_duration", preset=preset, trace=trace, cluster="32:0:0"),
            registry,
        ).policy
        assert policy.options.gavel_bisection is expected
