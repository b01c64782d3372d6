"""Every figure kind `shock plot` knows: what it reads and which function draws it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from matplotlib.figure import Figure

from shock.core.errors import InputError
from shock.results.figures.catalog import DESCRIPTIONS
from shock.results.figures.distributions import jct_cdf, rho_cdf
from shock.results.figures.gantt import gantt
from shock.results.figures.load import DEFAULT_LOAD_METRIC, jct_vs_load
from shock.results.figures.options import (
    FigureOptions,
    apply_texts,
    relabel_legends,
    relabel_runs,
)
from shock.results.figures.over_time import queue, solve_time, utilization
from shock.results.figures.style import figure_style
from shock.results.figures.summary import pick_baseline, summary
from shock.results.runs import RunView, load_run
from shock.util.suggest import did_you_mean


@dataclass(frozen=True, slots=True)
class FigureKind:
    name: str
    description: str
    draw: Callable[..., Figure]
    reads_sweeps: bool = False  # inputs are sweep directories, not results documents
    needs_timeline: bool = False
    one_run: bool = False  # draws a single run (the report draws it once per run)
    takes_baseline: bool = False


KINDS: dict[str, FigureKind] = {
    kind.name: kind
    for kind in (
        FigureKind("jct-cdf", DESCRIPTIONS["jct-cdf"], jct_cdf),
        FigureKind("rho-cdf", DESCRIPTIONS["rho-cdf"], rho_cdf),
        FigureKind("summary", DESCRIPTIONS["summary"], summary, takes_baseline=True),
        FigureKind(
            "utilization", DESCRIPTIONS["utilization"], utilization, needs_timeline=True
        ),
        FigureKind("queue", DESCRIPTIONS["queue"], queue, needs_timeline=True),
        FigureKind(
            "gantt", DESCRIPTIONS["gantt"], gantt, needs_timeline=True, one_run=True
        ),
        FigureKind("solve-time", DESCRIPTIONS["solve-time"], solve_time, needs_timeline=True),
        FigureKind(
            "jct-vs-load", DESCRIPTIONS["jct-vs-load"], jct_vs_load, reads_sweeps=True
        ),
    )
}


def figure_kind(name: str) -> FigureKind:
    kind = KINDS.get(name)
    if kind is None:
        hint = did_you_mean(name, KINDS)
        raise InputError(
            f"unknown figure kind '{name}'" + (f"; {hint}" if hint else "")
            + f"; the kinds: {', '.join(KINDS)}"
        )
    return kind


def unique_labels(paths: Sequence[Path]) -> list[str]:
    """File stems, with the parent folder added where two inputs share a stem."""
    stems = [path.stem for path in paths]
    return [
        f"{path.parent.name}/{path.stem}" if stems.count(path.stem) > 1 else path.stem
        for path in paths
    ]


def load_runs(paths: Sequence[Path]) -> list[RunView]:
    return [load_run(p, label) for p, label in zip(paths, unique_labels(paths), strict=True)]


@dataclass(frozen=True, slots=True)
class DrawnFigure:
    figure: Figure
    notes: tuple[str, ...]  # flags that did not apply to this kind, labels that named nothing


def draw_kind(
    name: str,
    inputs: Sequence[Path],
    baseline: str | None = None,
    options: FigureOptions | None = None,
) -> Figure:
    """Read the inputs and draw the figure `name` of them."""
    options = options or FigureOptions()
    if baseline is not None:
        options = replace(options, baseline=baseline)
    return draw_with_notes(name, inputs, options).figure


def draw_with_notes(name: str, inputs: Sequence[Path], options: FigureOptions) -> DrawnFigure:
    """The figure, drawn in the options' look, and notes on what did not apply."""
    kind = figure_kind(name)
    if not inputs:
        raise InputError(f"the '{name}' figure needs at least one input")
    notes = []
    if options.baseline is not None and not kind.takes_baseline:
        notes.append(f"--baseline applies to the summary figure; '{name}' ignores it")
    if options.metric is not None and not kind.reads_sweeps:
        notes.append(f"--metric applies to jct-vs-load; '{name}' ignores it")
    with figure_style(options.style, options.font_size, options.style_file):
        if kind.reads_sweeps:
            for path in inputs:
                if path.is_file():
                    raise InputError(
                        f"the '{name}' figure reads sweep directories (`shock sweep --out "
                        "DIR`), not results documents",
                        path=path,
                    )
            figure = kind.draw(list(inputs), options.metric or DEFAULT_LOAD_METRIC)
            used = relabel_legends(figure, options.labels)
        else:
            for path in inputs:
                if path.is_dir():
                    raise InputError(
                        f"the '{name}' figure reads results documents (`shock run --json`); "
                        "a sweep directory suits 'jct-vs-load'",
                        path=path,
                    )
            runs = load_runs(inputs)
            # Resolved before relabelling: --baseline names a run as its file says.
            picked = pick_baseline(runs, options.baseline) if kind.takes_baseline else runs[0]
            baseline = runs.index(picked)
            runs, used = relabel_runs(runs, options.labels)
            if kind.takes_baseline:
                figure = kind.draw(runs, runs[baseline].label)
            else:
                figure = kind.draw(runs)
        apply_texts(figure, options)
    for label in options.labels:
        if label not in used:
            notes.append(f"--label {label}=...: no run or policy of this figure is named so")
    return DrawnFigure(figure, tuple(notes))
