"""`shock sweep`: a grid of cells run in worker processes, keyed, resumable, tabulated."""

from __future__ import annotations

import csv
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
from shock_cli import run_shock
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs
from shock.core.trace import write_trace
from shock.engine.runner import RunOptions, bundled_trace_path, run
from shock.sweep.cells import make_cell
from shock.sweep.runner import plan_cells, run_sweep
from shock.sweep.spec import load_spec
from shock.traces.generator import WorkloadConfig, generate_jobs

GRID_SPEC = """
[base]
cluster = "2:2:2"
preset = "gavel"
[generate]
jobs = 20
[grid]
policy = ["max_min_fairness_perf", "fifo_perf"]
rate = [1.0, 2.0]
seed = [0, 1]
"""
# Timing columns: the only ones two runs of the same cell may disagree on.
TIMING = {"wall_s", "solver_seconds"}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _sweep(spec: Path, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out), "--quiet", *extra])
    return result.exit_code, result.output


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "runs.csv").open() as handle:
        return list(csv.DictReader(handle))


def _without_timing(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("grid")
    spec = _write(root / "spec.toml", GRID_SPEC)
    code, output = _sweep(spec, root / "out", "--parallel", "2")
    assert code == 0, output
    return spec, root / "out", output


def test_every_cell_runs_once_into_a_row_and_a_document(grid: tuple[Path, Path, str]) -> None:
    _, out, output = grid
    rows = _rows(out)
    assert "8 cells: 8 run, 0 done before, 0 failed" in output
    assert len(rows) == 8
    assert {row["status"] for row in rows} == {"done"}
    assert len({row["cell"] for row in rows}) == 8
    documents = sorted((out / "cells").glob("*.json"))
    assert [p.stem for p in documents] == sorted(row["cell"] for row in rows)
    # Every option column and every metric is in the table.
    for column in ("cluster", "preset", "policy", "rate", "seed", "jobs", "avg_jct_s", "error"):
        assert column in rows[0]
    combos = {(row["policy"], row["rate"], row["seed"]) for row in rows}
    assert len(combos) == 8
    # A row holds its own cell's numbers.
    for row in rows:
        document = json.loads((out / "cells" / f"{row['cell']}.json").read_text())
        assert float(row["avg_jct_s"]) == document["metrics"]["avg_jct_s"]
        assert document["policy"] == row["policy"]


def test_runs_parquet_holds_the_rows_of_runs_csv(grid: tuple[Path, Path, str]) -> None:
    parquet = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
    _, out, _ = grid
    rows = parquet.read_table(out / "runs.parquet").to_pylist()
    expected = _rows(out)
    assert len(rows) == len(expected) == 8
    assert list(rows[0]) == list(expected[0])  # the same columns, in the same order
    as_text = [{k: "" if v is None else str(v) for k, v in row.items()} for row in rows]
    assert as_text == expected
    assert isinstance(rows[0]["avg_jct_s"], float)  # typed, not text


def test_a_cell_equals_a_plain_run_of_the_same_options(
    grid: tuple[Path, Path, str], tmp_path: Path
) -> None:
    spec, out, _ = grid
    row = next(r for r in _rows(out) if r["policy"] == "fifo_perf" and r["rate"] == "2.0"
               and r["seed"] == "1")
    # The cell's trace is `shock trace generate --jobs 20 --rate 2 --seed 1`.
    expected_trace = tmp_path / "expected.trace"
    jobs = generate_jobs(
        WorkloadConfig(num_jobs=20, jobs_per_hour=2.0, seed=1), default_throughputs()
    )
    write_trace(jobs, expected_trace, default_registry(), "gavel")
    cells = {c.key: c for c in (make_cell(s, spec, out) for s in load_spec(spec).cells())}
    generated = cells[row["cell"]].generated_trace
    assert generated is not None
    assert generated.read_text() == expected_trace.read_text()

    plain = run(RunOptions(policy="fifo_perf", cluster="2:2:2", preset="gavel", seed=1,
                           trace=str(expected_trace)))
    document = json.loads((out / "cells" / f"{row['cell']}.json").read_text())
    expected = {k: v for k, v in asdict(plain.metrics).items() if k not in TIMING}
    assert {k: v for k, v in document["metrics"].items() if k not in TIMING} == expected
    assert [j["jct_s"] for j in document["jobs"]] == [r.jct_s for r in plain.records]


def test_rerunning_skips_the_done_cells(grid: tuple[Path, Path, str]) -> None:
    spec, out, _ = grid
    before = {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}
    rows_before = _rows(out)
    code, output = _sweep(spec, out, "--parallel", "2")
    assert code == 0, output
    assert "8 cells: 0 run, 8 done before, 0 failed" in output
    assert {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")} == before
    assert _without_timing(_rows(out)) == _without_timing(rows_before)


def test_one_or_two_workers_give_the_same_table(
    grid: tuple[Path, Path, str], tmp_path: Path
) -> None:
    spec, out, _ = grid
    code, output = _sweep(spec, tmp_path / "serial", "--parallel", "1")
    assert code == 0, output
    assert _without_timing(_rows(tmp_path / "serial")) == _without_timing(_rows(out))


def test_a_half_written_document_is_run_again(tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.toml", f"""
[base]
cluster = "2:2:2"
trace = "{bundled_trace_path('small_test.trace')}"
[grid]
policy = ["fifo_perf", "max_min_fairness_perf"]
""")
    out = tmp_path / "out"
    assert _sweep(spec, out, "--parallel", "1")[0] == 0
    first = sorted((out / "cells").glob("*.json"))[0]
    first.write_text('{"metrics": {"avg')  # as if cut off mid-write by a crash
    code, output = _sweep(spec, out, "--parallel", "1")
    assert code == 0, output
    assert "2 cells: 1 run, 1 done before, 0 failed" in output
    assert "metrics" in json.loads(first.read_text())


FAILING_SPEC = """
[base]
trace = "{trace}"
[grid]
policy = ["fifo_perf", "no_such_policy"]
cluster = ["2:2:2", "a100=4"]
"""


def test_failed_cells_are_recorded_and_retried(tmp_path: Path) -> None:
    # The CLI refuses such a sweep before it runs (below); the runner itself records the
    # cells that fail and runs them again next time.
    text = FAILING_SPEC.format(trace=bundled_trace_path("small_test.trace"))
    spec = load_spec(_write(tmp_path / "spec.toml", text))
    out = tmp_path / "out"
    summary = run_sweep(spec, plan_cells(spec, out), out, 2)
    assert (summary.ran, summary.skipped, summary.failed) == (4, 0, 3)
    rows = {(r["policy"], r["cluster"]): r for r in _rows(out)}
    assert rows[("fifo_perf", "2:2:2")]["status"] == "done"
    assert rows[("fifo_perf", "2:2:2")]["avg_jct_s"] != ""
    assert "unknown policy 'no_such_policy'" in rows[("no_such_policy", "2:2:2")]["error"]
    assert "a100" in rows[("fifo_perf", "a100=4")]["error"]
    for key in [("no_such_policy", "2:2:2"), ("fifo_perf", "a100=4"), ("no_such_policy", "a100=4")]:
        assert rows[key]["status"] == "failed"
        assert rows[key]["avg_jct_s"] == ""
    assert len(list((out / "cells").glob("*.json"))) == 1
    summary = run_sweep(spec, plan_cells(spec, out), out, 2)
    assert (summary.ran, summary.skipped, summary.failed) == (3, 1, 3)


def test_every_cell_is_checked_before_the_first_runs(tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.toml", """
[base]
preset = "gavel"
[generate]
jobs = 4
[grid]
policy = ["fifo", "fiffo", "max_min_fairness_perf"]
cluster = ["1:1:1", "v100=2,p10=1", "synergy-12"]
seed = [0, 1]
""")
    out = tmp_path / "out"
    result = run_shock("sweep", str(spec), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert not out.exists()  # nothing ran, nothing was written
    lines = result.stderr.splitlines()
    assert lines[0] == "error: 14 of 18 cells cannot run, so none was run:"
    # Each distinct error once, with the grid values of the cells it stops.
    assert len(lines) == 4
    assert any(
        line.startswith("  6 cells (policy=fiffo): unknown policy 'fiffo'; did you mean 'fifo'?")
        for line in lines
    )
    assert any("4 cells (cluster=v100=2,p10=1)" in ln and "mean 'p100'" in ln for ln in lines)
    assert any("4 cells (cluster=synergy-12)" in ln and "'synergy-128'" in ln for ln in lines)


def test_a_misspelled_spec_option_gets_a_suggestion(tmp_path: Path) -> None:
    path = _write(tmp_path / "spec.toml", "[grid]\npolcy = ['fifo']\n")
    with pytest.raises(InputError, match="unknown option; did you mean 'policy'"):
        load_spec(path)


def test_keys_follow_options_trace_content_and_not_the_output_place(tmp_path: Path) -> None:
    trace = tmp_path / "a.trace"
    trace.write_text(bundled_trace_path("small_test.trace").read_text())
    spec = load_spec(_write(tmp_path / "spec.toml", f"""
[base]
trace = "{trace}"
[grid]
policy = ["fifo_perf", "fifo_perf", "max_min_fairness_perf"]
"""))
    keys = [make_cell(c, spec.path, tmp_path / "x").key for c in spec.cells()]
    assert keys[0] == keys[1] != keys[2]
    assert [make_cell(c, spec.path, tmp_path / "y").key for c in spec.cells()] == keys
    trace.write_text(bundled_trace_path("medium_test.trace").read_text())
    assert make_cell(spec.cells()[0], spec.path, tmp_path / "x").key != keys[0]


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("[base\n", None, "not valid TOML"),
        ("[grid]\npolicy = 'fifo'\n", "grid.policy", "non-empty list"),
        ("[grid]\npolicy = []\n", "grid.policy", "non-empty list"),
        ("[base]\npolicyy = 'x'\n[grid]\nseed = [1]\n", "base.policyy", "unknown option"),
        ("[grid]\nrate = [1.0]\n", "grid.rate", "unknown option"),  # rate needs [generate]
        ("[grid]\nseed = ['one']\n", "grid.seed", "expected an integer"),
        ("[base]\nseed = 1\n", "grid", "needs a [grid]"),
        ("[generate]\njobs = 2\n[grid]\ntrace = ['a']\n", "grid.trace", "[generate]"),
        ("[grids]\nseed = [1]\n", "grids", "unknown section"),
    ],
)
def test_bad_specs_name_the_file_and_the_key(
    tmp_path: Path, text: str, field: str | None, reason: str
) -> None:
    path = _write(tmp_path / "spec.toml", text)
    with pytest.raises(InputError) as error:
        load_spec(path)
    assert error.value.path == str(path)
    assert error.value.field == field
    assert reason in error.value.reason


def test_a_missing_trace_is_named_before_any_cell_runs(tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.toml", "[base]\ntrace = 'gone.trace'\n[grid]\nseed = [0]\n")
    result = run_shock("sweep", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{spec}, field 'trace': cannot read 'gone.trace'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_resuming_reads_the_index_not_every_document(
    grid: tuple[Path, Path, str], tmp_path: Path
) -> None:
    spec, done, _ = grid
    out = tmp_path / "out"
    shutil.copytree(done, out)  # sizes and modification times kept
    index = (out / "cells" / "index.jsonl").read_text().splitlines()
    assert len(index) == 8 and all(json.loads(line)["summary"]["metrics"] for line in index)
    rows_before = _rows(out)
    # Blank every document but keep its size and time: only a resume that trusts the index
    # and reads no document can still find the cells done.
    for document in (out / "cells").glob("*.json"):
        stat = document.stat()
        document.write_text(" " * stat.st_size)
        os.utime(document, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code, output = _sweep(spec, out, "--parallel", "1")
    assert code == 0, output
    assert "8 cells: 0 run, 8 done before, 0 failed" in output
    assert _without_timing(_rows(out)) == _without_timing(rows_before)
    # A document that changed since (another size) is read again, and run again if broken.
    victim = sorted((out / "cells").glob("*.json"))[0]
    victim.write_text("{")
    code, output = _sweep(spec, out, "--parallel", "1")
    assert code == 0, output
    assert "8 cells: 1 run, 7 done before, 0 failed" in output


def test_progress_lines_for_a_log(tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.toml", f"""
[base]
cluster = "2:2:2"
trace = "{bundled_trace_path('small_test.trace')}"
[grid]
policy = ["fifo_perf", "max_min_fairness_perf"]
""")
    result = run_shock("sweep", str(spec), "--out", str(tmp_path / "out"), "--parallel", "1",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("sweep: ")]
    assert len(lines) == 2
    assert lines[0].startswith("sweep: 1/2 cells (0 failed), ")
    assert lines[1].startswith("sweep: 2/2 cells (0 failed), ") and "done (" in lines[1]
    assert "━" not in result.stdout + result.stderr  # no bar in a pipe
    quiet = run_shock("sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet", cwd=tmp_path)
    assert "sweep: " not in quiet.stderr
