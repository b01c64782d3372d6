"""Shockwave's baselines as its simulator states them (`--preset shockwave`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.runner import RunOptions, build_request, bundled_trace_path
from shock.core.solver import SolverSpec
from shock.plugins.policies.max_sum_throughput import MaxSumThroughput
from tests.instances import generated_input

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


def test_shockwave_preset_sums_raw_steps_and_others_do_not() -> None:
    registry = default_registry()
    trace = str(bundled_trace_path("shockwave_120_multigpu_dynamic.trace"))
    for preset, raw in (("shockwave", True), ("default", False), ("gavel", False)):
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
    from tests.test_policies_heuristics import problem

    return problem(
        {"v100": 2}, [[1.0], [1.0], [1.0]], scale_factors=[2, 1, 1],
        steps=[gang_steps, 300.0, 600.0], now=now,
    )


def test_gavel_gangs_give_a_gang_one_lane_and_a_share_of_one_over_its_size() -> None:
    from shock.core.allocation_check import allocate_checked
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
    from shock.core.allocation_check import allocate_checked
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
