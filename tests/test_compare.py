"""`shock compare`: runs side by side with ratios to a baseline, from results files and from
a sweep's directory; clear errors for what is neither."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError, ShockError
from shock.engine.runner import RunOptions, run
from shock.results.compare import compare

SWEEP_SPEC = """
[base]
cluster = "2:2:2"
preset = "gavel"
[generate]
jobs = 10
[grid]
policy = ["max_min_fairness_perf", "fifo_perf"]
seed = [0, 1]
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two results files (fifo, LAS on the bundled trace) and a sweep's directory."""
    root = tmp_path_factory.mktemp("compare")
    paths = {}
    for name, policy in (("fifo", "fifo"), ("las", "max_min_fairness_perf")):
        paths[name] = root / f"{name}.json"
        run(RunOptions(policy=policy, cluster="4:4:4")).write_json(paths[name])
    spec = root / "spec.toml"
    spec.write_text(SWEEP_SPEC)
    paths["sweep"] = root / "sweep"
    result = CliRunner().invoke(
        app, ["sweep", str(spec), "--out", str(paths["sweep"]), "--quiet", "--parallel", "1"]
    )
    assert result.exit_code == 0, result.output
    return paths


def _metrics(path: Path) -> dict[str, float]:
    return json.loads(path.read_text())["metrics"]  # type: ignore[no-any-return]


def test_ratios_are_to_the_first_run_by_default(runs: dict[str, Path]) -> None:
    comparison = compare([runs["fifo"], runs["las"]])
    fifo, las = _metrics(runs["fifo"]), _metrics(runs["las"])
    assert [c.label for c in comparison.columns] == ["fifo", "las"]
    assert comparison.baseline == 0
    las_column = comparison.columns[1]
    for name in ("avg_jct_s", "makespan_s", "utilization"):
        assert las_column.metrics[name].mean == las[name]
        assert comparison.ratio(las_column, name) == pytest.approx(las[name] / fifo[name])
    assert comparison.ratio(comparison.columns[0], "avg_jct_s") == 1.0


def test_baseline_by_label_or_policy(runs: dict[str, Path]) -> None:
    by_label = compare([runs["fifo"], runs["las"]], baseline="las")
    by_policy = compare([runs["fifo"], runs["las"]], baseline="max_min_fairness_perf")
    assert by_label.baseline == by_policy.baseline == 1
    with pytest.raises(ShockError, match="no run has that label or policy; runs: fifo, las"):
        compare([runs["fifo"], runs["las"]], baseline="gandiva")


def test_a_sweep_is_grouped_by_its_axes_and_averaged_over_seeds(runs: dict[str, Path]) -> None:
    with (runs["sweep"] / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    comparison = compare([runs["sweep"]])
    assert {c.label for c in comparison.columns} == {"max_min_fairness_perf", "fifo_perf"}
    for column in comparison.columns:
        assert column.runs == 2
        assert column.policy == column.label
        jct = [float(r["avg_jct_s"]) for r in rows if r["policy"] == column.policy]
        value = column.metrics["avg_jct_s"]
        assert value.mean == pytest.approx(statistics.fmean(jct))
        assert value.stdev == pytest.approx(statistics.stdev(jct))
        assert (value.low, value.high) == (min(jct), max(jct))
    # Averaged over nothing, each cell is its own column, labelled by policy and seed.
    per_cell = compare([runs["sweep"]], averaged=())
    assert len(per_cell.columns) == 4
    assert all(c.runs == 1 for c in per_cell.columns)
    assert "fifo_perf · 1" in {c.label for c in per_cell.columns}


def test_files_and_sweeps_mix_and_the_baseline_may_be_a_sweep_group(
    runs: dict[str, Path],
) -> None:
    comparison = compare([runs["las"], runs["sweep"]], baseline="fifo_perf")
    assert comparison.columns[comparison.baseline].label == "fifo_perf"
    document = comparison.to_json()
    assert document["baseline"] == "fifo_perf"
    labels = [r["label"] for r in document["runs"]]  # type: ignore[attr-defined]
    assert labels == ["las", "max_min_fairness_perf", "fifo_perf"]


def test_cli_prints_one_table_and_writes_json(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "comparison.json"
    result = CliRunner().invoke(
        app,
        ["compare", str(runs["fifo"]), str(runs["las"]), "--baseline", "las", "--json", str(out)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "las (baseline)" in result.output
    assert "average JCT" in result.output and "×" in result.output
    written = json.loads(out.read_text())
    assert written == compare([runs["fifo"], runs["las"]], baseline="las").to_json()
    to_stdout = CliRunner().invoke(app, ["compare", str(runs["fifo"]), "--json", "-"])
    assert json.loads(to_stdout.output)["runs"][0]["label"] == "fifo"


def test_clear_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError, match=f"{missing}: no such file"):
        compare([missing])
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a shock results document"):
        compare([other])
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(InputError, match=f"{broken}: not JSON"):
        compare([broken])
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(InputError, match=f"{empty_dir / 'runs.csv'}: no such file"):
        compare([empty_dir])


def test_cli_error_has_no_traceback(tmp_path: Path) -> None:
    from shock_cli import run_shock

    completed = run_shock("compare", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert completed.returncode == 2
    assert "no such file" in completed.stderr
    assert "Traceback" not in completed.stderr
