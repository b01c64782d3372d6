"""The EWMA of measured throughputs and its write-back into a throughput table."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shock.core.measured_throughputs import MeasuredThroughputs
from shock.core.throughputs import ThroughputTable, throughputs_from_dict, throughputs_to_dict

JOB = "ResNet-18 (batch size 32)"


def test_first_report_is_the_estimate_then_it_is_smoothed():
    measured = MeasuredThroughputs(smoothing=0.25)
    assert measured.observe(JOB, "v100", 40.0) == 40.0
    assert measured.observe(JOB, "v100", 20.0) == pytest.approx(0.25 * 20 + 0.75 * 40)
    estimate = measured.estimate(JOB, "v100")
    assert estimate is not None and estimate.reports == 2
    assert measured.estimate(JOB, "k80") is None
    assert measured.estimate(JOB, "v100", scale_factor=2) is None


@given(st.lists(st.floats(0.1, 1e4), min_size=1, max_size=50), st.floats(0.01, 1.0))
def test_estimate_stays_within_the_reported_range(reports, smoothing):
    measured = MeasuredThroughputs(smoothing)
    for value in reports:
        measured.observe(JOB, "v100", value)
    estimate = measured.estimate(JOB, "v100")
    assert estimate is not None
    assert min(reports) * (1 - 1e-9) <= estimate.steps_per_s <= max(reports) * (1 + 1e-9)


def test_converges_to_a_new_steady_throughput():
    measured = MeasuredThroughputs(smoothing=0.3)
    measured.observe(JOB, "v100", 100.0)
    for _ in range(30):
        measured.observe(JOB, "v100", 50.0)
    estimate = measured.estimate(JOB, "v100")
    assert estimate is not None and estimate.steps_per_s == pytest.approx(50.0, rel=1e-3)


def test_apply_to_overwrites_isolated_entries_and_keeps_the_rest():
    table = throughputs_from_dict({"v100": {f"('{JOB}', 1)": {"null": 99.0}}, "k80": {}})
    measured = MeasuredThroughputs()
    measured.observe(JOB, "v100", 30.0)
    measured.observe("LM (batch size 20)", "k80", 5.0)
    measured.observe("LM (batch size 20)", "k80", 7.0)
    assert measured.apply_to(table, min_reports=2) == 1
    assert table.throughput(JOB, 1, "v100") == 99.0  # one report: not trusted yet
    assert table.throughput("LM (batch size 20)", 1, "k80") == pytest.approx(5.6)
    as_dict = throughputs_to_dict(measured.to_table())
    assert as_dict["v100"][f"('{JOB}', 1)"] == {"null": 30.0}


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_rejects_reports_that_are_not_throughputs(bad):
    with pytest.raises(ValueError, match="finite and > 0"):
        MeasuredThroughputs().observe(JOB, "v100", bad)


@pytest.mark.parametrize("smoothing", [0.0, 1.5, -0.1])
def test_rejects_bad_smoothing(smoothing):
    with pytest.raises(ValueError, match="smoothing"):
        MeasuredThroughputs(smoothing)


def test_to_table_is_a_throughput_table():
    assert isinstance(MeasuredThroughputs().to_table(), ThroughputTable)
