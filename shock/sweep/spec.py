"""Read a sweep spec (TOML): [base] options, an optional [generate] workload, a [grid] of lists."""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import InputError
from shock.util.suggest import did_you_mean


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _texts(value: object) -> tuple[str, ...]:
    """A repeatable option: one KEY=VALUE string or a list of them."""
    items = value if isinstance(value, list) else [value]
    return tuple(_text(item) for item in items)


# `shock run`'s long options a sweep may set: name -> (RunOptions field, converter).
RUN_OPTIONS: dict[str, tuple[str, Callable[[object], object]]] = {
    "policy": ("policy", _text),
    "backend": ("backend", _text),
    "trace": ("trace", _text),
    "cluster": ("cluster", _text),
    "throughputs": ("throughputs", _text),
    "solver": ("solver", _text),
    "seed": ("seed", _integer),
    "preset": ("preset", _text),
    "round-length": ("round_length_s", _number),
    "min-allocation-interval": ("min_allocation_interval_s", _number),
    "placement": ("placement", _text),
    "gpus-per-server": ("gpus_per_server", _integer),
    "preemption-overhead": ("preemption_overhead_s", _number),
    "window": ("window", _text),
    "time-limit": ("time_limit_s", _number),
    "partitions": ("partitions", _integer),
    "prices": ("prices", _text),
    "policy-option": ("policy_options", _texts),
    "backend-option": ("backend_options", _texts),
    "entities": ("entities", _text),
    "entity-weights": ("entity_weights", _text),
    "adaptation-rules": ("adaptation_rules", _text),
    "goodput-profiles": ("goodput_profiles", _text),
    "goodput-calibration": ("goodput_calibration", _flag),
}

# `shock trace generate`'s options: name -> converter. `seed` and `throughputs` are shared
# with the run: a generated trace uses the run's seed and table unless [generate] sets them.
GENERATE_OPTIONS: dict[str, Callable[[object], object]] = {
    "jobs": _integer,
    "rate": _number,
    "seed": _integer,
    "multi-gpu": _flag,
    "multi-priority": _flag,
    "fixed-duration": _number,
}


@dataclass(frozen=True, slots=True)
class CellSpec:
    """One point of the grid: its `shock run` options and, if generated, its workload options."""

    run: dict[str, object]  # long option name -> converted value
    generate: dict[str, object] | None  # None: the run reads `trace` (or the bundled default)


@dataclass(frozen=True, slots=True)
class SweepSpec:
    path: Path
    base: dict[str, object]
    generate: dict[str, object] | None
    grid: dict[str, list[object]]

    def cells(self) -> list[CellSpec]:
        """The grid's product, in the order its keys and values are written."""
        names = list(self.grid)
        cells = []
        for values in itertools.product(*(self.grid[name] for name in names)):
            run = dict(self.base)
            generate = None if self.generate is None else dict(self.generate)
            for name, value in zip(names, values, strict=True):
                if name in RUN_OPTIONS:
                    run[name] = value
                if generate is not None and name in GENERATE_OPTIONS:
                    generate[name] = value
            # The run's seed drives the workload too, unless [generate] names its own.
            if generate is not None and "seed" not in generate:
                generate["seed"] = run.get("seed", 0)
            cells.append(CellSpec(run=run, generate=generate))
        return cells


def normalise(name: str) -> str:
    return name.replace("_", "-")


def _convert(
    path: Path, section: str, name: str, value: object, allowed: set[str]
) -> object:
    if name not in allowed:
        hint = did_you_mean(name, allowed)
        raise InputError(
            "unknown option" + (f"; {hint}" if hint else "")
            + f" (known: {', '.join(sorted(allowed))})",
            path=path,
            field=f"{section}.{name}",
        )
    converter = RUN_OPTIONS[name][1] if name in RUN_OPTIONS else GENERATE_OPTIONS[name]
    try:
        return converter(value)
    except ValueError as exc:
        raise InputError(str(exc), path=path, field=f"{section}.{name}") from None


def _table(document: dict[str, object], path: Path, section: str) -> dict[str, object] | None:
    table = document.get(section)
    if table is None:
        return None
    if not isinstance(table, dict):
        raise InputError("expected a table", path=path, field=section)
    return {normalise(k): v for k, v in table.items()}


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read the sweep spec: {exc.strerror}", path=path) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", path=path) from None
    unknown = sorted(set(document) - {"base", "generate", "grid"})
    if unknown:
        hint = did_you_mean(unknown[0], ("base", "generate", "grid"))
        raise InputError(
            "unknown section" + (f"; {hint}" if hint else "") + " (known: base, generate, grid)",
            path=path,
            field=unknown[0],
        )
    run_names = set(RUN_OPTIONS)
    base_raw = _table(document, path, "base") or {}
    generate_raw = _table(document, path, "generate")
    grid_raw = _table(document, path, "grid")
    if not grid_raw:
        raise InputError("a sweep needs a [grid] with at least one list", path=path, field="grid")
    base = {k: _convert(path, "base", k, v, run_names) for k, v in base_raw.items()}
    generate = None
    if generate_raw is not None:
        generate = {
            k: _convert(path, "generate", k, v, set(GENERATE_OPTIONS))
            for k, v in generate_raw.items()
        }
    grid_names = run_names | (set(GENERATE_OPTIONS) if generate is not None else set())
    grid: dict[str, list[object]] = {}
    for name, values in grid_raw.items():
        field = f"grid.{name}"
        if not isinstance(values, list) or not values:
            raise InputError("expected a non-empty list of values", path=path, field=field)
        grid[name] = [_convert(path, "grid", name, value, grid_names) for value in values]
    if generate is not None and ("trace" in base or "trace" in grid):
        raise InputError(
            "a sweep with [generate] makes its own traces; drop the trace option",
            path=path,
            field="base.trace" if "trace" in base else "grid.trace",
        )
    return SweepSpec(path=path, base=base, generate=generate, grid=grid)
