"""Throughput estimates: the prior until a job reports, then the EWMA of its reports, and the
tables made from them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shock.core.throughputs import throughputs_from_dict, throughputs_to_dict
from shock.engine.measured_throughputs import ThroughputEstimates

JOB = "ResNet-18 (batch size 32)"
LM = "LM (batch size 32)"


def test_the_prior_until_the_first_report_replaces_it_then_smoothed() -> None:
    prior = throughputs_from_dict({"v100": {f"('{LM}', 1)": {"null": 50.0}}})
    estimates = ThroughputEstimates(prior=prior, smoothing=0.5, default_steps_per_s=2.0)
    assert estimates.estimate(LM, 1, "v100") == 50.0
    assert estimates.estimate("Unknown (batch size 1)", 1, "v100") == 2.0  # not in the prior
    assert estimates.estimate(LM, 1, "k80") == 2.0
    assert estimates.reports(LM, 1, "v100") == 0
    assert estimates.observe(LM, 1, "v100", 10.0) == 10.0  # replaces the prior
    assert estimates.observe(LM, 1, "v100", 20.0) == 15.0  # smoothed
    assert estimates.estimate(LM, 1, "v100") == 15.0
    assert estimates.reports(LM, 1, "v100") == 2


def test_keys_are_job_type_scale_factor_and_worker_type() -> None:
    estimates = ThroughputEstimates(smoothing=0.25)
    assert estimates.observe(JOB, 1, "v100", 40.0) == 40.0
    assert estimates.observe(JOB, 1, "v100", 20.0) == pytest.approx(0.25 * 20 + 0.75 * 40)
    assert estimates.reports(JOB, 1, "k80") == 0
    assert estimates.reports(JOB, 2, "v100") == 0
    assert estimates.estimate(JOB, 2, "v100") == estimates.default_steps_per_s  # no prior


@given(st.lists(st.floats(0.1, 1e4), min_size=1, max_size=50), st.floats(0.01, 1.0))
def test_estimate_stays_within_the_reported_range(reports: list[float], smoothing: float) -> None:
    estimates = ThroughputEstimates(smoothing=smoothing)
    for value in reports:
        estimates.observe(JOB, 1, "v100", value)
    estimate = estimates.estimate(JOB, 1, "v100")
    assert min(reports) * (1 - 1e-9) <= estimate <= max(reports) * (1 + 1e-9)


def test_converges_to_a_new_steady_throughput() -> None:
    estimates = ThroughputEstimates(smoothing=0.3)
    estimates.observe(JOB, 1, "v100", 100.0)
    for _ in range(30):
        estimates.observe(JOB, 1, "v100", 50.0)
    assert estimates.estimate(JOB, 1, "v100") == pytest.approx(50.0, rel=1e-3)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_report_that_is_no_throughput_is_left_out(bad: float) -> None:
    estimates = ThroughputEstimates()
    assert estimates.observe(JOB, 1, "v100", bad) == estimates.default_steps_per_s
    assert estimates.reports(JOB, 1, "v100") == 0
    estimates.observe(JOB, 1, "v100", 30.0)
    assert estimates.observe(JOB, 1, "v100", bad) == 30.0
    assert estimates.reports(JOB, 1, "v100") == 1


@pytest.mark.parametrize("smoothing", [0.0, 1.5, -0.1, math.nan])
def test_rejects_bad_smoothing(smoothing: float) -> None:
    with pytest.raises(ValueError, match="smoothing"):
        ThroughputEstimates(smoothing=smoothing)


@pytest.mark.parametrize("default", [0.0, -1.0, math.inf])
def test_rejects_a_default_that_is_no_throughput(default: float) -> None:
    with pytest.raises(ValueError, match="default_steps_per_s"):
        ThroughputEstimates(default_steps_per_s=default)


def test_table_holds_every_job_on_every_worker_type() -> None:
    prior = throughputs_from_dict({"v100": {f"('{LM}', 1)": {"null": 50.0}}})
    estimates = ThroughputEstimates(prior=prior, default_steps_per_s=3.0)
    estimates.observe(JOB, 1, "k80", 7.0)
    table = estimates.table([(JOB, 1), (LM, 1)], ("k80", "v100"))
    assert table.isolated == {
        (JOB, 1): {"k80": 7.0, "v100": 3.0},
        (LM, 1): {"k80": 3.0, "v100": 50.0},
    }


def test_measured_table_and_apply_to_hold_only_what_was_measured() -> None:
    prior = throughputs_from_dict({"v100": {f"('{JOB}', 1)": {"null": 99.0}}, "k80": {}})
    estimates = ThroughputEstimates(prior=prior)
    estimates.observe(JOB, 1, "v100", 30.0)
    estimates.observe(LM, 1, "k80", 5.0)
    estimates.observe(LM, 1, "k80", 7.0)
    as_dict = throughputs_to_dict(estimates.measured_table())
    assert as_dict == {
        "k80": {f"('{LM}', 1)": {"null": pytest.approx(5.6)}},
        "v100": {f"('{JOB}', 1)": {"null": 30.0}},
    }
    trusted = estimates.measured_table(min_reports=2).isolated
    assert trusted == {(LM, 1): {"k80": pytest.approx(5.6)}}
    # Written back into a table: entries with enough reports overwrite, the rest stay.
    assert estimates.apply_to(prior, min_reports=2) == 1
    assert prior.throughput(JOB, 1, "v100") == 99.0  # one report: not trusted yet
    assert prior.throughput(LM, 1, "k80") == pytest.approx(5.6)
