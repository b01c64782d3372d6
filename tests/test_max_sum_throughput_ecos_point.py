"""max_sum_throughput_perf answered with ECOS's interior point (`ecos_point=true`), as Gavel's
and Shockwave's simulators answer it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from instances import generated_input
from scipy.optimize import linprog
from shockwave_traces import shockwave_run

from shock.core.plugins import default_registry
from shock.core.solver import SolverSpec
from shock.engine.runner import RunOptions, build_request, bundled_trace_path
from shock.lp.conic_interior_point import conic_interior_point_optimum
from shock.plugins.policies.max_sum_throughput import MaxSumThroughput


def random_problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """gains, scale, capacity: more GPUs asked for than there are, so some jobs are left out."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 12)), int(rng.integers(1, 4))
    gains = rng.uniform(0.5, 200.0, (m, n)) * (rng.uniform(size=(m, n)) > 0.2)
    scale = rng.choice([1.0, 2.0, 4.0], m)
    capacity = rng.integers(1, 6, n).astype(float)
    return gains, scale, capacity


def lp_optimum(gains: np.ndarray, scale: np.ndarray, capacity: np.ndarray) -> float:
    m, n = gains.shape
    rows = [np.kron(np.eye(m)[j], np.ones(n)) for j in range(m)]
    rows += [np.kron(scale, np.eye(n)[w]) for w in range(n)]
    result = linprog(
        -gains.ravel(),
        A_ub=np.array(rows),
        b_ub=np.concatenate([np.ones(m), capacity]),
        bounds=[(0, None)] * (m * n),
        method="highs-ds",
    )
    assert result.status == 0
    return float(-result.fun)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_answer_is_an_optimum_within_the_methods_tolerance(seed: int) -> None:
    gains, scale, capacity = random_problem(seed)
    x = conic_interior_point_optimum(gains, scale, capacity)
    assert x is not None
    tolerance = 1e-7
    assert (x >= -tolerance).all()
    assert (x.sum(axis=1) <= 1 + tolerance).all()
    assert (scale @ x <= capacity * (1 + tolerance)).all()
    best = lp_optimum(gains, scale, capacity)
    assert float((gains * x).sum()) == pytest.approx(best, rel=1e-6, abs=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_answer_follows_the_jobs_not_their_order(seed: int) -> None:
    gains, scale, capacity = random_problem(seed)
    order = np.random.default_rng(seed + 1).permutation(len(scale))
    x = conic_interior_point_optimum(gains, scale, capacity)
    shuffled = conic_interior_point_optimum(gains[order], scale[order], capacity)
    assert x is not None and shuffled is not None
    np.testing.assert_allclose(shuffled, x[order], rtol=1e-5, atol=1e-12)


def three_jobs_on_one_gpu() -> object:
    """Three single-GPU jobs on one V100 stepping 10, 5 and 2 steps/s: the optimum runs the
    first all the time and leaves the other two out."""
    problem = generated_input(3, (0, 0, 1), seed=3, multi_gpu=False)
    jobs = tuple(
        dataclasses.replace(job, scale_factor=1, priority_weight=1.0) for job in problem.jobs
    )
    throughputs = np.array([[0.0, 0.0, 10.0], [0.0, 0.0, 5.0], [0.0, 0.0, 2.0]])
    return dataclasses.replace(problem, jobs=jobs, throughputs=throughputs)


def test_left_out_jobs_keep_tiny_shares_ranked_by_how_close_they_came() -> None:
    problem = three_jobs_on_one_gpu()
    policy = MaxSumThroughput().with_options({"raw_throughput": "true", "ecos_point": "true"})
    fractions = policy.allocate(problem, SolverSpec(name="highs")).fractions[:, 2]
    assert fractions[0] == pytest.approx(1.0, abs=1e-6)
    # Left out, but not at 0: the method stops short of the boundary, nearer for the job
    # that steps slower (further from being worth the GPU).
    assert 0 < fractions[2] < fractions[1] < 1e-6


def test_without_the_option_left_out_jobs_get_nothing() -> None:
    problem = three_jobs_on_one_gpu()
    policy = MaxSumThroughput().with_options({"raw_throughput": "true"})
    fractions = policy.allocate(problem, SolverSpec(name="highs")).fractions[:, 2]
    assert fractions[0] == pytest.approx(1.0, abs=1e-6)
    assert (fractions[1:] == 0).all()


def test_the_artifact_presets_take_ecos_point() -> None:
    registry = default_registry()
    trace = str(bundled_trace_path("shockwave_120_multigpu_dynamic.trace"))
    for preset, expected in (("shockwave", True), ("default", False), ("gavel", True)):
        request = build_request(
            RunOptions(
                policy="max_sum_throughput_perf", preset=preset, trace=trace, cluster="32:0:0"
            ),
            registry,
        )
        assert request.policy.options.ecos_point is expected


def test_shockwave_max_sum_throughput_matches_shockwaves_simulator_on_460_jobs() -> None:
    """Shockwave's 460-job trace (WISR table, 128 GPUs): its simulator's
    max_sum_throughput_perf gives makespan 33,792 s, average JCT 9,237 s, worst rho 6.006
    (benchmarks/shockwave_baselines.py). With the LP's exact optimum (left-out jobs at 0, so
    other jobs fill the spare GPUs) the makespan was 32,725 s (-3.2%)."""
    metrics = shockwave_run("max_sum_throughput_perf", "460")
    assert metrics.makespan_s == pytest.approx(33_792.0, rel=0.02)
    assert metrics.avg_jct_s == pytest.approx(9_237.0, rel=0.02)
    assert metrics.worst_ftf_rho == pytest.approx(6.006, rel=0.05)
