"""Adaptation plugins against the rules recorded in the bundled adaptation_patterns.json."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.throughputs import load_throughputs
from shock.core.trace import read_trace
from shock.engine.epochs import datasets, epoch_profile, num_epochs, steps_per_epoch
from shock.engine.runner import bundled_trace_path
from shock.plugins.adaptation import gns as gns_module
from shock.plugins.adaptation.patterns import GnsRules, GnsSchedule, GnsSegment, gns_rules

WISR = load_throughputs(bundled_trace_path().parent.parent / "shockwave_wisr_throughputs.json")


def pattern(mode: str, job_type: str, epochs: int, scale_factor: int = 1) -> list[int]:
    model = default_registry().get("adaptation", mode)
    job = JobSpec(0, job_type, 1, scale_factor=scale_factor, mode=mode)
    sizes: list[int] = model.batch_sizes(job, epochs)
    return sizes


def test_static_keeps_the_initial_batch_size() -> None:
    assert pattern("static", "LM (batch size 20)", 5) == [20] * 5


def test_gns_last_epoch_reverts_when_it_falls_in_a_later_segment() -> None:
    # The data file's own example: LM bs 10, sf 1, 23 epochs.
    assert pattern("gns", "LM (batch size 10)", 23) == [10] * 11 + [20] * 10 + [40, 10]


def test_gns_first_segment_changes_the_last_epoch() -> None:
    # ResNet-18 bs 32 sf 1: constant up to 21 epochs; the first segment starts at 21.
    assert pattern("gns", "ResNet-18 (batch size 32)", 21) == [32] * 21
    assert pattern("gns", "ResNet-18 (batch size 32)", 22) == [32] * 21 + [64]
    sizes = pattern("gns", "ResNet-18 (batch size 32)", 80)
    assert sizes[:21] == [32] * 21 and sizes[21:31] == [64] * 10
    assert sizes[31:51] == [128] * 20 and sizes[51:79] == [256] * 28 and sizes[79] == 32


def test_gns_without_schedule_is_constant() -> None:
    assert pattern("gns", "ResNet-18 (batch size 32)", 100, scale_factor=8) == [32] * 100
    assert pattern("gns", "Transformer (batch size 32)", 100) == [32] * 100
    assert pattern("gns", "LM (batch size 80)", 100) == [80] * 100


def test_gns_never_exceeds_the_model_limit() -> None:
    for entry in datasets().dataset_of_model:
        for size in (5, 10, 16, 20, 32, 40, 64, 128, 512, 1024, 2048, 4096):
            sizes = pattern("gns", f"{entry} (batch size {size})", 800)
            limit = {"ResNet-18": 256, "ResNet-50": 128, "LM": 80, "Recommendation": 8192}
            assert max(sizes) <= max(limit.get(entry, size), size)


def test_gns_batch_size_at_is_the_patterns_entry() -> None:
    # Every bundled schedule (and sizes without one, above the limit included), at lengths
    # around each schedule's threshold and past it, every epoch.
    gns = default_registry().get("adaptation", "gns")
    for model, initial, scale_factor in [*gns_rules().schedules, ("LM", 160, 1), ("LM", 7, 8)]:
        job = JobSpec(0, f"{model} (batch size {initial})", 1, scale_factor=scale_factor)
        threshold = gns_rules().schedules.get((model, initial, scale_factor))
        low = threshold.min_num_epochs_exclusive if threshold else 5
        for length in (1, low, low + 1, low + 2, 95, 760, 1203):
            sizes = gns.batch_sizes(job, length)
            assert [gns.batch_size_at(job, length, e) for e in range(length)] == sizes


def test_gns_batch_size_at_follows_segments_counted_from_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Segments may start before 0 (Python indexes them from the end, one epoch at a time,
    # and then sparing "the last epoch" only by its own index): batch_size_at agrees.
    segments = (
        GnsSegment(2, 6, 2, True),
        GnsSegment(-3, None, 4, False),
        GnsSegment(-6, -4, 8, False),
        GnsSegment(-2, 3, 16, False),
    )
    rules = GnsRules({"LM": 1000}, {("LM", 10, 1): GnsSchedule(1, segments)})
    monkeypatch.setattr(gns_module, "gns_rules", lambda: rules)
    gns = gns_module.GnsAdaptation()
    job = JobSpec(0, "LM (batch size 10)", 1, mode="gns")
    for length in range(6, 14):
        sizes = gns.batch_sizes(job, length)
        assert [gns.batch_size_at(job, length, e) for e in range(length)] == sizes
    # Shorter than a segment reaches back: both fail alike.
    with pytest.raises(IndexError):
        gns.batch_sizes(job, 5)
    with pytest.raises(IndexError):
        gns.batch_size_at(job, 5, 0)


def test_accordion_warm_up_is_the_first_30_percent() -> None:
    # LM: critical [0, 10); n = 50 -> 10 e <= 150 -> epochs 0..15 stay at the initial size.
    assert pattern("accordion", "LM (batch size 20)", 50) == [20] * 16 + [80] * 34
    # n = 10: every epoch critical.
    assert pattern("accordion", "LM (batch size 20)", 10) == [20] * 10


def test_accordion_resnet50_regimes_stop_at_epoch_600() -> None:
    sizes = pattern("accordion", "ResNet-50 (batch size 32)", 1000)
    assert all(s == 32 for s in sizes[:301])  # warm-up: 10 e <= 3000
    assert sizes[320] == 128 and sizes[330] == 32 and sizes[339] == 32 and sizes[340] == 128
    assert sizes[570] == 32 and sizes[610] == 128 and sizes[630] == 128


def test_accordion_regimes_by_initial_batch_size() -> None:
    assert pattern("accordion", "ResNet-18 (batch size 256)", 100) == [256] * 100
    r18 = pattern("accordion", "ResNet-18 (batch size 64)", 400)
    assert r18[121] == 256 and r18[150] == 64 and r18[160] == 256 and r18[255] == 64
    rec = pattern("accordion", "Recommendation (batch size 2048)", 100)
    assert rec[30] == 2048 and rec[39] == 2048 and rec[40] == 8192
    assert rec[65] == 2048 and rec[75] == 8192 and rec[85] == 2048 and rec[95] == 8192
    rec4096 = pattern("accordion", "Recommendation (batch size 4096)", 20)
    assert rec4096 == [4096] * 10 + [8192] * 10  # critical [0, 10); 10 e <= 60 adds none


def test_accordion_non_adaptive_models_are_constant() -> None:
    assert pattern("accordion", "Transformer (batch size 16)", 50) == [16] * 50


def test_num_epochs_rule() -> None:
    job = JobSpec(0, "ResNet-18 (batch size 32)", total_steps=3127)
    per_epoch = math.ceil(50000 / 32)
    assert steps_per_epoch("ResNet-18", 32) == per_epoch == 1563
    assert num_epochs(job) == 3  # 3127 / 1563 = 2.0006 -> 3
    with pytest.raises(InputError, match="dataset size"):
        num_epochs(JobSpec(0, "Mystery (batch size 4)", 10, source_line=7), "t.trace")


def test_per_epoch_profile_follows_the_duration_rule() -> None:
    job = JobSpec(0, "LM (batch size 10)", total_steps=1, mode="gns")
    sizes = [10] * 11 + [20] * 10 + [40, 10]
    profile = epoch_profile(job, sizes, WISR, "v100")
    for size, duration in zip(profile.batch_sizes, profile.durations_s, strict=True):
        rate = WISR.throughput(f"LM (batch size {size})", 1, "v100")
        assert duration == pytest.approx(59675 / size / rate, rel=1e-12)
    assert profile.total_s == pytest.approx(sum(profile.durations_s))


def test_every_job_of_the_220_job_trace_has_a_pattern_and_throughputs() -> None:
    registry = default_registry()
    trace = read_trace(bundled_trace_path("shockwave_220_multigpu_dynamic.trace"), registry)
    changing = 0
    for job in trace.jobs:
        epochs = num_epochs(job)
        sizes = registry.get("adaptation", job.mode).batch_sizes(job, epochs)
        assert len(sizes) == epochs and sizes[0] == job.batch_size
        changing += len(set(sizes)) > 1
        profile = epoch_profile(job, sizes, WISR, "v100")
        assert all(d > 0 for d in profile.durations_s)
    assert changing > 100


def test_trace_profile_command_prints_each_jobs_schedule() -> None:
    path = bundled_trace_path("shockwave_220_multigpu_dynamic.trace")
    wisr = str(path.parent.parent / "shockwave_wisr_throughputs.json")
    result = CliRunner().invoke(
        app, ["trace", "profile", str(path), "--throughputs", wisr], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    # Job 3: LM bs 10, GNS, 20 epochs -> 11 at bs 10, then 9 at bs 20 (last epoch in the
    # first segment keeps it).
    line = next(row for row in result.output.splitlines() if "│   3 │" in row)
    assert "11×10, 9×20" in line and "gns" in line
