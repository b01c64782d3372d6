"""From a sweep (`shock sweep --out DIR`): average JCT against the offered load, one line per
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
from shock.results.figures.style import new_figure, time_unit

# Load axes a sweep may vary, in order of preference, with the axis label.
LOAD_AXES = (("rate", "arrival rate (jobs/hour)"), ("jobs", "jobs in the trace"))


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


def load_series(directories: Sequence[Path]) -> tuple[str, list[LoadSeries]]:
    """The load axis's label and one series per policy, from the sweeps' finished cells."""
    samples: dict[tuple[str, float], list[float]] = defaultdict(list)
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
        samples[(row.get("policy") or "default policy", load)].append(
            _number(row, "avg_jct_s", table, line)
        )
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
    return label, series


def jct_vs_load(directories: Sequence[Path]) -> Figure:
    label, series = load_series(directories)
    unit = time_unit(max(float(s.high.max()) for s in series))
    figure = new_figure()
    axes = figure.add_subplot()
    for s in series:
        (line,) = axes.plot(s.load, s.mean / unit.seconds, marker="o", label=s.policy)
        axes.fill_between(
            s.load, s.low / unit.seconds, s.high / unit.seconds, color=line.get_color(), alpha=0.2
        )
    seeds = max(int(s.samples.max()) for s in series)
    spread = f", min–max over {seeds} runs shaded" if seeds > 1 else ""
    axes.set_title(f"Average JCT against load (mean{spread})")
    axes.set_xlabel(label)
    axes.set_ylabel(unit.label("average JCT"))
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return figure
