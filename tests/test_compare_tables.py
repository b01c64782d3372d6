"""`shock compare` of a sweep as a paper needs it: each policy against the baseline policy at
the same load, a pivot by an axis that fits 80 columns, one unit per row or table, and the
same tables as CSV, Markdown and LaTeX."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError
from shock.results.compare import compare
from shock.results.compare_tables import comparison_tables, metric_unit
from shock.results.table_formats import split_to_width

POLICIES = ["fifo", "max_min_fairness_perf", "finish_time_fairness_perf"]
SPEC = f"""
[base]
cluster = "1:1:1"
preset = "gavel"
[generate]
jobs = 4
[grid]
policy = {json.dumps(POLICIES)}
rate = [1, 2, 4, 8]
seed = [0, 1]
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-policy × 4-rate × 2-seed sweep of 4-job traces (seconds to run)."""
    root = tmp_path_factory.mktemp("sweep")
    (root / "spec.toml").write_text(SPEC)
    out = root / "out"
    result = CliRunner().invoke(
        app, ["sweep", str(root / "spec.toml"), "--out", str(out), "--quiet", "--parallel", "1"]
    )
    assert result.exit_code == 0, result.output
    return out


def _rows(sweep: Path) -> list[dict[str, str]]:
    with (sweep / "runs.csv").open() as handle:
        return list(csv.DictReader(handle))


def _mean(sweep: Path, policy: str, rate: str, metric: str) -> float:
    values = [
        float(r[metric])
        for r in _rows(sweep)
        if r["policy"] == policy and float(r["rate"]) == float(rate)
    ]
    assert len(values) == 2
    return sum(values) / 2


def test_a_policy_baseline_is_each_groups_own_load_level(sweep: Path) -> None:
    comparison = compare([sweep], baseline="fifo")
    assert len(comparison.columns) == 12
    for column in comparison.columns:
        base = comparison.baseline_of(column)
        assert base is not None
        assert base.axes == {"policy": "fifo", "rate": column.axes["rate"]}
        expected = _mean(sweep, column.policy, column.axes["rate"], "avg_jct_s") / _mean(
            sweep, "fifo", column.axes["rate"], "avg_jct_s"
        )
        assert comparison.ratio(column, "avg_jct_s") == pytest.approx(expected)
    assert comparison.to_json()["baseline"] == "fifo at the same rate"


def test_the_pivot_by_rate_fits_80_columns_with_every_number(sweep: Path) -> None:
    result = CliRunner().invoke(
        app, ["compare", str(sweep), "--by", "rate"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in result.output and "split" not in result.output
    # A table per headline metric, rows = rates, columns = policies.
    assert "average JCT (" in result.output and "worst finish-time fairness ρ" in result.output
    header = next(line for line in lines if line.startswith("rate "))
    assert header.split() == ["rate", *POLICIES]
    rows = [line.split() for line in lines if line.split()[:1] in (["1"], ["2"], ["4"], ["8"])]
    assert len(rows) == 4 * 5
    # The first policy is each rate's baseline: its cell has no ratio, the others do.
    jct = comparison_tables(compare([sweep], "fifo"), ["avg_jct_s"], by="rate")[0]
    for row in jct.rows:
        assert row.cells[0].ratio is None and row.cells[0].is_baseline
        assert all(cell.ratio is not None for cell in row.cells[1:])
        ratio = _mean(sweep, POLICIES[1], row.label, "avg_jct_s") / _mean(
            sweep, "fifo", row.label, "avg_jct_s"
        )
        assert row.cells[1].ratio_text == f"×{ratio:.2f}"
        assert row.cells[1].ratio_text in result.output


def test_one_unit_per_row_and_a_split_that_says_how_to_widen(sweep: Path) -> None:
    result = CliRunner().invoke(app, ["compare", str(sweep)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    assert "(part 1 of" in result.output and "--by AXIS" in result.output
    # Hours in the row's label, and never two units in one cell.
    unit = metric_unit("avg_jct_s", [_mean(sweep, "fifo", "1", "avg_jct_s")])
    assert f"average JCT ({unit.name})" in result.output
    for line in result.output.splitlines():
        assert not (" h ±" in line or "min ±" in line)


def test_exports_for_papers(sweep: Path) -> None:
    def shock(*args: str) -> str:
        result = CliRunner().invoke(app, ["compare", str(sweep), *args])
        assert result.exit_code == 0, result.output
        return result.output

    markdown = shock("--by", "rate", "--metrics", "avg_jct_s,utilization", "--markdown")
    assert "| rate | fifo | max_min_fairness_perf | finish_time_fairness_perf |" in markdown
    assert markdown.count("|:---|---:|---:|---:|") == 2
    latex = shock("--by", "rate", "--metrics", "avg_jct_s", "--latex")
    assert r"\begin{tabular}{lrrr}" in latex and r"max\_min\_fairness\_perf" in latex
    assert r"$\pm$" in latex and r"\bottomrule" in latex
    table = list(csv.DictReader(io.StringIO(shock("--metrics", "avg_jct_s", "--csv"))))
    assert len(table) == 12
    row = next(r for r in table if r["policy"] == "fifo" and r["rate"] == "2")
    assert float(row["mean"]) == pytest.approx(_mean(sweep, "fifo", "2", "avg_jct_s"))
    assert row["runs"] == "2" and row["sd"] != ""


def test_splitting_keeps_every_column_once(sweep: Path) -> None:
    table = comparison_tables(compare([sweep]))[0]
    parts = split_to_width(table, 80)
    assert len(parts) > 1
    assert [h for part in parts for h in part.headers] == list(table.headers)


def test_names_that_are_not_there_get_a_suggestion(sweep: Path) -> None:
    with pytest.raises(InputError, match="did you mean 'rate'"):
        comparison_tables(compare([sweep]), by="rates")
    with pytest.raises(InputError, match="did you mean 'p99_jct_s'"):
        comparison_tables(compare([sweep]), ["p99_jct"])


def test_the_docs_pandas_example_reads_the_sweep(sweep: Path) -> None:
    pd = pytest.importorskip(
        "pandas", reason="pandas is an optional extra: pip install 'shock[analysis]'"
    )
    pytest.importorskip("pyarrow", reason="pyarrow is an optional extra: shock[analysis]")
    runs = pd.read_parquet(sweep / "runs.parquet")
    table = runs.pivot_table(index="policy", columns="rate", values="avg_jct_s")
    assert table.shape == (3, 4)
    assert table.loc["fifo", 2] == pytest.approx(_mean(sweep, "fifo", "2", "avg_jct_s"))
    # runs.csv names a metric that clashes with an option `metric.NAME` (docs/results.md).
    columns = set(pd.read_csv(sweep / "runs.csv").columns)
    assert {"cell", "policy", "rate", "seed", "jobs", "metric.jobs", "status", "error",
            "wall_s", "unfinished_jobs"} <= columns
