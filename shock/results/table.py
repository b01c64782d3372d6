"""The HTML report's tables: `shock compare`'s comparison (every metric per run, its ratio to
the baseline run) and how each run was made."""

from __future__ import annotations

import html
from collections.abc import Sequence

from shock.results.compare import (
    METRIC_LABELS,
    SHARE_METRICS,
    Comparison,
    MetricValue,
    readable_duration,
)
from shock.results.runs import SETUP_KEYS, RunView

SECONDS = {"wall_s", "solver_seconds"}
# Counts of what happened: a ratio would say nothing.
NO_RATIO = {"jobs", "rounds", "allocations", "unfinished_jobs"}


def metric_text(name: str, value: float) -> str:
    if name in SHARE_METRICS:
        return f"{value:.1%}"
    if name in SECONDS:
        return f"{value:.2f} s"
    if name.endswith("_s"):
        return readable_duration(value)
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}"


def _cell(name: str, value: MetricValue) -> str:
    text = metric_text(name, value.mean)
    if value.stdev is not None:
        text += f" ± {metric_text(name, value.stdev)}"
    return html.escape(text)


def comparison_table(comparison: Comparison) -> str:
    """One row per metric, one column per run (a sweep's group: mean ± sd over its cells)."""
    base = comparison.columns[comparison.baseline]
    head = ["<th>metric</th>"]
    for index, column in enumerate(comparison.columns):
        label = html.escape(column.label)
        if index == comparison.baseline:
            label += " (baseline)"
        if column.runs > 1:
            label += f'<br><span class="ratio">mean ± sd of {column.runs}</span>'
        head.append(f"<th>{label}</th>")
    rows = []
    for name in comparison.metric_names:
        cells = [f"<td>{html.escape(METRIC_LABELS.get(name, name))}</td>"]
        for index, column in enumerate(comparison.columns):
            value = column.metrics.get(name)
            if value is None:
                cells.append("<td>—</td>")
                continue
            text = _cell(name, value)
            ratio = comparison.ratio(column, name)
            if index != comparison.baseline and ratio is not None and name not in NO_RATIO:
                text += f' <span class="ratio">×{ratio:.2f}</span>'
            cells.append(f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"Ratios (×) are to {html.escape(base.label)}."
    return (
        f'<table class="comparison"><caption>{caption}</caption>'
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def setup_table(runs: Sequence[RunView]) -> str:
    """How each run was made, one row per run."""
    head = "".join(f"<th>{key}</th>" for key in SETUP_KEYS)
    rows = "".join(
        f"<tr><td>{html.escape(run.legend)}</td>"
        + "".join(f"<td>{html.escape(run.setup.get(key, '—'))}</td>" for key in SETUP_KEYS)
        + "</tr>"
        for run in runs
    )
    return (
        f'<table class="setup"><thead><tr><th>run</th>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )
