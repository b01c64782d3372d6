"""Check a sweep before its first cell runs: every cell's names, cluster, policy options and
files, so a typo in one list fails at once rather than after the good cells ran.

Each distinct problem is reported once, with the grid values the failing cells share.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import ShockError, ShockWarning
from shock.core.plugins import PluginRegistry, default_registry
from shock.core.trace import Trace, read_trace
from shock.engine.runner import build_request, bundled_trace_path
from shock.sweep.cells import Cell, make_cell
from shock.sweep.spec import CellSpec, SweepSpec


@dataclass(frozen=True, slots=True)
class CellProblem:
    message: str
    cells: tuple[CellSpec, ...]  # the cells it stops


class SweepCheckError(ShockError):
    """Cells of a sweep that cannot run; nothing was run."""

    def __init__(self, problems: list[CellProblem], total: int, grid: list[str]) -> None:
        self.problems = problems
        lines = [
            f"{sum(len(p.cells) for p in problems)} of {total} cells cannot run, so none was "
            "run:"
        ]
        for problem in problems:
            lines.append(f"  {_where(problem.cells, total, grid)}: {problem.message}")
        super().__init__("\n".join(lines))


def _where(cells: tuple[CellSpec, ...], total: int, grid: list[str]) -> str:
    """The grid values every failing cell shares ("policy=fiffo"), else how many cells."""
    shared = []
    for name in grid:
        values = {_text(_option(cell, name)) for cell in cells}
        if len(values) == 1:
            shared.append(f"{name}={values.pop()}")
    count = f"{len(cells)} cell{'s' if len(cells) > 1 else ''}"
    return f"{count} ({', '.join(shared)})" if shared and len(cells) < total else count


def _text(value: object) -> str:
    return ";".join(map(str, value)) if isinstance(value, tuple | list) else str(value)


def _option(cell: CellSpec, name: str) -> object:
    if name in cell.run:
        return cell.run[name]
    return (cell.generate or {}).get(name)


def _check_generate(options: dict[str, object]) -> None:
    jobs, rate = options.get("jobs", 100), options.get("rate")
    if isinstance(jobs, int) and jobs < 0:
        raise ShockError(f"generate: jobs must be >= 0, got {jobs}")
    if isinstance(rate, int | float) and rate < 0:
        raise ShockError(f"generate: rate must be >= 0, got {rate}")


class _Traces:
    """Each trace file read once (a sweep's cells mostly share one)."""

    def __init__(self, registry: PluginRegistry) -> None:
        self._registry = registry
        self._read: dict[str, Trace | ShockError] = {}

    def get(self, path: str) -> Trace:
        if path not in self._read:
            try:
                self._read[path] = read_trace(path, self._registry)
            except ShockError as exc:
                self._read[path] = exc
        found = self._read[path]
        if isinstance(found, ShockError):
            raise found
        return found


def plan_checked_cells(spec: SweepSpec, out_dir: Path) -> list[Cell]:
    """The sweep's cells, each checked as `shock run` would check its options (without
    running it); a `SweepCheckError` listing every distinct problem otherwise."""
    registry = default_registry()
    traces = _Traces(registry)
    # A generated trace is written when its cell runs; until then an empty Gavel trace
    # stands in (the options are checked, the workload's own values above).
    placeholder = Trace(jobs=(), source="<generated>", format="gavel")
    cells: list[Cell] = []
    problems: dict[str, list[CellSpec]] = {}
    notices: dict[str, None] = {}  # each distinct warning once, in order
    specs = spec.cells()
    for cell_spec in specs:
        try:
            cell = make_cell(cell_spec, spec.path, out_dir)
            if cell_spec.generate is not None:
                _check_generate(cell_spec.generate)
                trace = placeholder
            else:
                trace = traces.get(str(cell_spec.run.get("trace") or bundled_trace_path()))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ShockWarning)
                build_request(cell.run_options(), registry, trace)
            notices.update((str(w.message), None) for w in caught)
        except ShockError as exc:
            problems.setdefault(str(exc), []).append(cell_spec)
            continue
        cells.append(cell)
    if problems:
        found = [CellProblem(message, tuple(c)) for message, c in problems.items()]
        raise SweepCheckError(found, len(specs), list(spec.grid))
    for notice in notices:
        warnings.warn(ShockWarning(notice), stacklevel=2)
    return cells
