"""What a Ray worker runs for one sweep cell: its input files arrive by content, its results
go back to the driver, which writes them. A worker on another machine sees none of the
driver's files, so nothing here reads or writes the sweep's output directory.

This module imports neither Ray nor the simulator at import time: a Ray worker process
imports shock's run machinery once, on its first cell, and keeps it for the next ones.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from shock import __version__
from shock.core.errors import ShockError
from shock.sweep.cells import Cell
from shock.sweep.runner import DONE, FAILED, CellOutcome, failure_message, generate_trace


@dataclass(frozen=True, slots=True)
class ShippedFile:
    """An input file a cell names (a RunOptions field), sent along by content."""

    option: str  # "trace", "throughputs" or "cluster"
    path: str  # as the driver names it
    digest: str  # sha256 of the content


@dataclass(frozen=True, slots=True)
class CellJob:
    cell: Cell
    files: tuple[ShippedFile, ...]  # their contents follow as the task's further arguments
    version: str  # the driver's shock version: a cell's key depends on it
    return_trace: bool  # send a generated trace back: the driver has none yet


@dataclass(frozen=True, slots=True)
class CellReport:
    outcome: CellOutcome
    generated_trace: str | None = None  # the trace's text, when the job asked for it


def file_digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _usable_path(shipped: ShippedFile, content: bytes, scratch: Path) -> str:
    """The driver's own path where this machine sees the same file there, else a copy."""
    original = Path(shipped.path)
    try:
        if original.is_file() and file_digest(original.read_bytes()) == shipped.digest:
            return shipped.path
    except OSError:
        pass
    # Same file name in a folder of its own: formats detected by name still are.
    copy = scratch / shipped.option / original.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(content)
    return str(copy)


def run_cell_job(job: CellJob, *contents: bytes) -> CellReport:
    """Run one cell as `shock run` would; any error becomes a failed outcome."""
    from shock.engine.runner import run

    started = time.perf_counter()
    key = job.cell.key
    renamed: dict[str, str] = {}  # local copy -> the driver's name, for documents and errors
    trace_text = None  # sent back even when the run fails: the local pool keeps it too
    try:
        if job.version != __version__:
            raise ShockError(
                f"this Ray worker has shock {__version__}, the sweep's driver {job.version}: "
                "install the same shock on every node"
            )
        with tempfile.TemporaryDirectory(prefix="shock-cell-") as folder:
            scratch = Path(folder)
            paths: dict[str, str] = {}
            for shipped, content in zip(job.files, contents, strict=True):
                paths[shipped.option] = _usable_path(shipped, content, scratch)
                renamed[paths[shipped.option]] = shipped.path
            cell = job.cell
            if cell.generated_trace is not None and "trace" not in paths:
                assert cell.spec.generate is not None
                generated = scratch / cell.generated_trace.name
                generate_trace(cell.spec.generate, paths.get("throughputs"), generated)
                paths["trace"] = str(generated)
                renamed[str(generated)] = str(cell.generated_trace)
                if job.return_trace:
                    trace_text = generated.read_text()
            options = cell.run_options()
            options = replace(
                options,
                trace=paths.get("trace", options.trace),
                throughputs=paths.get("throughputs", options.throughputs),
                cluster=paths.get("cluster", options.cluster),
            )
            document = run(options).to_document()
        if isinstance(document.get("trace"), str):
            document["trace"] = renamed.get(str(document["trace"]), document["trace"])
    except Exception as exc:  # a cell's failure is recorded, never fatal
        message = failure_message(exc)
        for local, original in renamed.items():
            message = message.replace(local, original)
        return CellReport(
            CellOutcome(key, FAILED, message, time.perf_counter() - started), trace_text
        )
    return CellReport(
        CellOutcome(key, DONE, "", time.perf_counter() - started, document), trace_text
    )
