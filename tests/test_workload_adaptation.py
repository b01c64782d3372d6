"""Accordion and GNS batch-size requests on constructed gradient-norm sequences (no torch)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shock.job.adaptation import (
    AccordionPolicy,
    GnsPolicy,
    GradientSample,
    StaticPolicy,
    make_policy,
)


def _feed_accordion(policy: AccordionPolicy, norms: list[float], batch: int, done: int):
    wanted = None
    for norm in norms:
        done += batch
        wanted = policy.observe(GradientSample(batch, norm**2), done)
    return wanted, done


def test_accordion_keeps_the_small_batch_in_the_first_window_then_grows_when_stable():
    policy = AccordionPolicy(initial_batch_size=10, max_batch_size=80, window_samples=100)
    # First window (warm-up) is a critical regime: stay at the initial batch size.
    wanted, done = _feed_accordion(policy, [10.0] * 10, 10, 0)
    assert wanted == 10 and policy.critical
    # The norm changes by 10% < 50%: not critical, ask for the maximum.
    wanted, done = _feed_accordion(policy, [9.0] * 10, 10, done)
    assert wanted == 80 and not policy.critical


def test_accordion_returns_to_the_initial_batch_in_a_critical_regime():
    policy = AccordionPolicy(10, 80, window_samples=100)
    wanted, done = _feed_accordion(policy, [10.0] * 20, 10, 0)
    assert wanted == 80
    policy.batch_size_changed(done)
    # After the switch, the first window only sets a baseline, even though the larger
    # batch's norm is much smaller.
    wanted, done = _feed_accordion(policy, [3.0] * 2, 80, done)
    assert wanted == 80
    # Then a drop of 2/3 marks a critical regime.
    wanted, done = _feed_accordion(policy, [1.0] * 2, 80, done)
    assert wanted == 10 and policy.critical


def test_accordion_decides_only_at_window_ends():
    policy = AccordionPolicy(10, 80, window_samples=100)
    _feed_accordion(policy, [10.0] * 10, 10, 0)
    # A wild norm inside the next window does not decide anything before the window closes.
    wanted, _ = _feed_accordion(policy, [100.0] * 9, 10, 100)
    assert wanted == 10 and policy.critical


def test_accordion_state_round_trip_continues_identically():
    first = AccordionPolicy(10, 80, window_samples=100)
    _feed_accordion(first, [10.0] * 15, 10, 0)
    second = AccordionPolicy(10, 80, window_samples=100)
    second.load_state_dict(first.state_dict())
    a, _ = _feed_accordion(first, [9.5] * 5, 10, 150)
    b, _ = _feed_accordion(second, [9.5] * 5, 10, 150)
    assert a == b == 80
    assert first.state_dict() == second.state_dict()


def _expected_sq_norm(true_sq: float, trace: float, batch: int) -> float:
    # E|g_B|^2 = |G|^2 + tr(Sigma) / B (McCandlish et al., appendix A).
    return true_sq + trace / batch


def _gns_sample(true_sq: float, noise_scale: float, batch: int) -> GradientSample:
    trace = noise_scale * true_sq
    return GradientSample(
        batch,
        _expected_sq_norm(true_sq, trace, batch),
        batch // 2,
        _expected_sq_norm(true_sq, trace, batch // 2),
    )


@given(
    true_sq=st.floats(1e-3, 1e3),
    noise_scale=st.floats(1.0, 1e4),
    batch=st.integers(2, 4096),
)
def test_gns_recovers_the_noise_scale_from_exact_expectations(true_sq, noise_scale, batch):
    policy = GnsPolicy(batch_size_limit=10**6, window_samples=10**9)
    policy.observe(_gns_sample(true_sq, noise_scale, batch), batch)
    assert policy.noise_scale == pytest.approx(noise_scale, rel=1e-6)


def test_gns_asks_to_double_only_when_the_noise_scale_allows_and_at_window_end():
    policy = GnsPolicy(batch_size_limit=256, window_samples=320)
    done = 0
    answers = []
    for _ in range(10):
        done += 32
        answers.append(policy.observe(_gns_sample(1.0, 100.0, 32), done))
    assert answers[:-1] == [None] * 9  # no decision inside the window
    assert answers[-1] == 64  # B_noise 100 >= 2 x 32
    # At 64, doubling to 128 would exceed B_noise = 100: no request.
    for _ in range(5):
        done += 64
        wanted = policy.observe(_gns_sample(1.0, 100.0, 64), done)
    assert wanted is None


def test_gns_never_passes_the_limit():
    policy = GnsPolicy(batch_size_limit=128, window_samples=1)
    assert policy.observe(_gns_sample(1.0, 10_000.0, 64), 64) == 128
    assert policy.observe(_gns_sample(1.0, 10_000.0, 128), 192) is None


def test_gns_smooths_noisy_estimates():
    policy = GnsPolicy(batch_size_limit=10**6, window_samples=10**9, smoothing=0.9)
    for index in range(200):
        sample = _gns_sample(1.0, 50.0, 32)
        wobble = 1.0 + (0.2 if index % 2 else -0.2)  # +-20% measurement noise
        policy.observe(
            GradientSample(32, sample.sq_norm * wobble, 16, sample.small_sq_norm), index
        )
    assert policy.noise_scale is not None and math.isfinite(policy.noise_scale)
    single_noisy = GnsPolicy(batch_size_limit=10**6, window_samples=10**9, smoothing=0.9)
    sample = _gns_sample(1.0, 50.0, 32)
    single_noisy.observe(GradientSample(32, sample.sq_norm * 1.2, 16, sample.small_sq_norm), 0)
    # The smoothed estimate is much closer to the truth than one noisy measurement.
    assert abs(policy.noise_scale - 50.0) < abs((single_noisy.noise_scale or 0.0) - 50.0) / 3


def test_gns_requires_the_small_batch_measurement():
    with pytest.raises(ValueError, match="smaller part"):
        GnsPolicy(128, 10).observe(GradientSample(32, 1.0), 32)


def test_make_policy_follows_the_family_tables():
    assert isinstance(make_policy("static", 32, 256, 256, 100), StaticPolicy)
    assert isinstance(make_policy("accordion", 32, 256, 256, 100), AccordionPolicy)
    assert isinstance(make_policy("gns", 32, 256, 256, 100), GnsPolicy)
    # Transformer: Shockwave marks it non-adaptive for Accordion, but it has a GNS limit.
    assert isinstance(make_policy("accordion", 32, None, 128, 100), StaticPolicy)
    assert isinstance(make_policy("gns", 32, None, 128, 100), GnsPolicy)
    with pytest.raises(ValueError, match="unknown adaptation mode"):
        make_policy("bogus", 32, 256, 256, 100)
