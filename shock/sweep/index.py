"""A sweep's index of its done cells (`cells/index.jsonl`): for each, the few numbers
runs.csv needs and the size and time of its results document, so resuming a sweep reads one
small file and a stat per cell instead of every document (a document of a 300-job run is
megabytes).

A line is appended when a cell is done. An entry counts only while its document still has
the recorded size and modification time; otherwise the document itself is read again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

INDEX_NAME = "index.jsonl"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    key: str
    size: int
    mtime_ns: int
    summary: dict[str, object]  # the document's metrics and unfinished_jobs


def index_path(out_dir: Path) -> Path:
    return out_dir / "cells" / INDEX_NAME


def table_summary(document: dict[str, object]) -> dict[str, object]:
    """What runs.csv takes from a results document."""
    return {"metrics": document.get("metrics"), "unfinished_jobs": document.get("unfinished_jobs")}


def read_index(out_dir: Path) -> dict[str, IndexEntry]:
    """The index's entries by cell key (the last line of a key wins); a line cut off by a
    crash, or anything unreadable, is left out."""
    entries: dict[str, IndexEntry] = {}
    try:
        text = index_path(out_dir).read_text()
    except OSError:
        return entries
    for line in text.splitlines():
        try:
            raw = json.loads(line)
            entry = IndexEntry(
                str(raw["key"]), int(raw["size"]), int(raw["mtime_ns"]), dict(raw["summary"])
            )
        except (ValueError, KeyError, TypeError):
            continue
        entries[entry.key] = entry
    return entries


def still_valid(entry: IndexEntry, document: Path) -> bool:
    try:
        stat = document.stat()
    except OSError:
        return False
    return stat.st_size == entry.size and stat.st_mtime_ns == entry.mtime_ns


def append_index(out_dir: Path, key: str, document_path: Path, document: dict[str, object]) -> None:
    """Record a done cell whose document is at `document_path`."""
    try:
        stat = document_path.stat()
    except OSError:
        return  # no document: nothing to vouch for
    line = json.dumps(
        {
            "key": key,
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "summary": table_summary(document),
        },
        separators=(",", ":"),
        allow_nan=True,
    )
    path = index_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One write of a whole line: a crash leaves at most a cut-off last line, which is skipped.
    with path.open("a") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
