"""The interior-point method that stands for ECOS in Gavel's and Shockwave's min_total_duration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shockwave_traces import shockwave_run

from shock.lp.conic_interior_point import _Rows, conic_interior_point


def random_problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """rates, floors, scale, capacity of a feasible problem with room: the floors are half
    the rates of an even split that fits."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 8)), int(rng.integers(1, 4))
    rates = rng.uniform(0.5, 200.0, (m, n)) * (rng.uniform(size=(m, n)) > 0.2)
    rates[:, 0] = np.maximum(rates[:, 0], 0.5)  # every job runs somewhere
    scale = rng.integers(1, 5, m).astype(float)
    capacity = rng.integers(1, 9, n).astype(float)
    even = np.full((m, n), 0.9 * min(1.0 / n, float(capacity.min() / scale.sum())))
    floors = 0.5 * (rates * even).sum(axis=1)
    return rates, floors, scale, capacity


def dense(rows: _Rows) -> np.ndarray:
    """G as a matrix, column by column."""
    m, n = rows.bound.shape
    columns = []
    for k in range(m * n):
        unit = np.zeros(m * n)
        unit[k] = 1.0
        columns.append(rows.times(unit.reshape(m, n)))
    return np.stack(columns, axis=1)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_normal_equations_match_a_dense_solve(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    rows = _Rows(*(rng.uniform(-3.0, 3.0, (4, m, n))))
    rows.bound = -rng.uniform(0.5, 2.0, (m, n))  # every variable has its own bound row
    weights = rng.uniform(0.01, 100.0, m * n + n + 2 * m)
    rhs = rng.normal(size=(m, n))
    matrix = dense(rows)
    expected = np.linalg.solve(matrix.T @ (weights[:, None] * matrix), rhs.ravel())
    solved = rows.solve_normal(weights, rhs).ravel()
    np.testing.assert_allclose(solved, expected, rtol=1e-7, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_answer_meets_every_constraint(seed: int) -> None:
    rates, floors, scale, capacity = random_problem(seed)
    x = conic_interior_point(rates, floors, scale, capacity)
    assert x is not None
    tolerance = 1e-7
    assert (x >= -tolerance).all()
    assert (x.sum(axis=1) <= 1 + tolerance).all()
    assert (scale @ x <= capacity * (1 + tolerance)).all()
    assert ((rates * x).sum(axis=1) >= floors * (1 - tolerance)).all()


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_answer_follows_the_jobs_not_their_order(seed: int) -> None:
    rates, floors, scale, capacity = random_problem(seed)
    order = np.random.default_rng(seed + 1).permutation(len(floors))
    x = conic_interior_point(rates, floors, scale, capacity)
    shuffled = conic_interior_point(rates[order], floors[order], scale[order], capacity)
    assert x is not None and shuffled is not None
    np.testing.assert_allclose(shuffled, x[order], atol=1e-6)


def test_infeasible_floors_have_no_answer() -> None:
    # Two single-GPU jobs on one GPU, each needing more than the whole GPU's rate.
    rates = np.array([[1.0], [1.0]])
    assert conic_interior_point(rates, np.array([0.6, 0.6]), np.ones(2), np.array([1.0])) is None


def test_gavel_bisection_moves_on_past_a_refused_answer() -> None:
    from shock.plugins.policies.min_total_duration import gavel_bisection

    # As in the by-hand bisection for T* = 20,000 (test_shockwave_baselines.py), but the
    # solver refuses every T below 21,000: the midpoints 500,050 ... 21,582.2265625 are
    # answered as before, 20,605.76171875 is refused and becomes the bottom, and
    # 1.05 x 20,605.76 = 21,636.05 >= 21,582.23 ends the search at the last T answered.
    end, point = gavel_bisection(lambda t: t if t >= 21_000 else None)
    assert end == pytest.approx(21_582.2265625)
    assert point == end


def test_gavel_bisection_gives_up_past_its_widest_range() -> None:
    from shock.plugins.policies.min_total_duration import gavel_bisection

    asked: list[float] = []

    def never(t: float) -> None:
        asked.append(t)

    assert gavel_bisection(never, widest=1e7) == (None, None)
    # Both decades [100, 1e6] and [1e6, 1e7] were searched before it gave up.
    assert min(asked) < 1e6 < max(asked) < 1e7


def test_shockwave_min_total_duration_matches_shockwaves_simulator() -> None:
    """Shockwave's canonical trace (120 jobs, TACC table, 32 GPUs): its simulator's
    min_total_duration gives makespan 24,205 s, average JCT 19,807 s, worst rho 7.741
    (benchmarks/shockwave_baselines.py). The analytic centre in place of ECOS's point gave the
    same makespan and JCT but worst rho 8.49: one short job starved of its last round."""
    metrics = shockwave_run("min_total_duration", "canonical")
    assert metrics.makespan_s == pytest.approx(24_205.0, rel=0.02)
    assert metrics.avg_jct_s == pytest.approx(19_807.0, rel=0.02)
    assert metrics.worst_ftf_rho == pytest.approx(7.741, rel=0.05)


def test_one_worker_type_solves_normal_systems_as_lapack_does_to_the_bit() -> None:
    """The 1 x 1 path (divisions) gives the bytes the batched LAPACK path gives, over
    scalings that span many orders of magnitude, with and without rate rows."""
    rng = np.random.default_rng(11)

    def spread(shape: tuple[int, ...] | int) -> np.ndarray:
        return rng.random(shape) * 10.0 ** rng.integers(-12, 12, shape)

    for trial in range(400):
        m = int(rng.integers(1, 120))
        rate = -spread((m, 1)) if trial % 2 else None
        rows = _Rows(-spread((m, 1)), spread((m, 1)), spread((m, 1)), rate)
        weights = spread(m + 1 + m + (0 if rate is None else m))
        rhs = rng.standard_normal((m, 1)) * 10.0 ** rng.integers(-8, 8, (m, 1))
        rhs[rng.random((m, 1)) < 0.2] = 0.0
        parts = rows.split(weights)
        with np.errstate(all="ignore"):
            general = rows._solve_normal_blocks(*parts, rhs)
            fast = rows._solve_normal_one_type(*parts, rhs)
        assert fast.tobytes() == general.tobytes(), trial


def test_one_worker_type_reports_a_zero_pivot_as_singular() -> None:
    rows = _Rows(np.array([[0.0], [-1.0]]), np.ones((2, 1)), np.zeros((2, 1)), None)
    weights, rhs = np.ones(5), np.ones((2, 1))
    with pytest.raises(np.linalg.LinAlgError):
        rows._solve_normal_blocks(*rows.split(weights), rhs)
    with pytest.raises(np.linalg.LinAlgError):
        rows.solve_normal(weights, rhs)
