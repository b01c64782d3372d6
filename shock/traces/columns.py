"""Tab-separated trace columns: parse each field or fail naming file, line and field."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import InputError
from shock.core.trace import separator_hint


@dataclass(frozen=True, slots=True)
class Row:
    """One trace line split into named fields."""

    path: Path
    line: int
    values: dict[str, str]

    def error(self, column: str, message: str) -> InputError:
        return InputError(message, path=self.path, line=self.line, field=column)

    def text(self, column: str) -> str:
        return self.values[column]

    def integer(self, column: str, minimum: int | None = None) -> int:
        raw = self.values[column].strip()
        try:
            value = int(raw)
        except ValueError:
            try:
                as_float = float(raw)
            except ValueError:
                raise self.error(column, f"expected an integer, got {raw!r}") from None
            if not as_float.is_integer():
                raise self.error(column, f"expected an integer, got {raw!r}") from None
            value = int(as_float)
        if minimum is not None and value < minimum:
            raise self.error(column, f"must be >= {minimum}, got {value}")
        return value

    def number(self, column: str, minimum: float | None = None, strict: bool = False) -> float:
        raw = self.values[column].strip()
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"expected a number, got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(column, f"expected a finite number, got {raw!r}")
        if minimum is not None and (value <= minimum if strict else value < minimum):
            raise self.error(column, f"must be {'>' if strict else '>='} {minimum}, got {raw}")
        return value

    def boolean(self, column: str) -> bool:
        raw = self.values[column].strip().lower()
        if raw in ("1", "true"):
            return True
        if raw in ("0", "false"):
            return False
        raise self.error(column, f"expected 0 or 1, got {raw!r}")

    def choice(self, column: str, allowed: tuple[str, ...]) -> str:
        raw = self.values[column].strip()
        if raw not in allowed:
            raise self.error(column, f"expected one of {', '.join(allowed)}, got {raw!r}")
        return raw


def read_rows(path: Path, columns: tuple[str, ...]) -> Iterator[Row]:
    """Yield each non-blank line as a Row; a wrong column count is an error naming the line."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read trace ({exc.strerror})", path=path) from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("line is not UTF-8 text", path=path, line=number) from None
            stripped = line.rstrip("\n").rstrip("\r")
            if not stripped.strip():
                continue
            parts = stripped.split("\t")
            if len(parts) != len(columns):
                missing = columns[len(parts)] if len(parts) < len(columns) else None
                raise InputError(
                    f"expected {len(columns)} tab-separated columns, found {len(parts)}"
                    + separator_hint(stripped),
                    path=path,
                    line=number,
                    field=missing,
                )
            yield Row(path, number, dict(zip(columns, parts, strict=True)))


def format_number(value: float) -> str:
    """Integers without a decimal point, other numbers as Python writes them."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def format_slo(slo: float | None) -> str:
    """Gavel writes SLOs with six decimals; keep that unless it would lose the value."""
    if slo is None:
        return "-1.000000"
    fixed = f"{slo:f}"
    return fixed if float(fixed) == slo else repr(slo)


def parse_slo(row: Row, column: str) -> float | None:
    value = row.number(column)
    if value < 0:
        return None
    if value == 0:
        raise row.error(column, "SLO must be > 0, or -1 for none")
    return value


def write_lines(path: Path, lines: list[str]) -> None:
    try:
        path.write_text("".join(line + "\n" for line in lines))
    except OSError as exc:
        raise InputError(f"cannot write trace ({exc.strerror})", path=path) from exc
