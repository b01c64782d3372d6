"""`shock compare RESULT...`: runs side by side, each metric with its ratio to a baseline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from shock.cli.output import duration
from shock.results.compare import (
    DEFAULT_AVERAGED,
    METRIC_LABELS,
    SHARE_METRICS,
    Comparison,
    MetricValue,
    compare,
)

_HIGHER_IS_BETTER = {"utilization", "lease_extension_share"}
# Counts of what happened, neither better nor worse when higher.
_NEUTRAL = {"jobs", "rounds", "allocations"}
# A ratio this close to 1 is shown without colour.
_SAME = 0.01


def compare_command(
    results: Annotated[
        list[Path],
        typer.Argument(
            metavar="RESULT...",
            help="Results files (`shock run --json FILE`) or sweep directories "
            "(`shock sweep --out DIR`).",
        ),
    ],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="The run the others are divided by: a label (file stem, sweep group) or a "
            "policy name. Default: the first run."
        ),
    ] = None,
    average_over: Annotated[
        list[str] | None,
        typer.Option(
            help="Sweep axes averaged over (repeatable); the other axes that vary make the "
            "columns. Default: seed."
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the comparison as JSON here ('-': stdout, no table)."),
    ] = None,
) -> None:
    """Compare runs: a column per run, every metric with its ratio to the baseline."""
    comparison = compare(results, baseline, tuple(average_over or DEFAULT_AVERAGED))
    document = json.dumps(comparison.to_json(), indent=2, allow_nan=False) + "\n"
    if json_path is not None and str(json_path) == "-":
        sys.stdout.write(document)
        return
    console = Console(emoji=False)
    console.print(comparison_table(comparison))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(document)
        console.print(f"comparison written to {json_path}")


def comparison_table(comparison: Comparison) -> Table:
    base = comparison.columns[comparison.baseline]
    table = Table(title=f"shock compare · ratios to {base.label}")
    table.add_column("metric", style="bold")
    for index, column in enumerate(comparison.columns):
        header = column.label + (" (baseline)" if index == comparison.baseline else "")
        if column.runs > 1:
            header += f"\n[dim]mean ± sd of {column.runs}[/]"
        table.add_column(header, justify="right")
    for name in comparison.metric_names:
        cells = []
        for index, column in enumerate(comparison.columns):
            value = column.metrics.get(name)
            if value is None:
                cells.append("[dim]–[/]")
                continue
            text = _value_text(name, value)
            ratio = comparison.ratio(column, name)
            if index != comparison.baseline and ratio is not None:
                text += f"  {_ratio_text(name, ratio)}"
            cells.append(text)
        table.add_row(METRIC_LABELS.get(name, name), *cells)
    return table


def _value_text(name: str, value: MetricValue) -> str:
    text = _format(name, value.mean)
    if value.stdev is not None:
        text += f" ± {_format(name, value.stdev, spread=True)}"
    return text


def _format(name: str, value: float, spread: bool = False) -> str:
    if name in SHARE_METRICS:
        return f"{value:.1%}"
    if name in ("wall_s", "solver_seconds"):
        return f"{value:.2f} s"
    if name.endswith("_s"):
        return duration(value)
    if name == "worst_ftf_rho":
        return f"{value:.2f}"
    if value == int(value) and not spread:
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _ratio_text(name: str, ratio: float) -> str:
    text = f"×{ratio:.2f}"
    if name in _NEUTRAL or abs(ratio - 1) < _SAME:
        return f"[dim]{text}[/]"
    better = ratio > 1 if name in _HIGHER_IS_BETTER else ratio < 1
    return f"[green]{text}[/]" if better else f"[red]{text}[/]"
