"""Trace reading and writing: bundled traces, property-based round trips, bad input, CLI."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shock_cli import run_shock as _shock
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.trace import read_trace, write_trace
from shock.traces.gavel import GAVEL_COLUMNS
from shock.traces.shockwave import MODES, SHOCKWAVE_COLUMNS

TRACES_DIR = Path(str(resources.files("shock.data").joinpath("traces")))
BUNDLED = sorted(TRACES_DIR.glob("*.trace"))
SHOCKWAVE_TRACES = {
    "shockwave_120_multigpu_dynamic.trace",
    "shockwave_220_multigpu_dynamic.trace",
    "shockwave_460_multigpu_dynamic.trace",
}


def registry():
    return default_registry()


# --------------------------------------------------------------------------- bundled traces


def test_bundled_traces_are_all_present() -> None:
    names = {p.name for p in BUNDLED}
    assert len(names) == 11
    assert names >= SHOCKWAVE_TRACES
    assert "max_min_fairness.trace" in names


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_trace_round_trips_byte_identically(path: Path, tmp_path: Path) -> None:
    trace = read_trace(path, registry())
    expected_format = "shockwave" if path.name in SHOCKWAVE_TRACES else "gavel"
    assert trace.format == expected_format
    assert trace.source == str(path)
    non_blank = [line for line in path.read_text().splitlines() if line.strip()]
    assert len(trace.jobs) == len(non_blank) > 0
    # job ids are the line index; source lines are 1-based.
    assert [j.job_id for j in trace.jobs] == list(range(len(trace.jobs)))
    assert trace.jobs[0].source_line == 1
    out = tmp_path / "out.trace"
    write_trace(trace.jobs, out, registry(), trace.format)
    assert out.read_bytes() == path.read_bytes()


def test_bundled_trace_known_values() -> None:
    trace = read_trace(TRACES_DIR / "max_min_fairness.trace", registry())
    assert len(trace.jobs) == 96
    first = trace.jobs[0]
    assert first.job_type == "ResNet-18 (batch size 128)"
    assert first.model_family == "ResNet-18"
    assert first.batch_size == 128
    assert first.total_steps == 925982
    assert first.scale_factor == 4
    assert first.priority_weight == 1.0
    assert first.slo is None
    assert first.arrival_time == 0.0
    assert first.needs_data_dir is True
    assert first.working_directory == "image_classification/cifar10"
    assert first.num_steps_arg == "--num_steps"
    assert first.mode == "static"
    assert first.duration is None
    assert trace.jobs[-1].arrival_time == 46317.0


def test_bundled_shockwave_trace_known_values() -> None:
    trace = read_trace(TRACES_DIR / "shockwave_220_multigpu_dynamic.trace", registry())
    assert len(trace.jobs) == 220
    first, second = trace.jobs[0], trace.jobs[1]
    assert first.job_type == "Transformer (batch size 16)"
    assert (first.mode, first.duration, first.arrival_time) == ("accordion", 8749.0, 0.0)
    assert (second.mode, second.duration, second.arrival_time) == ("gns", 6655.0, 24.0)
    assert {j.mode for j in trace.jobs} == {"static", "accordion", "gns"}


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    # Reading a 10-column file as shockwave names the line and complains about the columns.
    with pytest.raises(InputError) as info:
        read_trace(TRACES_DIR / "debug.trace", registry(), format_name="shockwave")
    assert f"{TRACES_DIR / 'debug.trace'}:1" in str(info.value)
    assert "12" in str(info.value)


# --------------------------------------------------------------------------- property-based

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"),
    max_size=20,
)
# The reader strips the job type (and rejects an empty one).
_JOB_TYPE = _TEXT.map(str.strip).filter(bool)
_FINITE = {"allow_nan": False, "allow_infinity": False}


@st.composite
def job_specs(draw: st.DrawFn, shockwave: bool) -> JobSpec:
    slo = draw(
        st.one_of(
            st.none(),
            # Values with at most 6 decimals: the SLO column is written with "%f".
            st.integers(min_value=1, max_value=10**12).map(lambda n: n / 10**6),
        )
    )
    return JobSpec(
        job_id=0,
        job_type=draw(_JOB_TYPE),
        total_steps=draw(st.integers(min_value=1, max_value=10**15)),
        scale_factor=draw(st.sampled_from([1, 2, 4, 8])),
        arrival_time=draw(st.floats(min_value=0.0, max_value=1e12, **_FINITE)),
        priority_weight=draw(st.floats(min_value=0.0, max_value=1e6, exclude_min=True, **_FINITE)),
        slo=slo,
        command=draw(_TEXT),
        working_directory=draw(_TEXT),
        num_steps_arg=draw(_TEXT),
        needs_data_dir=draw(st.booleans()),
        mode=draw(st.sampled_from(MODES)) if shockwave else "static",
        duration=draw(st.floats(min_value=0.0, max_value=1e9, **_FINITE)) if shockwave else None,
    )


def _round_trip(jobs: list[JobSpec], format_name: str) -> tuple[JobSpec, ...]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.trace"
        write_trace(jobs, path, registry(), format_name)
        trace = read_trace(path, registry())  # format detected, not named
        assert trace.format == format_name
        return trace.jobs


def _expected(jobs: list[JobSpec]) -> list[JobSpec]:
    # job_id is the line index (ids in memory are not written); source_line is 1-based.
    return [
        dataclasses.replace(job, job_id=index, source_line=index + 1)
        for index, job in enumerate(jobs)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_specs(shockwave=False), min_size=1, max_size=6))
def test_gavel_round_trip_property(jobs: list[JobSpec]) -> None:
    assert list(_round_trip(jobs, "gavel")) == _expected(jobs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_specs(shockwave=True), min_size=1, max_size=6))
def test_shockwave_round_trip_property(jobs: list[JobSpec]) -> None:
    assert list(_round_trip(jobs, "shockwave")) == _expected(jobs)


def test_gavel_format_drops_shockwave_columns(tmp_path: Path) -> None:
    job = JobSpec(0, "LM (batch size 5)", 10, mode="gns", duration=12.5)
    path = tmp_path / "g.trace"
    write_trace([job], path, registry(), "gavel")
    assert len(path.read_text().rstrip("\n").split("\t")) == len(GAVEL_COLUMNS)
    (read,) = read_trace(path, registry()).jobs
    assert (read.mode, read.duration) == ("static", None)


def test_shockwave_writes_missing_duration_as_zero(tmp_path: Path) -> None:
    path = tmp_path / "s.trace"
    write_trace([JobSpec(0, "A3C", 10)], path, registry(), "shockwave")
    fields = path.read_text().rstrip("\n").split("\t")
    assert len(fields) == len(SHOCKWAVE_COLUMNS)
    assert fields[SHOCKWAVE_COLUMNS.index("duration")] == "0"
    assert fields[SHOCKWAVE_COLUMNS.index("SLO")] == "-1.000000"


@pytest.mark.parametrize("slo", [1.2345678, 1e-7])
def test_slo_round_trips_exactly(slo: float, tmp_path: Path) -> None:
    path = tmp_path / "slo.trace"
    write_trace([JobSpec(0, "A3C", 10, slo=slo)], path, registry(), "gavel")
    (job,) = read_trace(path, registry()).jobs
    assert job.slo == slo


# --------------------------------------------------------------------------- bad input

GOOD_GAVEL = "A3C\tpython3 main.py %s\trl\t--max-steps\t0\t100\t1\t1\t-1.000000\t0"
GOOD_SHOCKWAVE = (
    "LM (batch size 5)\tpython main.py %s\tlanguage_modeling\t--steps\t1\t100\t1\tstatic\t1"
    "\t-1.000000\t50\t0"
)


def _bad_line(base: str, **fields: str) -> str:
    columns = SHOCKWAVE_COLUMNS if base is GOOD_SHOCKWAVE else GAVEL_COLUMNS
    parts = base.split("\t")
    assert len(parts) == len(columns)
    for name, value in fields.items():
        parts[columns.index(name)] = value
    return "\t".join(parts)


# name -> (base line of the file, the bad third line, field the error must name)
BAD_LINES = {
    "non_integer_total_steps": (
        GOOD_GAVEL,
        _bad_line(GOOD_GAVEL, total_steps="12.5"),
        "total_steps",
    ),
    "text_total_steps": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, total_steps="many"), "total_steps"),
    "zero_total_steps": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, total_steps="0"), "total_steps"),
    "text_scale_factor": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, scale_factor="abc"), "scale_factor"),
    "zero_scale_factor": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, scale_factor="0"), "scale_factor"),
    "negative_arrival": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, arrival_time="-1"), "arrival_time"),
    "nan_arrival": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, arrival_time="nan"), "arrival_time"),
    "inf_arrival": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, arrival_time="inf"), "arrival_time"),
    "zero_priority": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, priority_weight="0"), "priority_weight"),
    "negative_priority": (
        GOOD_GAVEL,
        _bad_line(GOOD_GAVEL, priority_weight="-2"),
        "priority_weight",
    ),
    "maybe_needs_data_dir": (
        GOOD_GAVEL,
        _bad_line(GOOD_GAVEL, needs_data_dir="maybe"),
        "needs_data_dir",
    ),
    "zero_slo": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, SLO="0"), "SLO"),
    "empty_job_type": (GOOD_GAVEL, _bad_line(GOOD_GAVEL, job_type="  "), "job_type"),
    "unknown_mode": (GOOD_SHOCKWAVE, _bad_line(GOOD_SHOCKWAVE, mode="adaptive"), "mode"),
    "negative_duration": (GOOD_SHOCKWAVE, _bad_line(GOOD_SHOCKWAVE, duration="-3"), "duration"),
    "shockwave_nan_arrival": (
        GOOD_SHOCKWAVE,
        _bad_line(GOOD_SHOCKWAVE, arrival_time="NaN"),
        "arrival_time",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_field_names_file_line_and_field(case: str, tmp_path: Path) -> None:
    base, bad, field = BAD_LINES[case]
    path = tmp_path / "trace.trace"
    path.write_text(f"{base}\n{base}\n{bad}\n{base}\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    error = info.value
    assert (error.path, error.line, error.field) == (str(path), 3, field)
    assert f"{path}:3" in str(error)
    assert f"field '{field}'" in str(error)


def test_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    bad = _bad_line(GOOD_GAVEL, total_steps="x")
    path.write_text(f"\n{GOOD_GAVEL}\n\n   \n{bad}\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert f"{path}:5" in str(info.value)
    assert info.value.field == "total_steps"


def test_too_many_columns_names_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    path.write_text(f"{GOOD_GAVEL}\n{GOOD_GAVEL}\t0\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert f"{path}:2" in str(info.value)
    assert "found 11" in str(info.value)


def test_mixed_formats_name_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    path.write_text(f"{GOOD_GAVEL}\n{GOOD_SHOCKWAVE}\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert f"{path}:2" in str(info.value)
    assert "found 12" in str(info.value)


def test_too_few_columns_names_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    short = GOOD_GAVEL.rsplit("\t", 1)[0]  # 9 columns: arrival_time is missing
    path.write_text(f"{GOOD_GAVEL}\n{GOOD_GAVEL}\n{short}\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert f"{path}:3" in str(info.value)
    assert "found 9" in str(info.value)
    assert info.value.field is not None


def test_too_few_columns_names_missing_field(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    short = GOOD_GAVEL.rsplit("\t", 1)[0]
    path.write_text(f"{GOOD_GAVEL}\n{GOOD_GAVEL}\n{short}\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert info.value.field == "arrival_time"


def test_unrecognised_column_count(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    path.write_text("a\tb\tc\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert f"{path}:1" in str(info.value)
    assert "gavel" in str(info.value) and "shockwave" in str(info.value)


@pytest.mark.parametrize("content", ["", "\n\n  \n"], ids=["empty", "blank_lines"])
def test_empty_trace(content: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert str(path) in str(info.value)
    assert "no jobs" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.trace"
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert str(path) in str(info.value)
    assert "cannot read" in str(info.value)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_trace(tmp_path, registry())
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("bad_line", [1, 3])
def test_non_utf8_raises_input_error(bad_line: int, tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    lines = [GOOD_GAVEL.encode()] * 3
    lines[bad_line - 1] = GOOD_GAVEL.replace("main", "m\xe9in").encode("latin-1")
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert str(path) in str(info.value)
    assert "UTF-8" in str(info.value)


def test_non_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    bad = GOOD_GAVEL.replace("main", "m\xe9in").encode("latin-1")
    path.write_bytes(GOOD_GAVEL.encode() + b"\n" + GOOD_GAVEL.encode() + b"\n" + bad + b"\n")
    with pytest.raises(InputError) as info:
        read_trace(path, registry())
    assert f"{path}:3" in str(info.value)


def test_crlf_line_endings_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    path.write_bytes((GOOD_GAVEL + "\r\n" + GOOD_GAVEL + "\r\n").encode())
    jobs = read_trace(path, registry()).jobs
    assert len(jobs) == 2
    assert jobs[1].arrival_time == 0.0 and jobs[1].total_steps == 100


def test_integral_float_total_steps_accepted(tmp_path: Path) -> None:
    path = tmp_path / "trace.trace"
    path.write_text(_bad_line(GOOD_GAVEL, total_steps="12.0", SLO="2.5") + "\n")
    (job,) = read_trace(path, registry()).jobs
    assert job.total_steps == 12
    assert job.slo == 2.5
    assert not math.isnan(job.arrival_time)


# --------------------------------------------------------------------------- CLI


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [["trace", "info", "bad.trace"], ["run", "--quiet", "--trace", "bad.trace"]],
    ids=["trace_info", "run"],
)
def test_cli_reports_bad_trace_without_traceback(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "bad.trace").write_text(f"{GOOD_GAVEL}\n{_bad_line(GOOD_GAVEL, total_steps='x')}\n")
    result = _shock(*command, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    line = _error_line(result.stderr)
    assert "bad.trace:2" in line
    assert "field 'total_steps'" in line


def test_cli_trace_info_reports_mode_error(tmp_path: Path) -> None:
    (tmp_path / "sw.trace").write_text(
        f"{GOOD_SHOCKWAVE}\n{GOOD_SHOCKWAVE}\n{_bad_line(GOOD_SHOCKWAVE, mode='adaptive')}\n"
    )
    result = _shock("trace", "info", "sw.trace", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    line = _error_line(result.stderr)
    assert "sw.trace:3" in line
    assert "field 'mode'" in line


def test_cli_trace_info_missing_file(tmp_path: Path) -> None:
    result = _shock("trace", "info", "absent.trace", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "absent.trace" in _error_line(result.stderr)


@pytest.mark.parametrize(
    ("name", "fmt", "jobs"),
    [("small_test.trace", "gavel", 20), ("shockwave_220_multigpu_dynamic.trace", "shockwave", 220)],
)
def test_cli_trace_info_summarises_bundled_trace(name: str, fmt: str, jobs: int) -> None:
    result = CliRunner().invoke(app, ["trace", "info", str(TRACES_DIR / name)])
    assert result.exit_code == 0, result.output
    assert f"({fmt} format)" in " ".join(result.output.split())
    jobs_row = next(line for line in result.output.splitlines() if " jobs " in line)
    assert str(jobs) in jobs_row.split()


def test_cli_error_line_not_wrapped_for_long_paths(tmp_path: Path) -> None:
    directory = tmp_path / ("d" * 70)
    directory.mkdir()
    path = directory / "bad.trace"
    path.write_text(f"{GOOD_GAVEL}\n{_bad_line(GOOD_GAVEL, total_steps='x')}\n")
    result = _shock("trace", "info", str(path), cwd=tmp_path)
    assert result.returncode == 2
    line = _error_line(result.stderr)
    assert f"{path}:2" in line
    assert "field 'total_steps'" in line
