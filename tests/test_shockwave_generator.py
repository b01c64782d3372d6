"""Shockwave-style dynamic trace generator and its command."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from shock_cli import run_shock

from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs
from shock.core.trace import read_trace, write_trace
from shock.traces.shockwave_generator import DynamicWorkloadConfig, generate_dynamic_jobs


def generate(**fields: object) -> list:
    config = DynamicWorkloadConfig(**{"num_jobs": 2000, **fields})  # type: ignore[arg-type]
    return generate_dynamic_jobs(config, default_throughputs())


def test_mixes_arrivals_and_durations() -> None:
    jobs = generate(seed=3)
    scale = Counter(j.scale_factor for j in jobs)
    for size, share in zip((1, 2, 4, 8), (0.6, 0.3, 0.09, 0.01), strict=True):
        assert scale[size] / len(jobs) == pytest.approx(share, abs=0.03)
    modes = Counter(j.mode for j in jobs)
    assert modes["static"] == 0 and abs(modes["accordion"] - modes["gns"]) < 150
    gaps = [b.arrival_time - a.arrival_time for a, b in pairwise(jobs)]
    assert sum(gaps) / len(gaps) == pytest.approx(3600 / 80, rel=0.1)
    assert all(720 <= j.duration <= 18000 for j in jobs)
    for job in jobs:
        rate = default_throughputs().throughput(job.job_type, job.scale_factor, "v100")
        assert job.total_steps == pytest.approx(job.duration * rate, rel=0.01, abs=2)
        assert job.scale_factor == 1 or job.model_family != "Recommendation"


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


def test_generate_dynamic_command(tmp_path: Path) -> None:
    out = tmp_path / "t.trace"
    done = run_shock("trace", "generate-dynamic", str(out), "--jobs", "12", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 12
    bad = run_shock(
        "trace", "generate-dynamic", str(out), "--mode-mix", "1,2", cwd=tmp_path
    )
    assert bad.returncode != 0 and "--mode-mix" in bad.stderr + bad.stdout
