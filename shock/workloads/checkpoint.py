"""Atomic checkpoints in a job's checkpoint directory, and finding the latest complete one.

A checkpoint is `ckpt-<step>.pt` (torch.save of a dict of tensors and plain values, readable
with `weights_only=True`). It is written to a temporary file, flushed to disk and renamed with
os.replace, so a reader sees either a whole checkpoint or none. The newest few are kept.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import torch

FORMAT_VERSION = 1
KEEP_CHECKPOINTS = 2
_NAME = re.compile(r"^ckpt-(\d+)\.pt$")


def checkpoint_path(directory: Path, step: int) -> Path:
    return directory / f"ckpt-{step}.pt"


def write_checkpoint(
    directory: Path, step: int, state: dict[str, Any], keep: int = KEEP_CHECKPOINTS
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, step)
    temporary = directory / f".{final.name}.tmp-{os.getpid()}"
    with open(temporary, "wb") as handle:
        torch.save({"format_version": FORMAT_VERSION, **state}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, final)
    _sync_directory(directory)
    for _, old in _checkpoints(directory)[keep:]:
        old.unlink(missing_ok=True)
    return final


def load_latest_checkpoint(directory: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that loads; an unreadable one is reported and skipped."""
    for _, path in _checkpoints(directory):
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a torn or foreign file: fall back to an older checkpoint
            print(f"{path}: unreadable checkpoint skipped ({exc})", file=sys.stderr, flush=True)
            continue
        if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
            print(f"{path}: not a format-{FORMAT_VERSION} checkpoint, skipped", file=sys.stderr)
            continue
        return path, state
    return None


def _checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint in the directory, newest first."""
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found, reverse=True)


def _sync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk (POSIX).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
