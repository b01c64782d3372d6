"""`shock run --plot DIR`: every figure that applies to one run, written as PNG files."""

from __future__ import annotations

from pathlib import Path

from shock.results.figures.kinds import KINDS
from shock.results.figures.style import save_figure
from shock.results.runs import RunView, run_from_document


def run_figure_kinds(run: RunView) -> list[str]:
    """The kinds that draw a single run: the distributions, and the timeline's when it has one."""
    return [
        kind.name
        for kind in KINDS.values()
        if not kind.reads_sweeps
        and not kind.takes_baseline
        and (run.timeline is not None or not kind.needs_timeline)
        and (kind.name != "rho-cdf" or bool(len(run.ftf_rho)))
        and len(run.jct_s) > 0
    ]


def write_run_figures(document: dict[str, object], directory: Path, label: str) -> list[Path]:
    run = run_from_document(document, directory / f"{label}.json", label)
    directory.mkdir(parents=True, exist_ok=True)
    return [
        save_figure(KINDS[name].draw([run]), directory / f"{name}.png")
        for name in run_figure_kinds(run)
    ]
