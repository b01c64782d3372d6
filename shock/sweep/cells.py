"""A cell's identity: its `shock run` options, its trace and shock's version, hashed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from shock import __version__
from shock.core.errors import InputError
from shock.engine.runner import RunOptions, bundled_trace_path, parse_window
from shock.sweep.spec import RUN_OPTIONS, CellSpec
from shock.util.bundled import resolve_throughputs, resolve_trace

KEY_LENGTH = 16  # hex digits: 64 bits, ample for the cells of any sweep


@dataclass(frozen=True, slots=True)
class Cell:
    key: str
    spec: CellSpec
    # Where the cell's generated trace goes (shared by every cell with the same workload).
    generated_trace: Path | None

    def run_options(self) -> RunOptions:
        """The RunOptions `shock run` builds from the same long options."""
        fields: dict[str, object] = {}
        for name, value in self.spec.run.items():
            field = RUN_OPTIONS[name][0]
            fields[field] = parse_window(str(value)) if name == "window" else value
        if self.generated_trace is not None:
            fields["trace"] = str(self.generated_trace)
        return RunOptions(**fields)  # type: ignore[arg-type]  # converted per option in spec.py


def _file_digest(path: str, field: str, spec_path: Path) -> str:
    """The content's hash of a file or a bundled trace or table named so."""
    resolve = resolve_trace if field == "trace" else resolve_throughputs
    try:
        found = resolve(path)
    except InputError:
        found = Path(path)  # not there: the read below says so, naming the spec
    try:
        return hashlib.sha256(found.read_bytes()).hexdigest()
    except OSError as exc:
        raise InputError(
            f"cannot read '{path}': {exc.strerror}", path=spec_path, field=field
        ) from None


def _digest(document: object) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def make_cell(spec: CellSpec, spec_path: Path, out_dir: Path) -> Cell:
    """Key the cell by everything that decides its numbers: options, trace content, version."""
    options = {name: list(v) if isinstance(v, tuple) else v for name, v in spec.run.items()}
    identity: dict[str, object] = {"options": options, "version": __version__}
    generated = None
    if spec.generate is not None:
        identity["generate"] = spec.generate
        workload = {"generate": spec.generate, "version": __version__}
        if "throughputs" in spec.run:
            workload["throughputs"] = _file_digest(
                str(spec.run["throughputs"]), "throughputs", spec_path
            )
        generated = out_dir / "traces" / f"{_digest(workload)}.trace"
    else:
        trace = str(spec.run.get("trace") or bundled_trace_path())
        identity["trace"] = _file_digest(trace, "trace", spec_path)
    if "throughputs" in spec.run:
        identity["throughputs"] = _file_digest(
            str(spec.run["throughputs"]), "throughputs", spec_path
        )
    return Cell(key=_digest(identity), spec=spec, generated_trace=generated)
