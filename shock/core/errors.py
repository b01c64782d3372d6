"""Errors a user can act on. The CLI prints them without a traceback."""

from __future__ import annotations

from pathlib import Path

from shock.util.suggest import unknown_name_message


class ShockError(Exception):
    """Base class for every error shock reports to a user."""


class ShockWarning(UserWarning):
    """Something a user should know that does not stop the work (the CLI prints it as
    `warning: ...` on stderr)."""


class InputError(ShockError):
    """Bad input in a file: names the file, the line and the field."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if self.path is not None:
            where.append(self.path if line is None else f"{self.path}:{line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class UnknownPluginError(ShockError):
    """A plugin name that is not registered; lists the valid names."""

    def __init__(self, kind: str, name: str, valid: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        if not self.valid:
            super().__init__(f"unknown {kind} '{name}'; valid {kind} names: (none installed)")
            return
        listing = "`shock plugins`"  # lists every kind, presets too
        super().__init__(unknown_name_message(kind, name, self.valid, listing))


class SolverError(ShockError):
    """A solver that is missing, cannot take a problem class, or failed."""
