"""Atomic checkpoints in a job's checkpoint directory, and finding the latest complete one.

A checkpoint is `ckpt-<step>.pt` (torch.save of a dict of tensors and plain values, readable
with `weights_only=True`). It is written to a temporary file, flushed to disk and renamed with
os.replace, so a reader sees either a whole checkpoint or none. The newest few are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any

import torch

from shock.job.checkpoint import KEEP_CHECKPOINTS, checkpoint_path, checkpoints, write_atomically

FORMAT_VERSION = 1
__all__ = ["checkpoint_path", "load_latest_checkpoint", "write_checkpoint"]


def write_checkpoint(
    directory: Path, step: int, state: dict[str, Any], keep: int = KEEP_CHECKPOINTS
) -> Path:
    def write(handle: IO[bytes]) -> None:
        torch.save({"format_version": FORMAT_VERSION, **state}, handle)

    return write_atomically(directory, step, write, keep)


def load_latest_checkpoint(directory: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that loads; an unreadable one is reported and skipped."""
    for _, path in checkpoints(directory):
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
