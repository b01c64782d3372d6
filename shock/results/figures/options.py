"""The flags every `shock plot` kind takes: legend labels, title, axis labels, size, fonts,
look, resolution, and the flags of one kind (which the others ignore with a note)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from matplotlib.figure import Figure

from shock.core.errors import InputError
from shock.results.figures.style import DEFAULT_DPI
from shock.results.runs import RunView


@dataclass(frozen=True, slots=True)
class FigureOptions:
    labels: Mapping[str, str] = field(default_factory=dict)  # run or policy name -> legend
    title: str | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    size: tuple[float, float] | None = None  # inches
    font_size: float | None = None
    style: str = "screen"
    style_file: Path | None = None
    dpi: int = DEFAULT_DPI
    baseline: str | None = None  # summary
    metric: str | None = None  # jct-vs-load


def parse_labels(items: Sequence[str]) -> dict[str, str]:
    """`--label NAME=TEXT` (repeatable)."""
    labels: dict[str, str] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"'{item}' is not NAME=TEXT", field="--label")
        labels[name.strip()] = text.strip()
    return labels


def parse_size(text: str | None) -> tuple[float, float] | None:
    """`--size W,H` in inches."""
    if text is None:
        return None
    parts = text.replace("x", ",").split(",")
    try:
        width, height = (float(p) for p in parts)
    except ValueError:
        width = height = 0.0
    if not (0 < width <= 100 and 0 < height <= 100):
        raise InputError(f"'{text}' is not W,H in inches (e.g. 3.4,2.4)", field="--size")
    return width, height


def relabel_runs(
    runs: Sequence[RunView], labels: Mapping[str, str]
) -> tuple[list[RunView], set[str]]:
    """The runs with their legends replaced where a `--label` names them (by file stem,
    legend, file name or policy), and the names that matched."""
    used: set[str] = set()
    relabelled = []
    for run in runs:
        for name in (run.label, run.legend, run.path.name, run.policy):
            if name in labels:
                used.add(name)
                run = replace(run, label=labels[name], policy="")
                break
        relabelled.append(run)
    return relabelled, used


def relabel_legends(figure: Figure, labels: Mapping[str, str]) -> set[str]:
    """Legend entries (a sweep's policies) renamed in place; the names that matched."""
    used: set[str] = set()
    legends = [a.get_legend() for a in figure.axes] + list(figure.legends)
    for legend in legends:
        if legend is None:
            continue
        for text in legend.get_texts():
            name = text.get_text()
            if name in labels:
                text.set_text(labels[name])
                used.add(name)
    return used


def apply_texts(figure: Figure, options: FigureOptions) -> None:
    """--title, --xlabel, --ylabel and --size on a drawn figure."""
    axes = figure.axes
    if options.title is not None:
        if len(axes) == 1:
            axes[0].set_title(options.title)
        else:
            figure.suptitle(options.title)
    if options.xlabel is not None:
        for ax in axes:
            if ax.get_xlabel():
                ax.set_xlabel(options.xlabel)
    if options.ylabel is not None:
        for ax in axes:
            if ax.get_ylabel():
                ax.set_ylabel(options.ylabel)
    if options.size is not None:
        figure.set_size_inches(*options.size)
