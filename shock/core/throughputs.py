"""Throughput tables in Gavel's JSON format.

`{worker_type: {"('<job type>', <sf>)": {"null": steps/s, "('<other>', <sf>)": [a, b]}}}`:
the "null" entry is the job's isolated throughput; pair entries are the two jobs' throughputs
when they share a GPU.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from shock.core.errors import InputError
from shock.util.bundled import resolve_throughputs

JobKey = tuple[str, int]
# Gavel's tables measure gangs spread over servers under `<type>_unconsolidated`.
UNCONSOLIDATED = "_unconsolidated"


@dataclass(slots=True)
class ThroughputTable:
    """Isolated and co-located throughputs (steps per second) per worker type."""

    isolated: dict[JobKey, dict[str, float]] = field(default_factory=dict)
    pairs: dict[tuple[JobKey, JobKey], dict[str, tuple[float, float]]] = field(default_factory=dict)
    source: str = "<memory>"
    # Worker types fastest first where the throughputs cannot tell (a table derived from
    # another, with equal throughputs on every type, keeps its source's order); see
    # `fastest_first`.
    ranking: tuple[str, ...] = ()

    @property
    def worker_types(self) -> tuple[str, ...]:
        types: set[str] = set()
        for per_type in self.isolated.values():
            types.update(per_type)
        return tuple(sorted(types))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The worker types, without the `<type>_unconsolidated` variants, sorted by name."""
        return tuple(w for w in self.worker_types if not w.endswith(UNCONSOLIDATED))

    def fastest_first(self, worker_types: Iterable[str] | None = None) -> tuple[str, ...]:
        """`worker_types` (default: `gpu_types`) fastest first, by the mean log throughput
        over the job keys measured on all of them; ties keep `ranking`'s order, then name
        order. Types the table does not have come last, by name. For Gavel's table: v100,
        p100, k80."""
        types = self.gpu_types if worker_types is None else tuple(worker_types)
        known = [w for w in types if w in self.worker_types]
        common = [
            per_type
            for per_type in self.isolated.values()
            if all(per_type.get(w, 0.0) > 0 for w in known)
        ]
        speed = {w: sum(math.log(per_type[w]) for per_type in common) for w in known}
        rank = {w: i for i, w in enumerate(self.ranking)}
        ordered = sorted(known, key=lambda w: (-speed[w], rank.get(w, len(rank)), w))
        return (*ordered, *sorted(w for w in types if w not in speed))

    def has(self, job_type: str, scale_factor: int) -> bool:
        return (job_type, scale_factor) in self.isolated

    def throughput(self, job_type: str, scale_factor: int, worker_type: str) -> float:
        """Isolated steps/s of a job on one worker type; 0.0 where the table has none."""
        return self.isolated.get((job_type, scale_factor), {}).get(worker_type, 0.0)

    def pair_throughput(
        self, first: JobKey, second: JobKey, worker_type: str
    ) -> tuple[float, float]:
        """Steps/s of two co-located jobs; (0, 0) where the pair is not measured."""
        return self.pairs.get((first, second), {}).get(worker_type, (0.0, 0.0))

    def set(self, job_type: str, scale_factor: int, worker_type: str, value: float) -> None:
        self.isolated.setdefault((job_type, scale_factor), {})[worker_type] = value


# The usual key, a plain quoted name and a scale factor: read without Python's parser.
_PLAIN_KEY = re.compile(r"\('([^'\\]*)', ([1-9][0-9]*)\)")


def parse_job_key(text: str) -> JobKey:
    """Parse Gavel's tuple-string key `"('ResNet-18 (batch size 32)', 1)"`."""
    plain = _PLAIN_KEY.fullmatch(text)
    if plain is not None:
        return (plain.group(1), int(plain.group(2)))
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"not a (job type, scale factor) key: {text!r}") from exc
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not isinstance(value[0], str)
        or type(value[1]) is not int
        or value[1] < 1
    ):
        raise ValueError(
            f"not a (job type, scale factor) key: {text!r} (scale factor: an integer >= 1)"
        )
    return (value[0], value[1])


def format_job_key(key: JobKey) -> str:
    # Python's tuple repr, as Gavel writes keys; it quotes names with quotes correctly.
    return str((key[0], key[1]))


def load_throughputs(path: str | Path) -> ThroughputTable:
    """A throughput table from a JSON file, or a bundled one by name (gavel, shockwave_wisr)."""
    path = resolve_throughputs(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read throughput file ({exc.strerror})", path=path) from exc
    except UnicodeDecodeError:
        raise InputError("throughput file is not UTF-8 text", path=path) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
    return throughputs_from_dict(raw, source=str(path))


def throughputs_from_dict(raw: object, source: str = "<memory>") -> ThroughputTable:
    if not isinstance(raw, dict):
        raise InputError("expected an object of worker types", path=source)
    table = ThroughputTable(source=source)
    # Each key text is parsed once: a table repeats every key per worker type and per pair.
    keys: dict[str, JobKey] = {}

    def key_of(text: str, where: str) -> JobKey:
        key = keys.get(text)
        if key is None:
            try:
                key = keys[text] = parse_job_key(text)
            except ValueError as exc:
                raise InputError(str(exc), path=source, field=where) from exc
        return key

    for worker_type, jobs in raw.items():
        if not isinstance(jobs, dict):
            raise InputError("expected an object of job keys", path=source, field=worker_type)
        for key_text, entries in jobs.items():
            key = key_of(key_text, f"{worker_type}.{key_text}")
            if not isinstance(entries, dict) or "null" not in entries:
                where = f"{worker_type}.{key_text}"
                raise InputError("missing isolated throughput 'null'", path=source, field=where)
            isolated = entries["null"]
            if not _plain_number(isolated):
                isolated = _number(isolated, source, f"{worker_type}.{key_text}.null")
            table.isolated.setdefault(key, {})[worker_type] = float(isolated)
            for other_text, pair in entries.items():
                if other_text == "null":
                    continue
                other = key_of(other_text, f"{worker_type}.{key_text}.{other_text}")
                if (
                    type(pair) is not list
                    or len(pair) != 2
                    or not _plain_number(pair[0])
                    or not _plain_number(pair[1])
                ):
                    pair = _checked_pair(pair, source, f"{worker_type}.{key_text}.{other_text}")
                table.pairs.setdefault((key, other), {})[worker_type] = (
                    float(pair[0]),
                    float(pair[1]),
                )
    return table


def _plain_number(value: object) -> bool:
    """A finite, non-negative float or int (not a bool): what a valid entry holds."""
    kind = type(value)
    return (kind is float or kind is int) and 0 <= value < math.inf  # type: ignore[operator]


def _checked_pair(pair: object, source: str, where: str) -> tuple[float, float]:
    """A pair entry that is not plainly two numbers: the error that says why."""
    if not isinstance(pair, list) or len(pair) != 2:
        raise InputError("pair throughput must be [a, b]", path=source, field=where)
    return (_number(pair[0], source, f"{where}[0]"), _number(pair[1], source, f"{where}[1]"))


def throughputs_to_dict(table: ThroughputTable) -> dict[str, dict[str, dict[str, object]]]:
    """The table in Gavel's JSON layout (what `shock profile` writes)."""
    out: dict[str, dict[str, dict[str, object]]] = {}
    for key, isolated in table.isolated.items():
        for worker_type, value in isolated.items():
            out.setdefault(worker_type, {})[format_job_key(key)] = {"null": value}
    for (first, second), paired in table.pairs.items():
        for worker_type, (a, b) in paired.items():
            entry = out.setdefault(worker_type, {}).setdefault(format_job_key(first), {})
            entry[format_job_key(second)] = [a, b]
    return out


def _number(value: object, source: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a number, got {value!r}", path=source, field=where)
    if not math.isfinite(value):
        raise InputError(f"expected a finite number, got {value!r}", path=source, field=where)
    if value < 0:
        raise InputError(f"throughput must be >= 0, got {value}", path=source, field=where)
    return float(value)


_DEFAULT_CACHE: dict[str, ThroughputTable] = {}


def default_throughputs() -> ThroughputTable:
    """Gavel's measured simulation throughputs, bundled with shock (MIT, see data/NOTICE.md)."""
    if "gavel" not in _DEFAULT_CACHE:
        ref = resources.files("shock.data").joinpath("gavel_throughputs.json")
        with resources.as_file(ref) as path:
            _DEFAULT_CACHE["gavel"] = load_throughputs(path)
            _DEFAULT_CACHE["gavel"].source = "gavel_throughputs.json (bundled)"
    return _DEFAULT_CACHE["gavel"]
