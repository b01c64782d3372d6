"""Gavel's workload model: determinism, distributions, templates, `shock trace generate`."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.plugins import default_registry
from shock.core.throughputs import ThroughputTable, default_throughputs
from shock.core.trace import read_trace
from shock.traces.generator import WorkloadConfig, generate_jobs
from shock.traces.templates import gavel_templates

TRACES_DIR = Path(str(resources.files("shock.data").joinpath("traces")))
DISTRIBUTED_FAMILIES = {"ResNet-18", "ResNet-50", "Transformer", "LM"}
N = 3000
RATE = 6.0  # jobs per hour
SHORT_MIN_S = 60 * 10**1.5
LONG_MIN_S = 60 * 10**3
LONG_MAX_S = 60 * 10**4


def _generate(**kwargs: object) -> list:
    return generate_jobs(WorkloadConfig(**kwargs), default_throughputs())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def multi() -> list:
    return _generate(num_jobs=N, jobs_per_hour=RATE, seed=1, multi_gpu=True, multi_priority=True)


@pytest.fixture(scope="module")
def single() -> list:
    return _generate(num_jobs=N, jobs_per_hour=RATE, seed=1)


def _v100_seconds(job) -> float:
    return job.total_steps / default_throughputs().throughput(
        job.job_type, job.scale_factor, "v100"
    )


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_jobs() -> None:
    kwargs = {"num_jobs": 200, "jobs_per_hour": RATE, "multi_gpu": True, "multi_priority": True}
    assert _generate(seed=42, **kwargs) == _generate(seed=42, **kwargs)


def test_different_seeds_differ() -> None:
    first = _generate(num_jobs=50, jobs_per_hour=RATE, seed=0)
    second = _generate(num_jobs=50, jobs_per_hour=RATE, seed=1)
    assert [j.job_type for j in first] != [j.job_type for j in second]
    assert [j.total_steps for j in first] != [j.total_steps for j in second]
    assert [j.arrival_time for j in first][1:] != [j.arrival_time for j in second][1:]


def test_prefix_is_stable() -> None:
    # Each job draws from the same stream in order, so fewer jobs give a prefix.
    assert (
        _generate(num_jobs=20, seed=3, jobs_per_hour=RATE)
        == _generate(num_jobs=40, seed=3, jobs_per_hour=RATE)[:20]
    )


def test_job_ids_and_defaults(single: list) -> None:
    assert [j.job_id for j in single] == list(range(N))
    assert all(j.slo is None and j.mode == "static" for j in single)
    assert all(j.total_steps >= 1 for j in single)
    assert {j.priority_weight for j in single} == {1.0}


def test_zero_jobs_and_negative() -> None:
    assert _generate(num_jobs=0) == []
    with pytest.raises(ValueError):
        _generate(num_jobs=-1)


# --------------------------------------------------------------------------- distributions


def test_scale_factor_mix(multi: list) -> None:
    counts = Counter(j.scale_factor for j in multi)
    assert set(counts) == {1, 2, 4, 8}
    for sf, share in {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}.items():
        assert counts[sf] / N == pytest.approx(share, abs=0.03), sf


def test_single_gpu_without_multi_gpu(single: list) -> None:
    assert {j.scale_factor for j in single} == {1}
    # Non-distributed families appear once scale factors are all 1.
    assert {j.model_family for j in single} > DISTRIBUTED_FAMILIES


def test_multi_gpu_jobs_only_distributed_families(multi: list) -> None:
    families = {j.model_family for j in multi if j.scale_factor > 1}
    assert families == DISTRIBUTED_FAMILIES
    assert {j.model_family for j in multi if j.scale_factor == 1} > DISTRIBUTED_FAMILIES


def test_mean_inter_arrival(single: list, multi: list) -> None:
    for jobs in (single, multi):
        assert jobs[0].arrival_time == 0.0
        arrivals = [j.arrival_time for j in jobs]
        assert arrivals == sorted(arrivals)
        mean_gap = (arrivals[-1] - arrivals[0]) / (len(arrivals) - 1)
        assert mean_gap == pytest.approx(3600 / RATE, rel=0.10)


def test_no_rate_means_all_arrive_at_zero() -> None:
    for rate in (None, 0.0):
        jobs = _generate(num_jobs=20, jobs_per_hour=rate, seed=5)
        assert {j.arrival_time for j in jobs} == {0.0}


def test_durations(multi: list) -> None:
    durations = [_v100_seconds(j) for j in multi]
    # total_steps is truncated to an integer, so a job may run a fraction of a step less.
    assert min(durations) >= SHORT_MIN_S * 0.999
    assert max(durations) <= LONG_MAX_S
    long_share = sum(d > LONG_MIN_S for d in durations) / N
    assert long_share == pytest.approx(0.20, abs=0.03)
    # Log-uniform: the short jobs spread over [10^1.5, 10^3] minutes, long over [10^3, 10^4].
    assert min(durations) < 2 * SHORT_MIN_S
    assert max(durations) > 0.9 * LONG_MAX_S


def test_fixed_duration() -> None:
    jobs = _generate(num_jobs=100, seed=2, multi_gpu=True, fixed_duration_s=3600.0)
    for job in jobs:
        rate = default_throughputs().throughput(job.job_type, job.scale_factor, "v100")
        assert job.total_steps == int(3600.0 * rate)


def test_priorities(multi: list) -> None:
    weights = Counter(j.priority_weight for j in multi)
    assert set(weights) == {1.0, 5.0}
    assert weights[5.0] / N == pytest.approx(0.20, abs=0.03)


def test_missing_throughput_is_an_error() -> None:
    with pytest.raises(ValueError, match="no v100 throughput"):
        generate_jobs(WorkloadConfig(num_jobs=5), ThroughputTable())


# --------------------------------------------------------------------------- templates


def test_templates() -> None:
    templates = gavel_templates()
    assert len(templates) == 26
    assert len({t.job_type for t in templates}) == 26
    assert {t.model_family for t in templates if t.distributed} == DISTRIBUTED_FAMILIES
    table = default_throughputs()
    for template in templates:
        for sf in template.allowed_scale_factors:
            assert table.has(template.job_type, sf), (template.job_type, sf)


def test_generated_jobs_use_template_columns(multi: list) -> None:
    by_type = {t.job_type: t for t in gavel_templates()}
    assert {j.job_type for j in multi} == set(by_type)
    for job in multi:
        template = by_type[job.job_type]
        assert job.command == template.command()
        assert job.working_directory == template.working_directory
        assert job.num_steps_arg == template.num_steps_arg
        assert job.needs_data_dir == template.needs_data_dir


def _columns(job) -> tuple[str, str, str, bool]:
    return (job.command, job.working_directory, job.num_steps_arg, job.needs_data_dir)


def _template_columns(job_type: str) -> tuple[str, str, str, bool]:
    template = {t.job_type: t for t in gavel_templates()}[job_type]
    return (
        template.command(),
        template.working_directory,
        template.num_steps_arg,
        template.needs_data_dir,
    )


GAVEL_TRACES = sorted(
    p.name for p in TRACES_DIR.glob("*.trace") if not p.name.startswith("shockwave")
)


@pytest.mark.parametrize("name", GAVEL_TRACES)
def test_template_commands_equal_bundled_gavel_traces(name: str) -> None:
    jobs = read_trace(TRACES_DIR / name, default_registry()).jobs
    checked = 0
    for job in jobs:
        if name == "artifact_evaluation.trace" and job.model_family == "ResNet-50":
            # This trace was written with ResNet-50 on 2 loader workers ("-j 2").
            assert job.command == _template_columns(job.job_type)[0].replace("-j 8", "-j 2")
            continue
        assert _columns(job) == _template_columns(job.job_type), job.source_line
        checked += 1
    assert checked > 0


def test_template_commands_match_shockwave_trace_up_to_documented_differences() -> None:
    jobs = read_trace(TRACES_DIR / "shockwave_220_multigpu_dynamic.trace", default_registry()).jobs
    for job in jobs:
        command, workdir, steps_arg, needs_data = _template_columns(job.job_type)
        # Shockwave's job table: ResNet-50 with "-j 4", LM with python3.
        if job.model_family == "ResNet-50":
            command = command.replace("-j 8", "-j 4")
        if job.model_family == "LM":
            command = command.replace("python ", "python3 ", 1)
        assert _columns(job) == (command, workdir, steps_arg, needs_data), job.source_line


# --------------------------------------------------------------------------- CLI


def test_cli_generate_writes_readable_trace(tmp_path: Path) -> None:
    out = tmp_path / "gen.trace"
    args = ["trace", "generate", str(out), "--jobs", "50", "--rate", "4", "--seed", "9"]
    result = CliRunner().invoke(app, [*args, "--multi-gpu", "--multi-priority"])
    assert result.exit_code == 0, result.output
    assert "wrote 50 jobs" in result.output
    trace = read_trace(out, default_registry())
    assert trace.format == "gavel"
    expected = _generate(
        num_jobs=50, jobs_per_hour=4.0, seed=9, multi_gpu=True, multi_priority=True
    )
    # The Gavel format has no duration column.
    assert [dataclasses.replace(j, source_line=None) for j in trace.jobs] == [
        dataclasses.replace(j, duration=None) for j in expected
    ]


def test_cli_generate_shockwave_format(tmp_path: Path) -> None:
    out = tmp_path / "gen.trace"
    result = CliRunner().invoke(
        app, ["trace", "generate", str(out), "--jobs", "10", "--format", "shockwave"]
    )
    assert result.exit_code == 0, result.output
    trace = read_trace(out, default_registry())
    assert trace.format == "shockwave"
    assert len(trace.jobs) == 10
    assert {j.arrival_time for j in trace.jobs} == {0.0}


def test_cli_generate_shockwave_has_durations(tmp_path: Path) -> None:
    out = tmp_path / "gen.trace"
    result = CliRunner().invoke(
        app, ["trace", "generate", str(out), "--jobs", "10", "--format", "shockwave"]
    )
    assert result.exit_code == 0, result.output
    for job in read_trace(out, default_registry()).jobs:
        assert job.duration == pytest.approx(_v100_seconds(job), rel=0.01)


@pytest.mark.parametrize("option", ["--jobs", "--rate"])
def test_cli_generate_rejects_negative(option: str, tmp_path: Path) -> None:
    out = tmp_path / "gen.trace"
    result = CliRunner().invoke(app, ["trace", "generate", str(out), option, "-1"])
    assert result.exit_code == 2
    assert not out.exists()


def test_cli_generate_into_missing_directory_reports_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    result = subprocess.run(
        [sys.executable, "-m", "shock", "trace", "generate", "nodir/x.trace", "--jobs", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    assert "error:" in result.stderr
