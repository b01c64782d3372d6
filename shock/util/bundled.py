"""Traces and throughput tables bundled with shock, by name: `--trace small_test` (or
`small_test.trace`) and `--throughputs shockwave_wisr` work from any directory, as
`--cluster synergy-128` does. A path that exists always wins over a bundled name."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from shock.core.errors import InputError
from shock.util.suggest import did_you_mean

TRACE_SUFFIX = ".trace"
THROUGHPUTS_SUFFIX = "_throughputs.json"


def _data_dir(*parts: str) -> Path:
    return Path(str(resources.files("shock.data").joinpath(*parts)))


def bundled_traces() -> dict[str, Path]:
    """Bundled trace name (the file name without .trace) -> its path."""
    folder = _data_dir("traces")
    return {
        path.name.removesuffix(TRACE_SUFFIX): path
        for path in sorted(folder.iterdir())
        if path.name.endswith(TRACE_SUFFIX)
    }


def bundled_throughputs() -> dict[str, Path]:
    """Bundled throughput table name (gavel, shockwave_tacc, ...) -> its path."""
    folder = _data_dir()
    return {
        path.name.removesuffix(THROUGHPUTS_SUFFIX): path
        for path in sorted(folder.iterdir())
        if path.name.endswith(THROUGHPUTS_SUFFIX)
    }


@dataclass(frozen=True, slots=True)
class _Kind:
    what: str  # "trace", "throughput table"
    option: str  # "--trace"
    suffix: str
    listing: str  # the command that lists them


def _resolve(text: str, bundled: dict[str, Path], kind: _Kind) -> Path:
    path = Path(text).expanduser()
    if path.exists():
        return path
    name = path.name.removesuffix(kind.suffix)
    # A bare name, or a checkout's path (shock/data/traces/x.trace) typed elsewhere.
    by_name = str(path.parent) in (".", "") or "data" in path.parts
    if by_name and name in bundled:
        return bundled[name]
    hint = did_you_mean(name, bundled) if by_name else ""
    raise InputError(
        f"cannot read the {kind.what}: no such file, nor a bundled {kind.what}"
        + (f"; {hint}" if hint else "")
        + f" (`{kind.listing}` lists the bundled ones)",
        path=text,
        field=kind.option,
    )


def resolve_trace(text: str | Path) -> Path:
    """A trace file's path, or a bundled trace's by its name."""
    return _resolve(str(text), bundled_traces(), _Kind("trace", "--trace", TRACE_SUFFIX,
                                                       "shock traces"))


def resolve_throughputs(text: str | Path) -> Path:
    """A throughput table's path, or a bundled table's by its name (gavel, shockwave_wisr)."""
    kind = _Kind("throughput table", "--throughputs", THROUGHPUTS_SUFFIX, "shock traces")
    return _resolve(str(text), bundled_throughputs(), kind)
