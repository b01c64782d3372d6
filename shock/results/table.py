"""The comparison table of the HTML report: each run's metrics, and each one's ratio to the
baseline run."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from shock.results.runs import SETUP_KEYS, RunView


def _hours(value: float) -> str:
    return f"{value / 3600:.2f} h"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _plain(value: float) -> str:
    return f"{value:.3g}" if value != int(value) else f"{int(value)}"


# (metrics key, column heading, format)
COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("jobs", "jobs", _plain),
    ("avg_jct_s", "average JCT", _hours),
    ("p50_jct_s", "p50 JCT", _hours),
    ("p90_jct_s", "p90 JCT", _hours),
    ("p99_jct_s", "p99 JCT", _hours),
    ("makespan_s", "makespan", _hours),
    ("utilization", "utilisation", _percent),
    ("worst_ftf_rho", "worst ρ", _plain),
    ("unfair_fraction", "unfair share", _percent),
    ("preemptions", "preemptions", _plain),
)


def metric_ratio(run: RunView, baseline: RunView, key: str) -> float | None:
    value, reference = run.metrics.get(key), baseline.metrics.get(key)
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


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


def comparison_table(runs: Sequence[RunView], baseline: RunView) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for _, name, _ in COLUMNS)
    rows = []
    for run in runs:
        cells = [f"<td>{html.escape(run.legend)}</td>"]
        for key, _, show in COLUMNS:
            value = run.metrics.get(key)
            text = "—" if value is None else show(value)
            ratio = metric_ratio(run, baseline, key)
            if run is not baseline and ratio is not None and key != "jobs":
                text += f' <span class="ratio">×{ratio:.2f}</span>'
            cells.append(f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"Ratios (×) are to {html.escape(baseline.legend)}."
    return (
        f'<table class="comparison"><caption>{caption}</caption>'
        f"<thead><tr><th>run</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
