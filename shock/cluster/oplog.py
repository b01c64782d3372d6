"""The operator's log of `shock serve` and `shock worker`: one line per event on stderr.

Events that matter to whoever runs the service (a worker joined or was lost, a job was
submitted, launched, preempted, finished, failed or cancelled, a token was refused) are
logged through `log_event` with a short name and their facts as fields. `--log-format text`
writes `TIME LEVEL EVENT MESSAGE`, `--log-format json` one JSON object per line; either way
a record never spans two lines (a newline inside a message is written as `\\n`), so log
collectors and `grep` see one event per line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

from shock.core.errors import InputError

EVENTS_LOGGER = "shock.events"
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")

_events = logging.getLogger(EVENTS_LOGGER)


def log_event(event: str, message: str, level: int = logging.INFO, **fields: object) -> None:
    """Log one event: `event` is its name (`job-launched`), `fields` its facts."""
    _events.log(level, message, extra={"shock_event": event, "shock_fields": fields})


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def _one_line(text: str) -> str:
    return text.replace("\r", "").replace("\n", "\\n")


def _event_name(record: logging.LogRecord) -> str:
    return str(getattr(record, "shock_event", "") or record.name)


class TextFormatter(logging.Formatter):
    """`2026-01-31T12:00:00.000Z INFO job-launched job 7 launched on worker-1 GPU 0`."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"{_timestamp(record)} {record.levelname} {_event_name(record)} "
            f"{record.getMessage()}"
        )
        if record.exc_info:
            line += " | " + self.formatException(record.exc_info)
        return _one_line(line)


class JsonFormatter(logging.Formatter):
    """`{"time": ..., "level": "info", "event": ..., "message": ..., <fields>}`."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "event": _event_name(record),
            "message": record.getMessage(),
        }
        for key, value in dict(getattr(record, "shock_fields", {}) or {}).items():
            document.setdefault(key, value)
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)  # json escapes newlines: one line


def configure_logging(level: str = "info", log_format: str = "text",
                      stream: IO[str] | None = None) -> None:  # fmt: skip
    """Send every log record (shock's events and warnings, gRPC's, the dashboard's) to
    `stream` (stderr) in the chosen format, from `level` up."""
    if level.lower() not in LOG_LEVELS:
        raise InputError(f"must be one of {', '.join(LOG_LEVELS)}, got {level!r}",
                         field="--log-level")  # fmt: skip
    if log_format not in LOG_FORMATS:
        raise InputError(f"must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}",
                         field="--log-format")  # fmt: skip
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
