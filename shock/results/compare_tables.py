"""`shock compare`'s tables as data, one unit per metric: the terminal, the HTML report and the
CSV, Markdown and LaTeX exports all render these.

Two layouts: metrics × runs (a row per metric, a column per run or sweep group), and a pivot
by one sweep axis (`by`): one table per metric, a row per value of that axis (e.g. the arrival
rate) and a column per value of the other axes (e.g. the policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shock.core.errors import InputError
from shock.results.compare import METRIC_LABELS, SHARE_METRICS, Comparison, RunColumn
from shock.util.suggest import did_you_mean

HIGHER_IS_BETTER = {"utilization", "lease_extension_share"}
# Counts of what happened: a ratio says nothing (neither better nor worse).
NO_RATIO = {"jobs", "rounds", "allocations", "unfinished_jobs"}
# A ratio this close to 1 is neither better nor worse.
SAME = 0.01
# What a pivot shows unless --metrics names others: the headline of a scheduling paper.
PIVOT_METRICS = ("avg_jct_s", "p99_jct_s", "makespan_s", "worst_ftf_rho", "utilization")


@dataclass(frozen=True, slots=True)
class Unit:
    """How one metric's numbers are written: divided by `scale`, with `digits` decimals."""

    name: str  # "h", "min", "s", "%", "" (a plain number)
    scale: float
    digits: int

    def text(self, value: float) -> str:
        return f"{value / self.scale:,.{self.digits}f}"


def metric_unit(name: str, values: Sequence[float]) -> Unit:
    """One unit for every cell of a metric, picked from its largest value (a duration in
    hours once runs take hours, so means and spreads are never in two units)."""
    largest = max((abs(v) for v in values), default=0.0)
    if name in SHARE_METRICS:
        return Unit("%", 0.01, 1)
    if name in ("wall_s", "solver_seconds"):
        return Unit("s", 1.0, 2)
    if name.endswith("_s"):
        if largest >= 2 * 3600:
            return Unit("h", 3600.0, 2)
        if largest >= 120:
            return Unit("min", 60.0, 1)
        return Unit("s", 1.0, 1)
    if name == "worst_ftf_rho":
        return Unit("", 1.0, 2)
    whole = all(float(v).is_integer() for v in values)
    return Unit("", 1.0, 0 if whole else 1)


@dataclass(frozen=True, slots=True)
class Cell:
    value: str  # "12.34" or "12.34 ± 0.56" in the row's (or table's) unit; "" when missing
    ratio: float | None  # to the cell's baseline; None where it has none or means nothing
    better: bool | None  # None: neither (a count, or within 1% of the baseline)
    is_baseline: bool = False

    @property
    def ratio_text(self) -> str:
        return "" if self.ratio is None else f"×{self.ratio:.2f}"


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    unit: str  # the row's unit; "" when the table has one (in its title) or none
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class CompareTable:
    title: str
    corner: str  # the header over the row labels
    headers: tuple[str, ...]
    rows: tuple[Row, ...]
    note: str  # what the ratios are to, and what the spread is

    def columns(self, start: int, stop: int) -> CompareTable:
        """The same table with only columns [start, stop) (a table split to fit a page)."""
        rows = tuple(Row(r.label, r.unit, r.cells[start:stop]) for r in self.rows)
        return CompareTable(self.title, self.corner, self.headers[start:stop], rows, self.note)


def metric_label(name: str) -> str:
    return METRIC_LABELS.get(name, name)


def _cell(comparison: Comparison, column: RunColumn, name: str, unit: Unit) -> Cell:
    value = column.metrics.get(name)
    if value is None:
        return Cell("", None, None)
    text = unit.text(value.mean)
    if value.stdev is not None:
        text += f" ± {unit.text(value.stdev)}"
    baseline = comparison.is_baseline(column)
    ratio = None if baseline or name in NO_RATIO else comparison.ratio(column, name)
    better = None
    if ratio is not None and abs(ratio - 1) >= SAME:
        better = ratio > 1 if name in HIGHER_IS_BETTER else ratio < 1
    return Cell(text, ratio, better, baseline)


def select_metrics(comparison: Comparison, wanted: Sequence[str] | None, pivot: bool) -> list[str]:
    """The metrics to show: `wanted` (names or their table labels), else every metric (the
    headline ones for a pivot)."""
    present = list(comparison.metric_names)
    if not wanted:
        return [m for m in PIVOT_METRICS if m in present] if pivot else present
    chosen = []
    by_label = {metric_label(m): m for m in present}
    for name in wanted:
        metric = name if name in present else by_label.get(name)
        if metric is None:
            hint = did_you_mean(name, present)
            raise InputError(
                f"unknown metric '{name}'" + (f"; {hint}" if hint else "")
                + f" (the runs have: {', '.join(present)})",
                field="--metrics",
            )
        chosen.append(metric)
    return chosen


def _ratio_note(comparison: Comparison) -> str:
    spread = any(column.runs > 1 for column in comparison.columns)
    note = f"× ratios are to {comparison.baseline_label}"
    if spread:
        most = max(column.runs for column in comparison.columns)
        over = "seeds" if comparison.averaged == ("seed",) else "runs"
        note += f"; mean ± sd over the {most} {over} of each cell"
    return note + "."


def metric_rows_table(comparison: Comparison, metrics: Sequence[str]) -> CompareTable:
    """A row per metric (with its unit), a column per run."""
    headers = []
    for column in comparison.columns:
        header = column.label
        if comparison.baselines is None and comparison.is_baseline(column):
            header += " (baseline)"
        headers.append(header)
    rows = []
    for name in metrics:
        values = [v.mean for c in comparison.columns if (v := c.metrics.get(name)) is not None]
        unit = metric_unit(name, values)
        cells = tuple(_cell(comparison, column, name, unit) for column in comparison.columns)
        rows.append(Row(metric_label(name), unit.name, cells))
    title = "shock compare"
    return CompareTable(title, "metric", tuple(headers), tuple(rows), _ratio_note(comparison))


def sweep_axes(comparison: Comparison) -> list[str]:
    names: list[str] = []
    for column in comparison.columns:
        names.extend(a for a in column.axes if a not in names)
    return names


def pivot_tables(
    comparison: Comparison, metrics: Sequence[str], by: str
) -> list[CompareTable]:
    """One table per metric: a row per value of the axis `by`, a column per value of the
    other axes (the policy, ...), each cell with its ratio to its own baseline."""
    axes = sweep_axes(comparison)
    if by not in axes:
        hint = did_you_mean(by, axes)
        known = ", ".join(axes) if axes else "none (compare a sweep directory whose grid varies)"
        raise InputError(
            f"'{by}' is not an axis of the groups" + (f"; {hint}" if hint else "")
            + f" (axes: {known})",
            field="--by",
        )
    others = [a for a in axes if a != by]
    row_keys: list[str] = []
    column_keys: list[tuple[str, ...]] = []
    where: dict[tuple[str, tuple[str, ...]], RunColumn] = {}
    for column in comparison.columns:
        if by not in column.axes:
            continue  # a results document beside the sweep has no place in a pivot
        row = column.axes[by]
        key = tuple(column.axes.get(a, "") for a in others)
        if row not in row_keys:
            row_keys.append(row)
        if key not in column_keys:
            column_keys.append(key)
        where[(row, key)] = column
    row_keys.sort(key=_axis_order)
    headers = tuple(" · ".join(key) or by for key in column_keys)
    tables = []
    for name in metrics:
        values = [v.mean for c in where.values() if (v := c.metrics.get(name)) is not None]
        unit = metric_unit(name, values)
        rows = []
        for row in row_keys:
            cells = tuple(
                _cell(comparison, where[(row, key)], name, unit)
                if (row, key) in where
                else Cell("", None, None)
                for key in column_keys
            )
            rows.append(Row(row, "", cells))
        title = metric_label(name) + (f" ({unit.name})" if unit.name else "")
        tables.append(
            CompareTable(title, by, headers, tuple(rows), _ratio_note(comparison))
        )
    return tables


def _axis_order(value: str) -> tuple[int, float, str]:
    """Numbers in numeric order (rates 2, 4, 10), then words."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def comparison_tables(
    comparison: Comparison, metrics: Sequence[str] | None = None, by: str | None = None
) -> list[CompareTable]:
    chosen = select_metrics(comparison, metrics, pivot=by is not None)
    if by is not None:
        return pivot_tables(comparison, chosen, by)
    return [metric_rows_table(comparison, chosen)]
