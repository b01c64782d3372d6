"""`shock compare RESULT...`: runs side by side, each metric with its ratio to a baseline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from shock.core.errors import InputError
from shock.results.compare import DEFAULT_AVERAGED, compare
from shock.results.compare_tables import CompareTable, comparison_tables, select_metrics
from shock.results.table_formats import (
    latex,
    markdown,
    row_label,
    split_to_width,
    table_width,
    tidy_csv,
)


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
            help="What the others are divided by: a label (file stem, sweep group) or a "
            "policy. A policy of a sweep is the baseline of each group at the same values of "
            "the other axes (the same rate, the same cluster). Default: the first run."
        ),
    ] = None,
    average_over: Annotated[
        list[str] | None,
        typer.Option(
            help="Sweep axes averaged over (repeatable); the other axes that vary make the "
            "groups. Default: seed."
        ),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            help="The metrics to show, comma-separated (e.g. avg_jct_s,p99_jct_s). Default: "
            "all; with --by: average and p99 JCT, makespan, worst ρ, utilisation."
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="AXIS",
            help="Pivot a sweep by one axis: a table per metric, a row per value of AXIS "
            "(e.g. rate) and a column per value of the other axes (e.g. policy).",
        ),
    ] = None,
    csv_out: Annotated[
        bool, typer.Option("--csv", help="Print a tidy CSV of the raw numbers instead.")
    ] = False,
    markdown_out: Annotated[
        bool, typer.Option("--markdown", help="Print the tables as Markdown instead.")
    ] = False,
    latex_out: Annotated[
        bool, typer.Option("--latex", help="Print the tables as LaTeX (booktabs) instead.")
    ] = False,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the comparison as JSON here ('-': stdout, no table)."),
    ] = None,
) -> None:
    """Compare runs: every metric with its ratio to the baseline, as tables that fit the
    terminal, or as CSV, Markdown or LaTeX for a paper."""
    if csv_out + markdown_out + latex_out + (str(json_path) == "-") > 1:
        raise InputError("choose one of --csv, --markdown, --latex and --json -")
    averaged = tuple(average_over or DEFAULT_AVERAGED)
    if by is not None and baseline is None:
        # A pivot compares policies within each row: the first policy is each row's baseline.
        baseline = compare(results, None, averaged).columns[0].axes.get("policy")
    comparison = compare(results, baseline, averaged)
    wanted = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    tables = comparison_tables(comparison, wanted, by)
    document = json.dumps(comparison.to_json(), indent=2, allow_nan=False) + "\n"
    if json_path is not None and str(json_path) == "-":
        sys.stdout.write(document)
        return
    if csv_out:
        sys.stdout.write(tidy_csv(comparison, select_metrics(comparison, wanted, by is not None)))
    elif markdown_out:
        sys.stdout.write(markdown(tables))
    elif latex_out:
        sys.stdout.write(latex(tables))
    else:
        print_tables(Console(emoji=False), tables)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(document)
        Console(emoji=False, stderr=True).print(f"comparison written to {json_path}")


def print_tables(console: Console, tables: list[CompareTable]) -> None:
    """Each table in parts that fit the terminal, and how to see it whole when split."""
    width = console.width
    widest = 0
    for table in tables:
        parts = split_to_width(table, width)
        for number, part in enumerate(parts, start=1):
            suffix = f" (part {number} of {len(parts)})" if len(parts) > 1 else ""
            console.print(rich_table(part, suffix))
        console.print(Text(table.note, style="dim"))
        if len(parts) > 1:
            widest = max(widest, table_width(table))
    if widest:
        console.print(
            Text(
                f"Tables were split to fit {width} columns; to see them whole, widen the "
                f"terminal to {widest} columns (or COLUMNS={widest}), pivot a sweep with "
                "--by AXIS, pick rows with --metrics, or export with --csv/--markdown.",
                style="dim",
            )
        )


def rich_table(table: CompareTable, suffix: str = "") -> Table:
    out = Table(
        title=table.title + suffix,
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        show_edge=False,
    )
    out.add_column(table.corner, style="bold", no_wrap=True)
    for header in table.headers:
        out.add_column(header, justify="right", no_wrap=True)
    for row in table.rows:
        cells = []
        for cell in row.cells:
            text = Text(cell.value or "–", style="" if cell.value else "dim")
            if cell.ratio_text:
                style = {True: "green", False: "red", None: "dim"}[cell.better]
                text.append("  ").append(cell.ratio_text, style=style)
            cells.append(text)
        out.add_row(row_label(row), *cells)
    return out

