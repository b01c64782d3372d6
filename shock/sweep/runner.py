"""Run a sweep's cells in local worker processes and gather one table of their results."""

from __future__ import annotations

import csv
import functools
import json
import multiprocessing
import os
import time
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from shock.core.errors import ShockError, ShockWarning
from shock.sweep.cells import Cell, make_cell
from shock.sweep.index import (
    IndexEntry,
    append_index,
    read_index,
    still_valid,
    table_summary,
)
from shock.sweep.spec import GENERATE_OPTIONS, SweepSpec

DONE = "done"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class CellOutcome:
    key: str
    status: str  # DONE or FAILED
    error: str = ""
    wall_s: float = 0.0
    document: dict[str, object] | None = None  # the results document of a done cell


@dataclass(slots=True)
class SweepSummary:
    outcomes: list[CellOutcome] = field(default_factory=list)
    ran: int = 0  # cells run by this invocation (the others were done before)
    skipped: int = 0

    @property
    def failed(self) -> int:
        return sum(outcome.status == FAILED for outcome in self.outcomes)


def cell_path(out_dir: Path, key: str) -> Path:
    return out_dir / "cells" / f"{key}.json"


def write_atomically(path: Path, text: str) -> None:
    """Write then rename, so an interrupted sweep never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def generate_trace(
    options: dict[str, object], throughputs: str | None, destination: Path
) -> None:
    """`shock trace generate` with a cell's workload options, written to destination."""
    from shock.core.plugins import default_registry
    from shock.core.throughputs import default_throughputs, load_throughputs
    from shock.core.trace import write_trace
    from shock.traces.generator import WorkloadConfig, generate_jobs

    table = load_throughputs(throughputs) if throughputs else default_throughputs()
    config = WorkloadConfig(
        num_jobs=int(options.get("jobs", 100)),  # type: ignore[call-overload]
        jobs_per_hour=options.get("rate"),  # type: ignore[arg-type]
        seed=int(options.get("seed", 0)),  # type: ignore[call-overload]
        multi_gpu=bool(options.get("multi-gpu", False)),
        multi_priority=bool(options.get("multi-priority", False)),
        fixed_duration_s=options.get("fixed-duration"),  # type: ignore[arg-type]
    )
    if config.num_jobs < 0 or (config.jobs_per_hour or 0) < 0:
        raise ValueError("generate: jobs and rate must be >= 0")
    jobs = generate_jobs(config, table)
    destination.parent.mkdir(parents=True, exist_ok=True)
    # Cells sharing a workload may generate it at once: each writes its own file, then renames.
    temporary = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    write_trace(jobs, temporary, default_registry(), "gavel")
    os.replace(temporary, destination)


def _generate_trace(cell: Cell) -> None:
    """The cell's generated trace, unless already written."""
    assert cell.generated_trace is not None and cell.spec.generate is not None
    if cell.generated_trace.exists():
        return
    throughputs = cell.spec.run.get("throughputs")
    generate_trace(cell.spec.generate, str(throughputs) if throughputs else None,
                   cell.generated_trace)


def write_cell_document(out_dir: Path, key: str, document: dict[str, object]) -> None:
    from shock.core.results import document_text

    write_atomically(cell_path(out_dir, key), document_text(document))


def failure_message(exc: BaseException) -> str:
    """A user's error as it reads; anything else with its type."""
    return str(exc) if isinstance(exc, ShockError) else f"{type(exc).__name__}: {exc}"


def run_cell(cell: Cell, out_dir: Path) -> CellOutcome:
    """Run one cell (in a worker process); any error becomes a failed outcome."""
    from shock.engine.runner import run

    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # The sweep's check told the user its warnings once, before any cell ran.
            warnings.simplefilter("ignore", ShockWarning)
            if cell.generated_trace is not None:
                _generate_trace(cell)
            result = run(cell.run_options())
        document = result.to_document()
        write_cell_document(out_dir, cell.key, document)
    except Exception as exc:  # a cell's failure is recorded, never fatal
        return CellOutcome(cell.key, FAILED, failure_message(exc), time.perf_counter() - started)
    return CellOutcome(cell.key, DONE, "", time.perf_counter() - started, document)


def _done_before(
    out_dir: Path, key: str, index: dict[str, IndexEntry]
) -> dict[str, object] | None:
    """What runs.csv needs of a cell an earlier sweep finished: from the index while its
    document is unchanged, else from the document (if it parses; then it joins the index)."""
    path = cell_path(out_dir, key)
    entry = index.get(key)
    if entry is not None and still_valid(entry, path):
        return entry.summary
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or "metrics" not in document:
        return None
    append_index(out_dir, key, path, document)
    return table_summary(document)


def _recorded_wall_s(document: dict[str, object]) -> float:
    metrics = document.get("metrics")
    value = metrics.get("wall_s") if isinstance(metrics, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


Progress = Callable[[CellOutcome], None]
# Runs the cells not done before and yields their outcomes as they finish (and, for a done
# cell, has written its document): the local process pool, or Ray (ray_pool.py).
Dispatch = Callable[[list[Cell], Path], Iterable[CellOutcome]]


def plan_cells(spec: SweepSpec, out_dir: Path) -> list[Cell]:
    return [make_cell(cell_spec, spec.path, out_dir) for cell_spec in spec.cells()]


def run_sweep(
    spec: SweepSpec,
    cells: list[Cell],
    out_dir: Path,
    parallel: int,
    on_outcome: Progress | None = None,
    dispatch: Dispatch | None = None,
) -> SweepSummary:
    """Run every cell not done before; write runs.csv (and runs.parquet if pyarrow is here)."""
    summary = SweepSummary()
    by_key: dict[str, CellOutcome] = {}
    pending: list[Cell] = []
    pending_keys: set[str] = set()
    index = read_index(out_dir)
    for cell in cells:
        if cell.key in by_key or cell.key in pending_keys:
            continue  # the same cell twice in a grid runs once
        document = _done_before(out_dir, cell.key, index)
        if document is None:
            pending.append(cell)
            pending_keys.add(cell.key)
        else:
            by_key[cell.key] = CellOutcome(
                cell.key, DONE, "", _recorded_wall_s(document), document
            )
            summary.skipped += 1
            if on_outcome is not None:
                on_outcome(by_key[cell.key])
    out_dir.mkdir(parents=True, exist_ok=True)
    if dispatch is None:
        dispatch = functools.partial(_run_pending, parallel=parallel)
    for outcome in dispatch(pending, out_dir) if pending else ():
        by_key[outcome.key] = outcome
        summary.ran += 1
        if outcome.status == DONE and outcome.document is not None:
            append_index(out_dir, outcome.key, cell_path(out_dir, outcome.key), outcome.document)
        if on_outcome is not None:
            on_outcome(outcome)
    summary.outcomes = [by_key[cell.key] for cell in cells]
    write_tables(spec, cells, summary.outcomes, out_dir)
    return summary


def _run_pending(cells: list[Cell], out_dir: Path, parallel: int) -> Iterable[CellOutcome]:
    # Spawned workers: no state forked from the parent (plugin registries, solver handles).
    context = multiprocessing.get_context("spawn")
    workers = max(1, min(parallel, len(cells)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        futures: dict[Future[CellOutcome], Cell] = {
            pool.submit(run_cell, cell, out_dir): cell for cell in cells
        }
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as exc:  # e.g. a worker that died
                yield CellOutcome(futures[future].key, FAILED, f"{type(exc).__name__}: {exc}")
    finally:
        # On Ctrl-C the queued cells are dropped, not run: the next sweep resumes them.
        pool.shutdown(wait=True, cancel_futures=True)


def _option_columns(spec: SweepSpec) -> list[str]:
    names = list(spec.base) + [n for n in spec.grid if n not in spec.base]
    if spec.generate is not None:
        names += [n for n in spec.generate if n not in names]
        names += [n for n in spec.grid if n in GENERATE_OPTIONS and n not in names]
    return names


def _cell_value(value: object) -> object:
    if isinstance(value, tuple | list):
        return ";".join(str(item) for item in value)
    return value


def table_rows(
    spec: SweepSpec, cells: list[Cell], outcomes: list[CellOutcome]
) -> tuple[list[str], list[dict[str, object]]]:
    """One row per cell: its options, every metric, status, error and wall_s."""
    option_columns = _option_columns(spec)
    metric_columns: list[str] = []
    for outcome in outcomes:
        metrics = (outcome.document or {}).get("metrics")
        if isinstance(metrics, dict):
            metric_columns = [name for name in metrics if name != "wall_s"]
            metric_columns.append("unfinished_jobs")
            break
    # A metric named like an option (jobs: the trace's count vs [generate] jobs) gets a prefix.
    headers = {
        name: f"metric.{name}" if name in option_columns else name for name in metric_columns
    }
    rows = []
    for cell, outcome in zip(cells, outcomes, strict=True):
        row: dict[str, object] = {"cell": cell.key}
        options = {**(cell.spec.generate or {}), **cell.spec.run}
        for name in option_columns:
            row[name] = _cell_value(options.get(name))
        document = outcome.document or {}
        metrics = document.get("metrics")
        for name in metric_columns:
            if name == "unfinished_jobs":
                row[headers[name]] = document.get(name)
            else:
                value = metrics.get(name) if isinstance(metrics, dict) else None
                row[headers[name]] = value
        row.update(status=outcome.status, error=outcome.error, wall_s=round(outcome.wall_s, 6))
        rows.append(row)
    columns = ["cell", *option_columns, *headers.values(), "status", "error", "wall_s"]
    return columns, rows


def write_tables(
    spec: SweepSpec, cells: list[Cell], outcomes: list[CellOutcome], out_dir: Path
) -> None:
    columns, rows = table_rows(spec, cells, outcomes)
    csv_path = out_dir / "runs.csv"
    temporary = csv_path.with_name(f".{csv_path.name}.tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(temporary, csv_path)
    _write_parquet(columns, rows, out_dir / "runs.parquet")


def _write_parquet(columns: list[str], rows: list[dict[str, object]], path: Path) -> None:
    try:
        import pyarrow as pa  # type: ignore[import-not-found, unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return  # parquet is a bonus where pyarrow happens to be installed
    table = pa.table({name: [row.get(name) for row in rows] for name in columns})
    temporary = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, temporary)
    os.replace(temporary, path)
