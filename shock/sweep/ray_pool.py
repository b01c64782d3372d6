"""Run a sweep's cells as Ray tasks: on a Ray instance started here, or on a Ray cluster.

The driver (this process) ships each cell's input files by content, submits one task per
cell, and writes every finished cell's document itself, as it arrives: the workers may be
other machines. A worker that dies mid-cell makes Ray run the cell again (`max_retries`);
past that the cell is recorded failed and the sweep goes on.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from shock import __version__
from shock.core.errors import ShockError
from shock.engine.cluster_file import bundled_cluster_paths
from shock.sweep.cells import Cell
from shock.sweep.ray_cells import CellJob, CellReport, ShippedFile, file_digest, run_cell_job
from shock.sweep.runner import (
    FAILED,
    CellOutcome,
    failure_message,
    write_atomically,
    write_cell_document,
)

INSTALL_HINT = "pip install 'shock[ray]'"
# A worker lost mid-cell (killed, out of memory, its node gone): run the cell this many times
# more before recording it failed.
DEFAULT_MAX_RETRIES = 2
# RunOptions fields that may name a file the workers cannot see.
FILE_OPTIONS = ("trace", "throughputs", "cluster")

CellTask = Callable[..., CellReport]


@dataclass(frozen=True, slots=True)
class RayTarget:
    """`--ray`: `local` (a Ray instance on this machine), `auto` or HOST:PORT (join one)."""

    address: str

    @classmethod
    def parse(cls, text: str) -> RayTarget:
        text = text.strip()
        if text in ("local", "auto") or text.startswith("ray://"):
            return cls(text)
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ShockError(
                f"--ray: '{text}' is not local, auto nor HOST:PORT (a Ray head's GCS address, "
                "e.g. 10.0.0.5:6379)"
            )
        return cls(text)

    @property
    def starts_instance(self) -> bool:
        return self.address == "local"


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ShockError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}") from None
    return ray


def _check_reachable(address: str) -> None:
    """Fail fast, with a clear message, where nothing listens (Ray itself would wait long)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=10):
            pass
    except OSError as exc:
        raise ShockError(
            f"--ray {address}: no Ray head answers there ({exc.strerror or exc}); "
            "start one with `ray start --head --port PORT`"
        ) from None


@contextmanager
def connected(target: RayTarget, num_cpus: int | None) -> Iterator[ModuleType]:
    """Ray, connected to the target for the block; an instance started here stops after it."""
    ray = import_ray()
    if ray.is_initialized():  # the caller's own connection (a notebook, a script): kept
        yield ray
        return
    quiet: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    try:
        if target.starts_instance:
            ray.init(
                address="local",
                num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False,
                # The node talks over loopback; Ray's ports still listen on every interface,
                # guarded by the token Ray requires of a new instance unless told otherwise.
                _node_ip_address="127.0.0.1",
                **quiet,
            )
        else:
            if target.address != "auto" and not target.address.startswith("ray://"):
                _check_reachable(target.address)
            if target.address.split(":")[0] in ("127.0.0.1", "localhost"):
                # A head on loopback: this driver talks to it over loopback too (Ray would
                # otherwise take this machine's address and may not reach it there).
                quiet["_node_ip_address"] = "127.0.0.1"
            ray.init(address=target.address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        hint = " (start one with `ray start --head`, or set RAY_ADDRESS)"
        raise ShockError(
            f"--ray {target.address}: cannot connect to Ray: {_first_line(exc)}"
            + (hint if target.address == "auto" else "")
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _files_of(cell: Cell) -> list[tuple[str, Path]]:
    """The input files a cell's run reads, by RunOptions field."""
    options = cell.run_options()
    found = []
    for option in FILE_OPTIONS:
        value = getattr(options, option)
        if not value or (option == "cluster" and value.strip() in bundled_cluster_paths()):
            continue
        path = Path(value)
        if path.is_file():
            found.append((option, path))
    return found


class _Shipments:
    """Each input file put into Ray's object store once, however many cells read it."""

    def __init__(self, ray: ModuleType) -> None:
        self._ray = ray
        self._by_path: dict[Path, tuple[ShippedFile, Any]] = {}

    def of(self, cell: Cell) -> tuple[tuple[ShippedFile, ...], list[Any]]:
        files, refs = [], []
        for option, path in _files_of(cell):
            if path not in self._by_path:
                content = path.read_bytes()
                shipped = ShippedFile(option, str(path), file_digest(content))
                self._by_path[path] = (shipped, self._ray.put(content))
            shipped, ref = self._by_path[path]
            files.append(shipped)
            refs.append(ref)
        return tuple(files), refs


def _lost_cell(ray: ModuleType, exc: BaseException, attempts: int) -> str:
    if isinstance(exc, ray.exceptions.WorkerCrashedError | ray.exceptions.NodeDiedError):
        return f"the Ray worker running this cell died ({attempts} attempts): {_first_line(exc)}"
    if isinstance(exc, ray.exceptions.OutOfMemoryError):
        return f"Ray stopped this cell: out of memory ({attempts} attempts)"
    return f"Ray could not run this cell: {type(exc).__name__}: {_first_line(exc)}"


def run_on_ray(
    cells: list[Cell],
    out_dir: Path,
    target: RayTarget,
    parallel: int | None = None,
    task: CellTask = run_cell_job,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> Iterator[CellOutcome]:
    """Run the cells as Ray tasks; yield each outcome once its document is written.

    `parallel`: CPUs of the instance `local` starts; on a cluster joined, the most cells in
    flight at once (default: all submitted, so an autoscaler sees the whole demand).
    """
    with connected(target, parallel) as ray:
        remote = ray.remote(num_cpus=1, max_retries=max_retries)(task)
        shipments = _Shipments(ray)
        waiting = list(reversed(cells))
        limit = len(cells) if parallel is None or target.starts_instance else parallel
        in_flight: dict[Any, Cell] = {}
        try:
            while waiting or in_flight:
                while waiting and len(in_flight) < limit:
                    cell = waiting.pop()
                    try:
                        files, refs = shipments.of(cell)
                    except (ShockError, OSError) as exc:  # as a failure inside the cell would
                        yield CellOutcome(cell.key, FAILED, failure_message(exc))
                        continue
                    # Until the driver holds the cell's generated trace, the cell sends it.
                    generated = cell.generated_trace
                    return_trace = generated is not None and not generated.exists()
                    job = CellJob(cell, files, __version__, return_trace)
                    in_flight[remote.remote(job, *refs)] = cell
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in ready:
                    yield _collect(ray, ref, in_flight.pop(ref), out_dir, max_retries + 1)
        finally:
            # Ctrl-C or an error: the cells still running stop; the written ones stay.
            for ref in in_flight:
                ray.cancel(ref, force=True)


def _collect(
    ray: ModuleType, ref: Any, cell: Cell, out_dir: Path, attempts: int
) -> CellOutcome:
    try:
        report: CellReport = ray.get(ref)
    except ray.exceptions.RayError as exc:
        return CellOutcome(cell.key, FAILED, _lost_cell(ray, exc, attempts))
    outcome = report.outcome
    if (
        report.generated_trace is not None
        and cell.generated_trace is not None
        and not cell.generated_trace.exists()
    ):
        write_atomically(cell.generated_trace, report.generated_trace)
    if outcome.document is not None:
        write_cell_document(out_dir, cell.key, outcome.document)
    return outcome
