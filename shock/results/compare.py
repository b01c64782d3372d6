"""Runs side by side: every metric of each run and its ratio to a baseline run.

A run is a results document (`shock run --json FILE`) or a group of a sweep's cells
(`shock sweep --out DIR`: DIR/runs.csv): the cells that differ only in the averaged axes
(the seed, by default) make one column, their mean with its spread.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from shock.core.errors import InputError, ShockError
from shock.core.results import Metrics
from shock.results.document import load_result
from shock.util.suggest import did_you_mean

# Metrics a sweep's runs.csv may hold (a name clashing with an option has a "metric." prefix).
METRIC_NAMES = (*(f.name for f in fields(Metrics)), "unfinished_jobs")
# runs.csv columns that are neither an option nor a metric.
_SWEEP_BOOKKEEPING = ("cell", "status", "error", "wall_s")
DEFAULT_AVERAGED = ("seed",)


# How each metric reads in tables (the terminal's and the report's); others show their key.
METRIC_LABELS = {
    "jobs": "jobs measured",
    "avg_jct_s": "average JCT",
    "p50_jct_s": "p50 JCT",
    "p90_jct_s": "p90 JCT",
    "p99_jct_s": "p99 JCT",
    "makespan_s": "makespan",
    "utilization": "cluster utilisation",
    "worst_ftf_rho": "worst finish-time fairness ρ",
    "unfair_fraction": "unfair jobs (ρ > 1.05)",
    "preemptions": "preemptions",
    "lease_extension_share": "lease extensions",
    "rounds": "rounds",
    "allocations": "allocations",
    "solver_seconds": "solver time",
    "wall_s": "wall time",
    "unfinished_jobs": "unfinished jobs",
}
# Metrics that are shares of something, shown as percentages.
SHARE_METRICS = {"utilization", "unfair_fraction", "lease_extension_share"}


@dataclass(frozen=True, slots=True)
class MetricValue:
    """A metric over the runs of a column: their mean, and their spread when several."""

    mean: float
    stdev: float | None = None  # sample standard deviation; None for a single run
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> MetricValue:
        if len(values) == 1:
            return cls(values[0])
        return cls(statistics.fmean(values), statistics.stdev(values), min(values), max(values))


@dataclass(frozen=True, slots=True)
class RunColumn:
    label: str  # a document's file stem; a sweep group's axis values
    source: str  # the file or sweep directory
    policy: str  # "" where the column's runs have different policies
    runs: int  # documents or sweep cells averaged
    metrics: dict[str, MetricValue]  # metric name -> value (missing: not in the documents)
    # A sweep group's value on each axis that makes the groups (policy, rate, ...); empty for
    # a results document.
    axes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Comparison:
    columns: tuple[RunColumn, ...]
    metric_names: tuple[str, ...]  # rows, in the documents' order
    baseline: int  # index into columns: the baseline (the first one when it is per group)
    # Each column's baseline (index into columns; None: no baseline at its other axes). Set
    # when the baseline is a policy of a sweep: each group is compared with that policy's
    # group at the same values of the other axes (the same load, the same cluster).
    baselines: tuple[int | None, ...] | None = None
    baseline_name: str = ""  # what --baseline said, when the baseline is per group
    averaged: tuple[str, ...] = DEFAULT_AVERAGED  # the sweep axes a group's runs differ in

    def baseline_of(self, column: RunColumn) -> RunColumn | None:
        if self.baselines is None:
            return self.columns[self.baseline]
        index = self.baselines[self.columns.index(column)]
        return None if index is None else self.columns[index]

    def is_baseline(self, column: RunColumn) -> bool:
        return self.baseline_of(column) is column

    @property
    def baseline_label(self) -> str:
        """How tables name the baseline: its label, or the policy when it is per group."""
        if self.baselines is None:
            return self.columns[self.baseline].label
        return f"{self.baseline_name} at the same {', '.join(self.other_axes) or 'axes'}"

    @property
    def other_axes(self) -> tuple[str, ...]:
        """The axes besides the policy that make the groups, in the table's order."""
        names: list[str] = []
        for column in self.columns:
            names.extend(a for a in column.axes if a != "policy" and a not in names)
        return tuple(names)

    def ratio(self, column: RunColumn, metric: str) -> float | None:
        """The column's mean over its baseline's; None where either is missing or the
        baseline's is zero."""
        value = column.metrics.get(metric)
        reference = self.baseline_of(column)
        base = None if reference is None else reference.metrics.get(metric)
        if value is None or base is None or base.mean == 0:
            return None
        return value.mean / base.mean

    def to_json(self) -> dict[str, object]:
        return {
            "baseline": self.baseline_label,
            "metrics": list(self.metric_names),
            "runs": [
                {
                    "label": column.label,
                    "source": column.source,
                    "policy": column.policy,
                    "runs": column.runs,
                    "axes": column.axes,
                    "baseline": None if (b := self.baseline_of(column)) is None else b.label,
                    "metrics": {
                        name: {
                            "mean": value.mean,
                            "stdev": value.stdev,
                            "min": value.low,
                            "max": value.high,
                            "ratio": self.ratio(column, name),
                        }
                        for name in self.metric_names
                        if (value := column.metrics.get(name)) is not None
                    },
                }
                for column in self.columns
            ],
        }


def compare(
    sources: Sequence[str | Path],
    baseline: str | None = None,
    averaged: Sequence[str] = DEFAULT_AVERAGED,
) -> Comparison:
    """Columns for each results document or sweep directory in `sources`, against the
    baseline named `baseline` (a column's label or policy; default: the first column)."""
    if not sources:
        raise ShockError("nothing to compare: give results files (--json) or sweep directories")
    columns: list[RunColumn] = []
    for source in sources:
        path = Path(source)
        columns.extend(sweep_columns(path, averaged) if path.is_dir() else [document_column(path)])
    columns = _unique_labels(columns)
    names: list[str] = []
    for column in columns:
        names.extend(name for name in column.metrics if name not in names)
    per_group = _per_group_baselines(columns, baseline)
    if per_group is not None:
        first = next(index for index in per_group if index is not None)
        return Comparison(
            tuple(columns), tuple(names), first, per_group, str(baseline), tuple(averaged)
        )
    index = _baseline_index(columns, baseline)
    return Comparison(tuple(columns), tuple(names), index, averaged=tuple(averaged))


def document_column(path: Path) -> RunColumn:
    document = load_result(path)
    metrics = {
        name: MetricValue(value) for name, value in document.metrics.items() if value is not None
    }
    metrics["unfinished_jobs"] = MetricValue(float(document.unfinished_jobs))
    return RunColumn(document.label, str(path), document.policy, 1, metrics)


@dataclass(frozen=True, slots=True)
class _SweepRow:
    options: dict[str, str]
    metrics: dict[str, float]


def sweep_columns(directory: Path, averaged: Sequence[str] = DEFAULT_AVERAGED) -> list[RunColumn]:
    """A sweep's done cells grouped by the grid's axes (options whose values differ between
    cells), the `averaged` axes left out of the grouping: one column per group."""
    rows = _sweep_rows(directory)
    axes = [
        name
        for name in rows[0].options
        if len({row.options.get(name, "") for row in rows}) > 1
    ]
    grouping = [axis for axis in axes if axis not in averaged]
    groups: dict[tuple[str, ...], list[_SweepRow]] = {}
    for row in rows:
        groups.setdefault(tuple(axis_text(row.options.get(a, "")) for a in grouping), []).append(
            row
        )
    columns = []
    for key, members in groups.items():
        names: list[str] = []
        for row in members:
            names.extend(name for name in row.metrics if name not in names)
        metrics = {
            name: MetricValue.of([row.metrics[name] for row in members if name in row.metrics])
            for name in names
        }
        policies = {row.options.get("policy", "") for row in members}
        label = " · ".join(key) if key else directory.name
        policy = policies.pop() if len(policies) == 1 else ""
        group_axes = dict(zip(grouping, key, strict=True))
        columns.append(
            RunColumn(label, str(directory), policy, len(members), metrics, group_axes)
        )
    return columns


def axis_text(value: str) -> str:
    """An axis value as people write it: a rate of 2.0 reads 2."""
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() and "." in value else value


def _sweep_rows(directory: Path) -> list[_SweepRow]:
    path = directory / "runs.csv"
    if not path.is_file():
        raise InputError(
            "no such file: not a sweep's output directory (`shock sweep SPEC --out DIR` "
            "writes DIR/runs.csv), nor a results file",
            path=path,
        )
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            header = list(reader.fieldnames or ())
            table = list(reader)
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it ({exc})", path=path) from None
    if "status" not in header or not any(_metric_name(c) for c in header):
        raise InputError("not a sweep's runs.csv: it needs status and metric columns", path=path)
    options = [c for c in header if c not in _SWEEP_BOOKKEEPING and not _metric_name(c)]
    rows = []
    for line, record in enumerate(table, start=2):
        if record.get("status") != "done":
            continue
        metrics: dict[str, float] = {}
        for column, text in record.items():
            name = _metric_name(column or "")
            if name is None or text in (None, ""):
                continue
            try:
                value = float(text)
            except ValueError:
                raise InputError(
                    f"not a number: {text!r}", path=path, line=line, field=column
                ) from None
            if math.isfinite(value):
                metrics[name] = value
        rows.append(_SweepRow({name: record.get(name) or "" for name in options}, metrics))
    if not rows:
        raise InputError("no cell is done yet (every row's status is not 'done')", path=path)
    return rows


def _metric_name(column: str) -> str | None:
    name = column.removeprefix("metric.")
    return name if name in METRIC_NAMES else None


def _unique_labels(columns: Iterable[RunColumn]) -> list[RunColumn]:
    """Columns whose labels clash (two run.json files) are told apart by their source."""
    columns = list(columns)
    counts: dict[str, int] = {}
    for column in columns:
        counts[column.label] = counts.get(column.label, 0) + 1
    unique = []
    for column in columns:
        if counts[column.label] > 1:
            parent = Path(column.source).resolve().parent.name
            label = f"{parent}/{column.label}" if parent else column.source
            column = RunColumn(
                label, column.source, column.policy, column.runs, column.metrics, column.axes
            )
        unique.append(column)
    return unique


def _per_group_baselines(
    columns: Sequence[RunColumn], name: str | None
) -> tuple[int | None, ...] | None:
    """Where `name` is the policy of several sweep groups (and no column's label), each
    group's baseline: the group of that policy from the same sweep whose other axes match."""
    if name is None or any(column.label == name for column in columns):
        return None
    matching = [i for i, column in enumerate(columns) if column.policy == name]
    if len(matching) < 2 or any("policy" not in columns[i].axes for i in matching):
        return None

    def others(column: RunColumn) -> tuple[str, tuple[tuple[str, str], ...]]:
        return column.source, tuple(sorted((a, v) for a, v in column.axes.items() if a != "policy"))

    by_others = {others(columns[i]): i for i in matching}
    return tuple(by_others.get(others(column)) for column in columns)


def _baseline_index(columns: Sequence[RunColumn], name: str | None) -> int:
    if name is None:
        return 0
    for index, column in enumerate(columns):
        if column.label == name:
            return index
    by_policy = [index for index, column in enumerate(columns) if column.policy == name]
    if len(by_policy) == 1:
        return by_policy[0]
    labels = ", ".join(column.label for column in columns)
    if by_policy:
        raise ShockError(
            f"--baseline {name}: several runs have that policy; name one of: {labels}"
        )
    names = [c.label for c in columns] + [c.policy for c in columns if c.policy]
    hint = did_you_mean(name, names)
    raise ShockError(
        f"--baseline {name}: no run has that label or policy; "
        + (f"{hint} " if hint else "")
        + f"runs: {labels}"
    )
