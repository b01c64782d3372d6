"""Shockwave-style dynamic trace generator and its command."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from shock_cli import run_shock

from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs, load_throughputs
from shock.core.trace import read_trace, write_trace
from shock.engine.runner import bundled_trace_path
from shock.traces.shockwave_generator import (
    DynamicWorkloadConfig,
    duration_values_h,
    generate_dynamic_jobs,
)


def generate(**fields: object) -> list:
    config = DynamicWorkloadConfig(**{"num_jobs": 2000, **fields})  # type: ignore[arg-type]
    return generate_dynamic_jobs(config, default_throughputs())


def test_mixes_arrivals_and_durations() -> None:
    jobs = generate(seed=3, mean_interarrival_s=45.0)
    distributed = [j for j in jobs if j.model_family != "Recommendation"]
    scale = Counter(j.scale_factor for j in distributed)
    # Only distributed templates draw a scale factor; Recommendation always runs on one GPU.
    for size, share in zip((1, 2, 4, 8), (0.6, 0.3, 0.09, 0.01), strict=True):
        assert scale[size] / len(distributed) == pytest.approx(share, abs=0.03)
    assert all(j.scale_factor == 1 for j in jobs if j.model_family == "Recommendation")
    modes = Counter(j.mode for j in jobs)
    # Static jobs are exactly the Accordion draws shorter than 1000 s.
    assert modes["static"] == sum(1 for j in jobs if j.mode == "static" and j.duration < 1000)
    assert abs(modes["accordion"] + modes["static"] - modes["gns"]) < 150
    gaps = [b.arrival_time - a.arrival_time for a, b in pairwise(jobs)]
    assert jobs[0].arrival_time == 0
    assert sum(gaps) / len(gaps) == pytest.approx(45.0, rel=0.1)
    assert all(720 <= j.duration <= 18000 for j in jobs)
    # Shockwave's duration classes: 72% among the shortest 20% of the 100 values.
    short = sum(1 for j in jobs if j.duration <= 720 + 19 * (18000 - 720) / 99 + 1)
    assert short / len(jobs) == pytest.approx(0.72, abs=0.03)
    for job in jobs:
        rate = default_throughputs().throughput(job.job_type, job.scale_factor, "v100")
        assert job.total_steps == pytest.approx(job.duration * rate, rel=0.01, abs=2)


def test_reproduces_shockwaves_own_220_job_trace(tmp_path: Path) -> None:
    # Shockwave's file name 220_0.2_5_100_25_4_0,0.5,0.5_0.6,0.3,0.09,0.01: 220 jobs, 0.2-5 h,
    # 100 durations, a 25 s mean gap, seed 4, mode and scale-factor mixes.
    registry = default_registry()
    bundled = read_trace(bundled_trace_path("shockwave_220_multigpu_dynamic.trace"), registry)
    table = load_throughputs(bundled_trace_path().parent.parent / "shockwave_wisr_throughputs.json")
    config = DynamicWorkloadConfig(num_jobs=220, mean_interarrival_s=25.0, seed=4)
    generated = generate_dynamic_jobs(config, table)
    fields = (
        "job_type", "command", "scale_factor", "mode", "duration", "total_steps", "arrival_time"
    )
    assert [tuple(getattr(j, f) for f in fields) for j in generated] == [
        tuple(getattr(j, f) for f in fields) for j in bundled.jobs
    ]
    out = tmp_path / "220.trace"
    write_trace(generated, out, registry, "shockwave")
    bundled_bytes = bundled_trace_path("shockwave_220_multigpu_dynamic.trace").read_bytes()
    assert out.read_bytes() == bundled_bytes


def test_log_spaced_durations_follow_powers_of_one_and_a_half() -> None:
    values = duration_values_h(
        DynamicWorkloadConfig(1, min_duration_s=3600, max_duration_s=36000, num_durations=5,
                              duration_spacing="log")
    )
    assert values[0] == 1.0 and values[-1] == 10.0
    assert list(values) == sorted(values)
    gaps = np.diff(values[1:])
    assert gaps[1] / gaps[0] == pytest.approx(1.5 ** (4 / 3), rel=1e-2)


def test_same_seed_same_trace_and_it_round_trips(tmp_path: Path) -> None:
    jobs = generate(num_jobs=30, seed=7, mode_mix=(0.2, 0.4, 0.4))
    assert jobs == generate(num_jobs=30, seed=7, mode_mix=(0.2, 0.4, 0.4))
    path = tmp_path / "dynamic.trace"
    write_trace(jobs, path, default_registry(), "shockwave")
    back = read_trace(path, default_registry())
    assert back.format == "shockwave"
    assert [(j.job_type, j.mode, j.total_steps, j.scale_factor) for j in back.jobs] == [
        (j.job_type, j.mode, j.total_steps, j.scale_factor) for j in jobs
    ]


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="mix"):
        DynamicWorkloadConfig(10, mode_mix=(0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="durations"):
        DynamicWorkloadConfig(10, min_duration_s=100, max_duration_s=50)
    with pytest.raises(ValueError, match="spacing"):
        DynamicWorkloadConfig(10, duration_spacing="cubic")  # type: ignore[arg-type]


def test_generate_dynamic_command(tmp_path: Path) -> None:
    out = tmp_path / "t.trace"
    done = run_shock("trace", "generate-dynamic", str(out), "--jobs", "12", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 12
    by_rate = tmp_path / "r.trace"
    done = run_shock(
        "trace", "generate-dynamic", str(by_rate), "--jobs", "5", "--rate", "0", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert all(line.split("\t")[-1] == "0" for line in by_rate.read_text().splitlines())
    bad = run_shock(
        "trace", "generate-dynamic", str(out), "--mode-mix", "1,2", cwd=tmp_path
    )
    assert bad.returncode != 0 and "--mode-mix" in bad.stderr + bad.stdout
