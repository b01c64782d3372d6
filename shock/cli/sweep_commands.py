"""`shock sweep`: the product of option lists, run as cells in local processes or on Ray."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from shock.cli.progress import interactive

if TYPE_CHECKING:
    from shock.sweep.cells import Cell
    from shock.sweep.runner import CellOutcome


def progress_line(
    outcome: CellOutcome, seen: int, total: int, failed: int, elapsed_s: float
) -> str:
    """One cell's line for a log: how far the sweep is, and how this cell went."""
    from shock.sweep.runner import FAILED

    how = "failed" if outcome.status == FAILED else f"done ({outcome.wall_s:.1f} s to run)"
    return (
        f"sweep: {seen}/{total} cells ({failed} failed), {elapsed_s:,.0f} s elapsed; "
        f"cell {outcome.key} {how}\n"
    )


def sweep_command(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Sweep spec (TOML).")],
    out: Annotated[
        Path, typer.Option(help="Directory for cells/<key>.json and runs.csv.")
    ],
    parallel: Annotated[
        int | None,
        typer.Option(
            help="Worker processes (default: the machine's cores); with --ray local the Ray "
            "instance's CPUs, on a Ray cluster the most cells in flight (default: all)."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="local|auto|HOST:PORT",
            help="Run the cells as Ray tasks: on a Ray instance started here (local), on the "
            "cluster RAY_ADDRESS names or one running here (auto), or on the Ray head at "
            "HOST:PORT. Needs `pip install 'shock\\[ray]'`.",
        ),
    ] = None,
) -> None:
    """Run every combination of a spec's \\[grid] lists; cells done before are skipped."""
    # Imported here: every other command starts without the sweep's machinery.
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from shock.sweep.check import plan_checked_cells
    from shock.sweep.runner import FAILED, run_sweep
    from shock.sweep.spec import load_spec

    if parallel is not None and parallel < 1:
        raise typer.BadParameter("must be >= 1", param_hint="--parallel")
    dispatch = None
    if ray is not None:
        from shock.sweep.ray_pool import RayTarget, import_ray, run_on_ray

        target = RayTarget.parse(ray)
        import_ray()  # before any work: a missing extra is named at once

        def dispatch(cells: list[Cell], out_dir: Path) -> Iterable[CellOutcome]:
            return run_on_ray(cells, out_dir, target, parallel)

    spec = load_spec(spec_path)
    cells = plan_checked_cells(spec, out)
    total = len({cell.key for cell in cells})
    console = Console(emoji=False)
    progress = Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells · {task.fields[failed]} failed · {task.fields[left]} left"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=quiet or not interactive(sys.stdout),
    )
    # In a log or a pipe: a plain line per cell on stderr instead of the bar.
    lines = not quiet and not interactive(sys.stdout)
    task = progress.add_task("sweep", total=total, failed=0, left=total)
    counts = {"seen": 0, "failed": 0}
    started = time.monotonic()

    def advance(outcome: CellOutcome) -> None:
        counts["seen"] += 1
        counts["failed"] += outcome.status == FAILED
        progress.update(task, advance=1, failed=counts["failed"], left=total - counts["seen"])
        if lines:
            sys.stderr.write(progress_line(outcome, counts["seen"], total, counts["failed"],
                                           time.monotonic() - started))
            sys.stderr.flush()

    with progress:
        summary = run_sweep(
            spec, cells, out, parallel or os.cpu_count() or 1, advance, dispatch
        )
    console.print(
        f"{total} cells: {summary.ran} run, {summary.skipped} done before, "
        f"{summary.failed} failed; table in {out / 'runs.csv'}",
        highlight=False,
    )
    # The same error in many cells is printed once, with the cells it stopped.
    failures: dict[str, list[str]] = {}
    for outcome in summary.outcomes:
        if outcome.status == FAILED and outcome.key not in failures.get(outcome.error, []):
            failures.setdefault(outcome.error, []).append(outcome.key)
    for error, keys in failures.items():
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        console.print(
            f"[red]failed[/] {len(keys)} cell{'s' if len(keys) > 1 else ''} ({shown}): "
            f"{escape(error)}",
            highlight=False,
            soft_wrap=True,
        )
    if failures:
        raise typer.Exit(1)
