"""Synergy's own recorded traces (no header) and shock's Synergy CSV's optional columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from shock_cli import run_shock

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.trace import read_trace, write_trace
from shock.engine.runner import RunOptions, run
from shock.resources.profiles import synergy_profiles

HEADER = "job_id,model_name,arrival_time_s,total_iterations,gpu_demand"


def record_line(job_id: int, model: str, arrival: float, iterations: int, gpus: int) -> str:
    """A job line as Synergy's simulator records it: its five values joined by commas with
    Python's str(), no header (runner.py `record_job`)."""
    return f"{job_id},{model},{arrival},{iterations},{gpus}\n"


def synergy_record(path: Path) -> Path:
    # Arrivals as Synergy writes them: whole seconds from its Poisson draws (ints), or floats
    # from a Philly trace's timestamps.
    path.write_text(
        record_line(0, "res18", 0, 1200, 1)
        + record_line(1, "gnmt", 361, 800, 2)
        + record_line(2, "deepspeech", 1234.5, 300, 4)
        + record_line(3, "shufflenet", 3600.0, 2000, 1)
    )
    return path


def test_a_recorded_trace_is_detected_and_runs(tmp_path: Path) -> None:
    path = synergy_record(tmp_path / "recorded")
    trace = read_trace(path, default_registry())
    assert trace.format == "synergy-record"
    assert [(j.job_id, j.job_type, j.arrival_time, j.total_steps, j.scale_factor)
            for j in trace.jobs] == [
        (0, "res18", 0.0, 1200, 1),
        (1, "gnmt", 361.0, 800, 2),
        (2, "deepspeech", 1234.5, 300, 4),
        (3, "shufflenet", 3600.0, 2000, 1),
    ]
    result = run(RunOptions(policy="fifo", trace=str(path)))
    assert result.unfinished_jobs == 0
    assert len(result.records) == 4
    # Synergy's own throughputs and cluster are the defaults, as for the header form.
    assert result.cluster.startswith("synergy-128")


def test_round_trip_between_the_two_forms(tmp_path: Path) -> None:
    recorded = synergy_record(tmp_path / "recorded")
    with_header = tmp_path / "t.csv"
    again = tmp_path / "again"
    done = run_shock("trace", "convert", str(recorded), str(with_header), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert with_header.read_text().splitlines()[0] == HEADER
    done = run_shock(
        "trace", "convert", str(with_header), str(again), "--to", "synergy-record", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    registry = default_registry()
    assert _values(read_trace(again, registry)) == _values(read_trace(recorded, registry))
    # What shock writes, Synergy's replay reads: int(id), float(arrival), int(iterations),
    # int(GPUs) of each line split at commas.
    for line in again.read_text().splitlines():
        job_id, model, arrival, iterations, gpus = line.split(",")
        int(job_id), float(arrival), int(iterations), int(gpus)
        assert model in synergy_profiles()
    # From shock's own record form on, the round trip keeps the bytes.
    done = run_shock("trace", "convert", str(again), str(with_header), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    third = tmp_path / "third"
    done = run_shock(
        "trace", "convert", str(with_header), str(third), "--to", "synergy-record", cwd=tmp_path
    )
    assert third.read_bytes() == again.read_bytes()


def _values(trace: object) -> list[tuple[object, ...]]:
    return [
        (j.job_id, j.job_type, j.arrival_time, j.total_steps, j.scale_factor)
        for j in trace.jobs  # type: ignore[attr-defined]
    ]


def test_the_record_form_holds_synergys_models_only(tmp_path: Path) -> None:
    jobs = [JobSpec(0, "ResNet-18 (batch size 32)", 100)]
    with pytest.raises(InputError, match="Synergy's models only") as caught:
        write_trace(jobs, tmp_path / "x", default_registry(), "synergy-record")
    assert caught.value.field == "model_name"


@pytest.mark.parametrize(
    ("body", "line", "field", "words"),
    [
        ("0,res18,0,100,1\n1,gnmt,5,many,1\n", 2, "total_iterations", "integer"),
        ("0,res18,0,100,1\n\n1,gnmt,later,100,1\n", 3, "arrival_time_s", "number"),
        ("0,res18,0,100,1\n1,gnmt,5,100\n", 2, "gpu_demand", "5 comma-separated"),
        ("0,res18,0,100,1\n1,ResNet-18,5,100,1\n", 2, "model_name", "Synergy's models"),
        ("0,res18,0,100,1\n0,gnmt,5,100,1\n", 2, "job_id", "already used on line 1"),
        ("0,res18,0,100,1\n1,gnmt,5,100,0\n", 2, "gpu_demand", ">= 1"),
    ],
)
def test_bad_record_lines_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, words: str
) -> None:
    path = tmp_path / "recorded"
    path.write_text(body)
    with pytest.raises(InputError) as caught:
        read_trace(path, default_registry())
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), line, field)
    assert words in caught.value.reason


def test_a_first_line_that_is_neither_form_is_unrecognised(tmp_path: Path) -> None:
    path = tmp_path / "other"
    path.write_text("0,nosuchmodel,0,100,1\n")
    with pytest.raises(InputError, match="unrecognised trace format"):
        read_trace(path, default_registry())
    with pytest.raises(InputError, match="header") as caught:
        read_trace(path, default_registry(), "synergy")
    assert caught.value.line == 1


def test_optional_columns_carry_entities_and_requests(tmp_path: Path) -> None:
    jobs = [
        JobSpec(0, "res18", 100, entity="vc1", cpus=12.0, memory_gb=100.5),
        JobSpec(1, "gnmt", 200, scale_factor=2, arrival_time=7.5),
    ]
    path = tmp_path / "t.csv"
    registry = default_registry()
    write_trace(jobs, path, registry, "synergy")
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER + ",entity,cpus,memory_gb"
    assert lines[2] == "1,gnmt,7.5,200,2,,,"
    trace = read_trace(path, registry)
    assert [(j.entity, j.cpus, j.memory_gb) for j in trace.jobs] == [
        ("vc1", 12.0, 100.5), (None, None, None)
    ]


def test_unknown_optional_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + ",entity,colour\n0,res18,0,100,1,a,red\n")
    with pytest.raises(InputError, match="colour"):
        read_trace(path, default_registry(), "synergy")


def test_every_synergy_model_is_recognised_in_the_record_form(tmp_path: Path) -> None:
    path = tmp_path / "recorded"
    path.write_text(
        "".join(record_line(i, m, i, 10, 1) for i, m in enumerate(sorted(synergy_profiles())))
    )
    trace = read_trace(path, default_registry())
    assert trace.format == "synergy-record"
    assert sorted(j.job_type for j in trace.jobs) == sorted(synergy_profiles())
