"""`shock plot` and `shock report`: figures and an HTML page from results documents and sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from shock.results.figures.catalog import DESCRIPTIONS

# matplotlib is imported when a figure is drawn, so other commands start as fast as before.
KIND_HELP = "; ".join(f"{name}: {text}" for name, text in DESCRIPTIONS.items())
LOAD_METRICS = "avg_jct, p99_jct, makespan, worst_rho, utilization"


def plot_command(
    kind: Annotated[str, typer.Argument(metavar="KIND", help=f"The figure: {KIND_HELP}.")],
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="INPUT...",
            help="Results documents (`shock run --json`); sweep directories for jct-vs-load.",
        ),
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Image file: .png, .svg or .pdf.")
    ],
    label: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=TEXT",
            help="Legend text for a run (file stem or policy) or a sweep's policy; repeatable.",
        ),
    ] = None,
    title: Annotated[str | None, typer.Option(help="The figure's title.")] = None,
    xlabel: Annotated[str | None, typer.Option(help="The x axis's label.")] = None,
    ylabel: Annotated[str | None, typer.Option(help="The y axis's label.")] = None,
    size: Annotated[
        str | None,
        typer.Option(metavar="W,H", help="Size in inches (default: 7,4.2; paper: 3.4,2.4)."),
    ] = None,
    font_size: Annotated[
        float | None, typer.Option(help="Base font size in points (other text scales with it).")
    ] = None,
    style: Annotated[
        str,
        typer.Option(
            metavar="screen|paper",
            help="paper: a column of a two-column paper (small serif type, legend below).",
        ),
    ] = "screen",
    style_file: Annotated[
        Path | None,
        typer.Option(help="A matplotlib style file (.mplstyle) applied over --style."),
    ] = None,
    dpi: Annotated[int, typer.Option(help="PNG resolution in dots per inch.")] = 200,
    baseline: Annotated[
        str | None,
        typer.Option(help="summary: the run the others are relative to (file stem or policy)."),
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option(help=f"jct-vs-load: the y axis, one of {LOAD_METRICS} (default avg_jct)."),
    ] = None,
) -> None:
    """Draw one figure of runs or sweeps into a PNG, SVG or PDF file (by its extension).

    Every kind takes the same flags; one that does not apply to the kind is ignored with a
    note on stderr."""
    from shock.results.figures.kinds import draw_with_notes
    from shock.results.figures.options import FigureOptions, parse_labels, parse_size
    from shock.results.figures.style import check_format, figure_style, save_figure

    check_format(output)
    options = FigureOptions(
        labels=parse_labels(label or ()),
        title=title,
        xlabel=xlabel,
        ylabel=ylabel,
        size=parse_size(size),
        font_size=font_size,
        style=style,
        style_file=style_file,
        dpi=dpi,
        baseline=baseline,
        metric=metric,
    )
    drawn = draw_with_notes(kind, inputs, options)
    with figure_style(style, font_size, style_file):
        save_figure(drawn.figure, output, dpi)
    errors = Console(emoji=False, stderr=True)
    for note in drawn.notes:
        errors.print(f"note: {note}", highlight=False)
    Console(emoji=False).print(f"{kind} figure written to {output}")


def report_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="INPUT...", help="Results documents (`shock run --json`) and sweep directories."
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML page to write.")],
    baseline: Annotated[
        str | None,
        typer.Option(help="The run ratios are taken to (file stem or policy); default: the first."),
    ] = None,
) -> None:
    """Write one self-contained HTML page: the runs' comparison table and every figure."""
    from shock.results.report import write_report

    write_report(inputs, output, baseline)
    Console(emoji=False).print(f"report written to {output}")
