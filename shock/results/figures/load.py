"""From a sweep (`shock sweep --out DIR`): a metric against the offered load, one line per
policy, the mean over the seeds with their spread (min to max) shaded."""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from shock.core.errors import InputError
from shock.results.figures.style import new_figure, place_legend, time_unit
from shock.util.suggest import did_you_mean

# Load axes a sweep may vary, in order of preference, with the axis label.
LOAD_AXES = (("rate", "arrival rate (jobs/hour)"), ("jobs", "jobs in the trace"))


@dataclass(frozen=True, slots=True)
class LoadMetric:
    column: str  # in runs.csv
    label: str  # the y axis's quantity
    kind: str  # "duration", "share" or "number": how its axis is scaled


# `jct-vs-load --metric NAME`: what the y axis shows.
LOAD_METRICS = {
    "avg_jct": LoadMetric("avg_jct_s", "average JCT", "duration"),
    "p99_jct": LoadMetric("p99_jct_s", "p99 JCT", "duration"),
    "makespan": LoadMetric("makespan_s", "makespan", "duration"),
    "worst_rho": LoadMetric("worst_ftf_rho", "worst finish-time fairness ρ", "number"),
    "utilization": LoadMetric("utilization", "cluster utilisation (%)", "share"),
}
DEFAULT_LOAD_METRIC = "avg_jct"


def load_metric(name: str) -> LoadMetric:
    found = LOAD_METRICS.get(name)
    if found is None:
        hint = did_you_mean(name, LOAD_METRICS)
        raise InputError(
            f"'{name}' is not a load metric" + (f"; {hint}" if hint else "")
            + f" (the metrics: {', '.join(LOAD_METRICS)})",
            field="--metric",
        )
    return found


@dataclass(frozen=True, slots=True)
class LoadSeries:
    policy: str
    load: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    samples: np.ndarray  # runs averaged at each load


def read_sweep_rows(directory: Path) -> list[dict[str, str]]:
    table = directory / "runs.csv"
    if not directory.is_dir():
        raise InputError("expected a sweep directory (`shock sweep --out DIR`)", path=directory)
    if not table.is_file():
        raise InputError(
            "no runs.csv here: is this a `shock sweep` output directory?", path=directory
        )
    with table.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _number(row: dict[str, str], column: str, table: Path, line: int) -> float:
    try:
        return float(row[column])
    except (KeyError, ValueError):
        raise InputError(
            f"expected a number, got {row.get(column)!r}", path=table, line=line, field=column
        ) from None


@dataclass(frozen=True, slots=True)
class LoadCurves:
    axis_label: str
    series: list[LoadSeries]
    seeds: int  # the most distinct seeds averaged at one point (1: no spread)


def load_curves(directories: Sequence[Path], metric: str = DEFAULT_LOAD_METRIC) -> LoadCurves:
    """The load axis and one series per policy of `metric`, from the sweeps' finished cells."""
    column_name = load_metric(metric).column
    samples: dict[tuple[str, float], list[float]] = defaultdict(list)
    seeds: dict[tuple[str, float], set[str]] = defaultdict(set)
    rows = [(d, i + 2, row) for d in directories for i, row in enumerate(read_sweep_rows(d))]
    done = [(d, line, row) for d, line, row in rows if row.get("status", "done") == "done"]
    if not done:
        raise InputError("the sweep has no finished cells", path=directories[0] / "runs.csv")
    axis = None
    for column, label in LOAD_AXES:
        if len({row.get(column) for _, _, row in done} - {None, ""}) > 1:
            axis = (column, label)
            break
    if axis is None:
        raise InputError(
            "the sweep varies no load axis: give its grid several `rate` or `jobs` values",
            path=directories[0] / "runs.csv",
        )
    column, label = axis
    for directory, line, row in done:
        table = directory / "runs.csv"
        load = _number(row, column, table, line)
        key = (row.get("policy") or "default policy", load)
        samples[key].append(_number(row, column_name, table, line))
        seeds[key].add(row.get("seed") or "")
    series = []
    for policy in sorted({policy for policy, _ in samples}):
        loads = sorted(load for p, load in samples if p == policy)
        values = [np.array(samples[(policy, load)]) for load in loads]
        series.append(
            LoadSeries(
                policy=policy,
                load=np.array(loads),
                mean=np.array([v.mean() for v in values]),
                low=np.array([v.min() for v in values]),
                high=np.array([v.max() for v in values]),
                samples=np.array([len(v) for v in values]),
            )
        )
    return LoadCurves(label, series, max(len(s) for s in seeds.values()))


def load_series(directories: Sequence[Path]) -> tuple[str, list[LoadSeries]]:
    """Average JCT: the load axis's label and one series per policy."""
    curves = load_curves(directories)
    return curves.axis_label, curves.series


def jct_vs_load(directories: Sequence[Path], metric: str = DEFAULT_LOAD_METRIC) -> Figure:
    chosen = load_metric(metric)
    curves = load_curves(directories, metric)
    if chosen.kind == "duration":
        unit = time_unit(max(float(s.high.max()) for s in curves.series))
        scale, ylabel = unit.seconds, unit.label(chosen.label)
    else:
        scale, ylabel = (0.01, chosen.label) if chosen.kind == "share" else (1.0, chosen.label)
    figure = new_figure()
    axes = figure.add_subplot()
    for s in curves.series:
        (line,) = axes.plot(s.load, s.mean / scale, marker="o", label=s.policy)
        axes.fill_between(
            s.load, s.low / scale, s.high / scale, color=line.get_color(), alpha=0.2,
            linewidth=0,
        )
    axes.set_title(f"{chosen.label.split(' (')[0]} against load")
    axes.set_xlabel(curves.axis_label)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    spread = f"mean of {curves.seeds} seeds, min–max shaded" if curves.seeds > 1 else None
    place_legend(axes, title=spread)
    return figure
