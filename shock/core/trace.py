"""Traces: a list of jobs read from a file, and the trace-format plugin protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.util.bundled import resolve_trace

if TYPE_CHECKING:
    from shock.core.plugins import PluginRegistry
    from shock.core.throughputs import ThroughputTable


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[JobSpec, ...]
    source: str = "<memory>"
    format: str = "gavel"


class TraceFormat(Protocol):
    name: str
    description: str

    def sniff(self, first_line: str) -> bool:
        """Whether a trace whose first job line is this one is in this format."""
        ...

    def read(self, path: Path) -> Trace: ...

    def write(self, jobs: Sequence[JobSpec], path: Path) -> None: ...

    # Optional: a format whose job types Gavel's bundled table does not describe supplies
    # the table its traces run with when the user gives none (`--throughputs`):
    #
    #     def default_throughputs(
    #         self, trace: Trace, worker_types: tuple[str, ...], base: ThroughputTable
    #     ) -> ThroughputTable: ...
    #
    # `base` is the table used otherwise (Gavel's); `worker_types` the cluster's.
    #
    # Optional too: the cluster its traces run on when the user names none (`--cluster`), as
    # `--cluster` takes it (a bundled cluster's name, `v100=32`, ...):
    #
    #     def default_cluster(self, trace: Trace) -> str | None: ...


def default_throughputs_for(
    trace: Trace,
    registry: PluginRegistry,
    worker_types: tuple[str, ...],
    base: ThroughputTable,
) -> ThroughputTable:
    """The table a trace runs with when none is given: its format's own, if it supplies one
    (`default_throughputs`), else `base`."""
    if trace.format not in registry.names("trace format"):
        return base  # a trace made in memory, of no registered format
    supply = getattr(registry.get("trace format", trace.format), "default_throughputs", None)
    if supply is None:
        return base
    table: ThroughputTable = supply(trace, worker_types, base)
    return table


def default_cluster_for(trace: Trace, registry: PluginRegistry) -> str | None:
    """The cluster a trace runs on when none is given: its format's, if it names one."""
    if trace.format not in registry.names("trace format"):
        return None
    supply = getattr(registry.get("trace format", trace.format), "default_cluster", None)
    cluster: str | None = None if supply is None else supply(trace)
    return cluster


def read_trace(path: str | Path, registry: PluginRegistry, format_name: str | None = None) -> Trace:
    """Read a trace (a file, or a bundled trace by name), detecting its format from the first
    job line unless one is named."""
    path = resolve_trace(path)
    if format_name is not None:
        fmt: TraceFormat = registry.get("trace format", format_name)
        return fmt.read(path)
    first = _first_line(path)
    for candidate in registry.all("trace format"):
        if candidate.sniff(first):
            return candidate.read(path)
    names = ", ".join(registry.names("trace format"))
    raise InputError(
        f"unrecognised trace format (known formats: {names}); "
        f"the first job line has {len(first.split(chr(9)))} tab-separated columns"
        + separator_hint(first),
        path=path,
        line=1,
    )


def separator_hint(line: str) -> str:
    """Why a line may have too few columns: spaces where the format wants tabs."""
    if "\t" in line or len(line.split()) < 2:
        return ""
    return (
        f" (the line has no tabs but {len(line.split())} space-separated fields: trace "
        "columns are separated by tabs; did an editor turn them into spaces?)"
    )


def write_trace(
    jobs: Sequence[JobSpec], path: str | Path, registry: PluginRegistry, format_name: str
) -> None:
    fmt: TraceFormat = registry.get("trace format", format_name)
    fmt.write(jobs, Path(path))


def _first_line(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise InputError("line is not UTF-8 text", path=path, line=number) from None
                if line.strip():
                    return line.rstrip("\n").rstrip("\r")
    except OSError as exc:
        raise InputError(f"cannot read trace ({exc.strerror})", path=path) from exc
    raise InputError("trace has no jobs", path=path)
