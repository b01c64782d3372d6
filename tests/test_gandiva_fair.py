"""Gandiva-fair: weighted fair shares per entity, then trades that leave both sides better."""

from __future__ import annotations

import numpy as np
import pytest
from feasibility import check_feasible
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.plugins.policies.gandiva_fair import GandivaFair, trade, weighted_fair_shares

WORKER_TYPES = ("k80", "p100", "v100")


def make_input(
    capacity: list[float],
    throughputs: list[list[float]],
    entities: list[str],
    weights: dict[str, float] | None = None,
    scale_factors: list[int] | None = None,
) -> PolicyInput:
    jobs = tuple(
        PolicyJob(
            job_id=j,
            job_type="ResNet-18 (batch size 64)",
            scale_factor=1 if scale_factors is None else scale_factors[j],
            priority_weight=1.0,
            arrival_time=0.0,
            total_steps=100,
            steps_done=0.0,
            entity=entities[j],
        )
        for j in range(len(entities))
    )
    return PolicyInput(
        now=0.0,
        jobs=jobs,
        worker_types=WORKER_TYPES,
        capacity=np.array(capacity, float),
        throughputs=np.array(throughputs, float),
        entity_weights=weights,
    )


@st.composite
def inputs(draw: st.DrawFn) -> PolicyInput:
    m = draw(st.integers(1, 8))
    capacity = draw(st.lists(st.integers(0, 4), min_size=3, max_size=3).filter(any))
    rate = st.sampled_from([0.0, 0.5, 1.0, 3.0])
    throughputs = [[draw(rate) for _ in range(3)] for _ in range(m)]
    entities = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=m, max_size=m))
    scale = draw(st.lists(st.sampled_from([1, 2]), min_size=m, max_size=m))
    weights = {"a": draw(st.sampled_from([1.0, 2.0])), "b": 1.0}
    return make_input(capacity, throughputs, entities, weights, scale)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=inputs())
def test_gandiva_fair_is_feasible(p: PolicyInput) -> None:
    check_feasible(p, GandivaFair().allocate(p, SolverSpec()))


def test_fair_shares_follow_weights_and_are_capped_by_demand() -> None:
    shares = weighted_fair_shares(np.array([1.0, 2.0, 1.0]), np.array([100.0, 100.0, 1.0]), 9.0)
    # c needs 1; the other 8 split 1:2.
    np.testing.assert_allclose(shares, [8 / 3, 16 / 3, 1.0])
    np.testing.assert_allclose(
        weighted_fair_shares(np.ones(2), np.array([1.0, 1.0]), 8.0), [1.0, 1.0]
    )


def test_entities_get_gpus_in_proportion_to_their_weights() -> None:
    # One type, so no trading: 6 GPUs, a (weight 2) and b (weight 1), four jobs each.
    p = make_input([0, 0, 6], [[1.0, 1.0, 1.0]] * 8, ["a"] * 4 + ["b"] * 4, {"a": 2.0})
    x = GandivaFair().allocate(p, SolverSpec()).fractions
    assert x[:4].sum() == pytest.approx(4.0) and x[4:].sum() == pytest.approx(2.0)
    np.testing.assert_allclose(x[:4, 2], 1.0)  # equal within an entity


def test_trading_moves_fast_gpus_to_the_entity_that_gains_most_and_helps_both() -> None:
    # a's jobs are 4x faster on V100 than on K80, b's 1.25x; 4 V100s, 4 K80s, equal weights,
    # eight jobs each (contended: each entity could use all eight GPUs).
    t = [[1.0, 0.0, 4.0]] * 8 + [[1.0, 0.0, 1.25]] * 8
    p = make_input([4, 0, 4], t, ["a"] * 8 + ["b"] * 8)
    x = GandivaFair().allocate(p, SolverSpec()).fractions
    v100_a, v100_b = x[:8, 2].sum(), x[8:, 2].sum()
    assert v100_a > 2.0 > v100_b  # a holds more than its fair half of the V100s
    throughput = (np.array(t) * x).sum(axis=1)
    fair_a, fair_b = 2 * 1.0 + 2 * 4.0, 2 * 1.0 + 2 * 1.25
    assert throughput[:8].sum() > fair_a and throughput[8:].sum() > fair_b
    assert np.all(p.scale_factors @ x <= p.capacity + 1e-9)


def test_a_trade_keeps_each_types_total_and_stops_when_no_one_gains() -> None:
    holdings = np.array([[2.0, 2.0], [2.0, 2.0]])  # columns: slow, fast
    trade(holdings, np.array([10.0, 10.0]), np.array([3.0, 1.0]), fast=1, slow=0)
    np.testing.assert_allclose(holdings.sum(axis=0), [4.0, 4.0])
    # Price 2: entity 0 pays its 2 slow GPUs for 1 fast one.
    np.testing.assert_allclose(holdings, [[0.0, 3.0], [4.0, 1.0]])
    same = np.array([[2.0, 2.0], [2.0, 2.0]])
    trade(same, np.array([10.0, 10.0]), np.array([2.0, 2.0]), fast=1, slow=0)
    np.testing.assert_allclose(same, 2.0)


def test_a_seller_takes_no_more_gpus_than_it_can_use() -> None:
    holdings = np.array([[2.0, 2.0], [2.0, 2.0]])
    trade(holdings, np.array([10.0, 4.5]), np.array([3.0, 1.0]), fast=1, slow=0)
    assert holdings[1].sum() == pytest.approx(4.5)
    np.testing.assert_allclose(holdings.sum(axis=0), [4.0, 4.0])
