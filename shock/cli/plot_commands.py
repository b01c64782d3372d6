"""`shock plot` and `shock report`: figures and an HTML page from results documents and sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from shock.results.figures.catalog import DESCRIPTIONS

# matplotlib is imported when a figure is drawn, so other commands start as fast as before.
KIND_HELP = "; ".join(f"{name}: {text}" for name, text in DESCRIPTIONS.items())


def plot_command(
    kind: Annotated[str, typer.Argument(metavar="KIND", help=f"The figure: {KIND_HELP}.")],
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="INPUT...",
            help="Results documents (`shock run --json`); sweep directories for jct-vs-load.",
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Image file: .png or .svg.")],
    baseline: Annotated[
        str | None,
        typer.Option(help="summary: the run the others are relative to (file stem or policy)."),
    ] = None,
) -> None:
    """Draw one figure of runs or sweeps into a PNG or SVG file."""
    from shock.results.figures.kinds import draw_kind
    from shock.results.figures.style import check_format, save_figure

    check_format(output)
    figure = draw_kind(kind, inputs, baseline)
    save_figure(figure, output)
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
