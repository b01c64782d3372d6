"""What every importer produces, and the line-by-line readers they share.

An importer turns a production trace into `RawJob`s: one per job the trace recorded, with
its submission time, run time and GPU count as recorded, and whatever it knows of the job's
user, group, CPU and memory. `shaping` then turns the kept ones into a shock trace.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from shock.core.errors import InputError

_CHUNK_CHARS = 1 << 20
_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S.%f")


@dataclass(frozen=True, slots=True)
class RawJob:
    """One job as a production trace recorded it."""

    name: str  # the trace's own job id
    submit_s: float  # seconds on the trace's clock
    duration_s: float
    gpus: float  # may be fractional (a share of one GPU) before rounding
    user: str | None = None
    vc: str | None = None
    cpus: float | None = None
    memory_gb: float | None = None


@dataclass(slots=True)
class ReadCounts:
    """How many jobs a reader saw, and why it dropped the ones it dropped."""

    read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


@dataclass(frozen=True, slots=True)
class Record:
    """A line of a trace file, its fields by column name, for errors that name all three."""

    path: Path
    line: int
    values: dict[str, str]

    def error(self, column: str | None, message: str) -> InputError:
        return InputError(message, path=self.path, line=self.line, field=column)

    def text(self, column: str) -> str:
        return self.values[column].strip()

    def number(self, column: str, *, empty: float | None = None) -> float:
        """A finite number; an empty field gives `empty` when that is not None."""
        raw = self.values[column].strip()
        if not raw and empty is not None:
            return empty
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"expected a number, got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(column, f"expected a finite number, got {raw!r}")
        return value

    def optional_number(self, column: str) -> float | None:
        raw = self.values[column].strip()
        return None if raw in ("", "None", "NaN", "nan") else self.number(column)

    def time(self, column: str) -> float | None:
        """Seconds: a number as is, a date-time (`2017-10-03 12:34:56`, UTC) as seconds since
        1970; None for an empty or `None` field."""
        return parse_time(self.values[column], self, column)


def parse_time(raw: object, record: Record, column: str) -> float | None:
    if raw is None:
        return None
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        raise record.error(column, f"expected a time, got {raw!r}")
    if isinstance(raw, int | float):
        return float(raw)
    text = raw.strip()
    if text in ("", "None", "NaN", "nan", "null"):
        return None
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise record.error(column, f"expected a finite time, got {text!r}")
        return value
    try:
        # The common shape (`2017-10-03 12:34:56`) in C; the patterns below say what else passes.
        moment = datetime.fromisoformat(text)
    except ValueError:
        pass
    else:
        if moment.tzinfo is None and _looks_like(text):
            return moment.replace(tzinfo=UTC).timestamp()
    for pattern in _TIME_FORMATS:
        try:
            moment = datetime.strptime(text, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
        return moment.timestamp()
    raise record.error(
        column, f"expected seconds or a date-time like 2017-10-03 12:34:56, got {text!r}"
    )


def _looks_like(text: str) -> bool:
    """Whether fromisoformat's reading is one of the documented shapes (it also takes dates
    alone and other ISO forms, which the traces never hold)."""
    return len(text) >= 19 and text[4] == "-" and text[10] in " T" and text[13] == ":"


def csv_records(
    path: Path, columns: tuple[str, ...], *, header: str = "required"
) -> Iterator[Record]:
    """Each non-blank line of a CSV file as a Record, read one line at a time.

    `header`: "required" (the first line names the columns; extra columns are ignored, missing
    ones are an error naming the column), or "optional" (a first line equal to `columns` is
    skipped; the lines have exactly those columns, in that order).
    """
    positions: dict[str, int] | None = None
    width = len(columns)
    first = True
    if header == "optional":
        positions = {name: index for index, name in enumerate(columns)}
    for number, fields in _csv_lines(path):
        names = tuple(value.strip().lstrip("\ufeff") for value in fields)
        is_first, first = first, False
        if positions is None:
            missing = [name for name in columns if name not in names]
            if missing:
                raise InputError(
                    f"the header line lacks the column(s) {', '.join(missing)} "
                    f"(expected {', '.join(columns)})",
                    path=path,
                    line=number,
                    field=missing[0],
                )
            positions = {name: names.index(name) for name in columns}
            width = len(names)
            continue
        if is_first and header == "optional" and names == columns:
            continue
        if len(fields) != width:
            missing_column = next(
                (name for name, index in positions.items() if index >= len(fields)), None
            )
            raise InputError(
                f"expected {width} comma-separated columns, found {len(fields)}",
                path=path,
                line=number,
                field=missing_column,
            )
        yield Record(path, number, {name: fields[index] for name, index in positions.items()})
    if positions is None:
        raise InputError(f"file is empty; expected a header line naming {', '.join(columns)}",
                         path=path)


def _csv_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("line is not UTF-8 text", path=path, line=number) from None
            if not line.strip():
                continue
            try:
                fields = next(csv.reader([line]))
            except csv.Error as exc:
                raise InputError(f"not a CSV line ({exc})", path=path, line=number) from None
            yield number, fields


def json_list_items(path: Path) -> Iterator[tuple[int, object]]:
    """The items of a file holding one JSON list, decoded one at a time (the file is never
    held whole), each with the line it starts on."""
    decoder = json.JSONDecoder()
    try:
        handle = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from exc
    with handle:
        reader = _JsonListReader(path, handle, decoder)
        yield from reader.items()


class _JsonListReader:
    def __init__(self, path: Path, handle: TextIO, decoder: json.JSONDecoder) -> None:
        self.path = path
        self.handle = handle
        self.decoder = decoder
        self.buffer = ""
        self.position = 0
        self.line = 1  # line of buffer[position]
        self.done = False

    def _more(self) -> bool:
        if self.done:
            return False
        try:
            chunk = self.handle.read(_CHUNK_CHARS)
        except UnicodeDecodeError:
            raise InputError("file is not UTF-8 text", path=self.path, line=self.line) from None
        if not chunk:
            self.done = True
            return False
        self.buffer = self.buffer[self.position :] + chunk
        self.position = 0
        return True

    def _skip_space(self) -> str:
        """The next non-space character (not consumed); '' at the end of the file."""
        while True:
            while self.position < len(self.buffer):
                char = self.buffer[self.position]
                if not char.isspace():
                    return char
                if char == "\n":
                    self.line += 1
                self.position += 1
            if not self._more():
                return ""

    def _error(self, message: str) -> InputError:
        return InputError(f"bad JSON: {message}", path=self.path, line=self.line)

    def items(self) -> Iterator[tuple[int, object]]:
        if self._skip_space() != "[":
            raise self._error("expected a list of jobs, starting with '['")
        self.position += 1
        expect_item = True
        first = True
        while True:
            char = self._skip_space()
            if char == "":
                raise self._error("the list is not closed with ']'")
            if char == "]" and (first or not expect_item):
                self.position += 1
                break
            if not expect_item:
                if char != ",":
                    raise self._error(f"expected ',' or ']' between jobs, found {char!r}")
                self.position += 1
                expect_item = True
                continue
            start_line = self.line
            item, end = self._decode()
            self.line += self.buffer.count("\n", self.position, end)
            self.position = end
            yield start_line, item
            expect_item = False
            first = False
        if self._skip_space() != "":
            raise self._error("text after the closing ']'")

    def _decode(self) -> tuple[object, int]:
        while True:
            try:
                item, end = self.decoder.raw_decode(self.buffer, self.position)
            except json.JSONDecodeError as exc:
                # An item cut by the end of the chunk: read more and try again.
                if self._more():
                    continue
                line = self.line + self.buffer.count("\n", self.position, exc.pos)
                raise InputError(f"bad JSON: {exc.msg}", path=self.path, line=line) from None
            # A value that ends where the text read so far ends may go on (a number).
            if end == len(self.buffer) and self._more():
                continue
            return item, end


def first_csv_line(path: Path) -> list[str]:
    """The first non-blank line of a CSV file, split (to tell files apart by their width)."""
    for _number, fields in _csv_lines(path):
        return fields
    raise InputError("file is empty", path=path)
