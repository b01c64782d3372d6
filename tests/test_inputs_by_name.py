"""Bundled traces and throughput tables by name everywhere (`shock traces` lists them), trace
errors that say what is wrong with the line, and a warning for a window past the trace."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from shock_cli import run_shock
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError, ShockWarning
from shock.core.plugins import default_registry
from shock.core.throughputs import load_throughputs
from shock.core.trace import read_trace
from shock.engine.runner import RunOptions, build_request, bundled_trace_path, parse_window
from shock.util.bundled import bundled_throughputs, bundled_traces, resolve_trace


def test_a_bundled_trace_by_name_is_the_bundled_file(tmp_path: Path) -> None:
    path = bundled_trace_path("shockwave_120_multigpu_dynamic.trace")
    for name in ("shockwave_120_multigpu_dynamic", "shockwave_120_multigpu_dynamic.trace",
                 "shock/data/traces/shockwave_120_multigpu_dynamic.trace"):
        assert resolve_trace(name).resolve() == path.resolve()
    registry = default_registry()
    assert read_trace("small_test", registry).jobs == read_trace(
        bundled_trace_path("small_test.trace"), registry
    ).jobs
    # A file of that name in the working directory wins over the bundled one.
    local = tmp_path / "small_test"
    local.write_text(bundled_trace_path("debug.trace").read_text())
    assert resolve_trace(str(local)) == local


def test_bundled_throughput_tables_by_name() -> None:
    assert set(bundled_throughputs()) == {"gavel", "shockwave_tacc", "shockwave_wisr"}
    wisr = load_throughputs("shockwave_wisr")
    assert wisr.isolated == load_throughputs(bundled_throughputs()["shockwave_wisr"]).isolated
    assert load_throughputs("shockwave_wisr_throughputs.json").isolated == wisr.isolated


def test_a_run_and_a_sweep_take_names(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", "--quiet", "--trace", "small_test", "--throughputs", "gavel",
              "--json", str(tmp_path / "r.json")],
    )
    assert result.exit_code == 0, result.output
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\ntrace = "small_test"\ncluster = "2:2:2"\n[grid]\nseed = [0]\n')
    result = CliRunner().invoke(
        app, ["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet", "--parallel", "1"]
    )
    assert result.exit_code == 0, result.output


def test_a_misspelled_trace_name_gets_a_suggestion(tmp_path: Path) -> None:
    result = run_shock("run", "--trace", "smal_test", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "smal_test, field '--trace': cannot read the trace: no such file, nor a bundled" in (
        " ".join(result.stderr.split())
    )
    assert "did you mean 'small_test'" in result.stderr


def test_shock_traces_lists_what_names_take(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["traces"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    for name in bundled_traces():
        assert name in result.output
    assert "shockwave_wisr" in result.output and "shock clusters" in result.output
    line = next(ln for ln in result.output.splitlines() if " small_test " in ln)
    assert "20" in line.split("│")[2]


def test_spaces_for_tabs_are_named(tmp_path: Path) -> None:
    lines = bundled_trace_path("small_test.trace").read_text().splitlines()
    spaced = tmp_path / "spaced.trace"
    spaced.write_text("\n".join([lines[0], lines[1].replace("\t", " "), *lines[2:]]) + "\n")
    with pytest.raises(
        InputError, match=r"expected 10 tab-separated columns, found 1 \(the line has no tabs"
    ) as raised:
        read_trace(spaced, default_registry())
    assert raised.value.line == 2
    first = tmp_path / "first.trace"
    first.write_text(lines[0].replace("\t", "  ") + "\n")
    with pytest.raises(InputError, match="separated by tabs; did an editor turn them"):
        read_trace(first, default_registry())


def test_a_window_past_the_trace_warns(tmp_path: Path) -> None:
    with pytest.warns(ShockWarning, match=r"--window 50:1000 reaches past .* 46 jobs are measured"):
        build_request(RunOptions(window=parse_window("50:1000")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShockWarning)
        build_request(RunOptions(window=parse_window("50:96")))  # inside: no warning
    result = run_shock("run", "--quiet", "--window", "50:1000", cwd=tmp_path)
    assert result.returncode == 0
    assert "warning: --window 50:1000 reaches past the trace's last job" in result.stderr
