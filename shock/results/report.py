"""`shock report`: one self-contained HTML page of runs (and sweeps) — the comparison table and
every figure that applies, embedded as data URIs, with inline CSS and no script or fetch."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from shock.core.errors import InputError
from shock.results.compare import compare
from shock.results.compare_tables import CompareTable, comparison_tables, sweep_axes
from shock.results.figures.gantt import gantt, gantt_end_s
from shock.results.figures.kinds import KINDS, load_runs
from shock.results.figures.load import LOAD_AXES
from shock.results.runs import RunView
from shock.results.table import comparison_html, setup_table

# Figures with many shapes are smaller as PNG than as SVG.
PNG_ABOVE_JOBS = 400
PNG_DPI = 110  # a page's figure is about as wide as the page; more only weighs it down

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.9em; margin-top: 0.8em; }
.table-wrap { max-width: 100%; overflow-x: auto; }
th { overflow-wrap: anywhere; }
caption { text-align: left; font-weight: bold; padding-bottom: 0.3em; }
.note { color: #666; font-size: 0.85em; margin: 0.3em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
table.setup td { text-align: left; font-size: 0.85em; }
thead th { background: #f0f0f0; }
.ratio { color: #666; font-size: 0.85em; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
.inputs { color: #555; font-size: 0.9em; }
"""


@dataclass(frozen=True, slots=True)
class EmbeddedFigure:
    kind: str
    caption: str
    media_type: str
    data: bytes

    def html(self) -> str:
        encoded = base64.b64encode(self.data).decode("ascii")
        alt = html.escape(self.caption)
        return (
            f'<figure class="figure" data-kind="{self.kind}">'
            f'<img alt="{alt}" src="data:{self.media_type};base64,{encoded}">'
            f"<figcaption>{alt}</figcaption></figure>"
        )


def embed(kind: str, figure: Figure, caption: str, png: bool = False) -> EmbeddedFigure:
    buffer = io.BytesIO()
    if png:
        figure.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Software": None})
        return EmbeddedFigure(kind, caption, "image/png", buffer.getvalue())
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    return EmbeddedFigure(kind, caption, "image/svg+xml", buffer.getvalue())


def report_figures(
    runs: Sequence[RunView], sweeps: Sequence[Path], baseline: RunView | None
) -> list[EmbeddedFigure]:
    """Every figure that applies: distributions and the summary across runs, the timeline
    figures for the runs that have one, and the load curve of the sweeps."""
    figures = []
    if runs:
        figures.append(embed("jct-cdf", KINDS["jct-cdf"].draw(runs), "Job completion times"))
        if any(len(run.ftf_rho) for run in runs):
            figures.append(embed("rho-cdf", KINDS["rho-cdf"].draw(runs), "Finish-time fairness"))
    if len(runs) > 1 and baseline is not None:
        figure = KINDS["summary"].draw(runs, baseline.label)
        figures.append(embed("summary", figure, f"Summary relative to {baseline.legend}"))
    with_timeline = [run for run in runs if run.timeline is not None]
    if with_timeline:
        for name, caption in (
            ("utilization", "GPU utilisation over time"),
            ("queue", "Queued and running jobs over time"),
            ("solve-time", "Allocation solve time per round"),
        ):
            figures.append(embed(name, KINDS[name].draw(with_timeline), caption))
        # The Gantt charts, one per run, share one time axis so they read side by side.
        until = max(gantt_end_s(run) for run in with_timeline)
        for run in with_timeline:
            assert run.timeline is not None
            png = len(run.timeline.jobs) > PNG_ABOVE_JOBS
            figure = gantt([run], until_s=until)
            figures.append(embed("gantt", figure, f"Jobs over time — {run.legend}", png=png))
    if sweeps:
        figure = KINDS["jct-vs-load"].draw(list(sweeps))
        figures.append(embed("jct-vs-load", figure, "Average JCT against load"))
    return figures


def build_report(inputs: Sequence[Path], baseline_name: str | None = None) -> str:
    if not inputs:
        raise InputError("the report needs at least one results document or sweep directory")
    documents = [path for path in inputs if not path.is_dir()]
    sweeps = [path for path in inputs if path.is_dir()]
    runs = load_runs(documents)
    # The tables are `shock compare`'s: documents and sweep groups, ratios to the baseline.
    comparison = compare(list(inputs), baseline_name)
    baseline = _figure_baseline(runs, comparison.columns[comparison.baseline].label)
    tables = comparison_tables(comparison)
    pivot = _load_pivot(inputs, baseline_name)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>shock report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>shock report</h1>",
        '<p class="inputs">' + ", ".join(html.escape(str(p)) for p in inputs) + "</p>",
        "<h2>Comparison</h2>",
        comparison_html(tables),
    ]
    if pivot:
        parts.append("<h2>Policies against load</h2>")
        parts.append(comparison_html(pivot))
    if runs:
        parts.append("<h2>Runs</h2>")
        parts.append(setup_table(runs))
    figures = report_figures(runs, sweeps, baseline)
    if figures:
        parts.append("<h2>Figures</h2>")
        parts.extend(figure.html() for figure in figures)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _load_pivot(inputs: Sequence[Path], baseline_name: str | None) -> list[CompareTable]:
    """For sweeps that vary the policy and a load axis: `shock compare --by LOAD`'s tables,
    each policy against the first (or the baseline policy) at the same load."""
    sweeps = [path for path in inputs if path.is_dir()]
    if not sweeps:
        return []
    comparison = compare(sweeps)
    axes = sweep_axes(comparison)
    load = next((axis for axis, _ in LOAD_AXES if axis in axes), None)
    if load is None or "policy" not in axes:
        return []
    policies = [column.axes.get("policy") for column in comparison.columns]
    baseline = baseline_name if baseline_name in policies else policies[0]
    return comparison_tables(compare(sweeps, baseline), by=load)


def _figure_baseline(runs: Sequence[RunView], label: str) -> RunView | None:
    """The summary figure's baseline: the table's, unless that is a sweep group."""
    for run in runs:
        if run.label == label:
            return run
    return runs[0] if runs else None


def write_report(inputs: Sequence[Path], output: Path, baseline_name: str | None = None) -> Path:
    if output.suffix.lower() not in (".html", ".htm"):
        raise InputError("the report is an HTML page: name it *.html", path=output)
    page = build_report(inputs, baseline_name)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page, encoding="utf-8")
    return output
