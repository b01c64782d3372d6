"""Atomic checkpoint files: `ckpt-<step>.pt` in a job's checkpoint directory.

A checkpoint is written to a temporary file, flushed to disk and renamed with os.replace
(and the directory synced), so a reader sees a whole checkpoint or none. The newest few are
kept. `save_object`/`load_latest_object` store any picklable object: with `torch.save` when
the process uses torch (tensors are then stored efficiently and load on any device), else
with pickle.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from shock.core.errors import ShockError

KEEP_CHECKPOINTS = 2
_NAME = re.compile(r"^ckpt-(\d+)\.pt$")
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save's format is a zip archive


class CheckpointError(ShockError):
    """A checkpoint that cannot be written (an object that does not pickle, a full disk)."""


def checkpoint_path(directory: Path, step: int) -> Path:
    return directory / f"ckpt-{step}.pt"


def write_atomically(
    directory: Path, step: int, write: Callable[[IO[bytes]], None], keep: int = KEEP_CHECKPOINTS
) -> Path:
    """`write(handle)` fills the checkpoint of `step`; it appears only once it is whole."""

    def produce(path: Path) -> None:
        with open(path, "wb") as handle:
            write(handle)

    return write_file_atomically(directory, step, produce, keep)


def write_file_atomically(
    directory: Path, step: int, produce: Callable[[Path], None], keep: int = KEEP_CHECKPOINTS
) -> Path:
    """`produce(path)` writes the checkpoint of `step` to a temporary file of that name (a
    framework's own save routine); it appears as `ckpt-<step>.pt` only once it is whole."""
    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, step)
    temporary = directory / f".{final.name}.tmp-{os.getpid()}"
    try:
        produce(temporary)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    _sync_directory(directory)
    for _, old in checkpoints(directory)[keep:]:
        old.unlink(missing_ok=True)
    return final


def latest_checkpoint_path(directory: Path) -> Path | None:
    """The newest complete checkpoint file, for a framework that loads it itself."""
    found = checkpoints(directory)
    return found[0][1] if found else None


def checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint in the directory, newest first."""
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found, reverse=True)


def save_object(directory: Path, step: int, state: object) -> Path:
    """Any picklable object as the checkpoint of `step`; CheckpointError in one line when it
    cannot be stored (nothing is left behind then)."""
    # torch.save when the script uses torch (its state may hold tensors); a script that
    # never imported it does not pay for the import.
    torch = sys.modules.get("torch")

    def write(handle: IO[bytes]) -> None:
        if torch is not None:
            torch.save(state, handle)
        else:
            pickle.dump(state, handle, protocol=pickle.HIGHEST_PROTOCOL)

    try:
        return write_atomically(directory, step, write)
    except (pickle.PicklingError, TypeError, AttributeError, RuntimeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(
            f"cannot checkpoint a {type(state).__name__} at step {step}: {detail}"
        ) from None
    except OSError as exc:
        raise CheckpointError(f"cannot write a checkpoint in {directory}: {exc}") from None


def load_latest_object(directory: Path) -> tuple[Path, Any] | None:
    """The newest checkpoint that loads; a torn or unreadable one is reported and skipped."""
    for _, path in checkpoints(directory):
        try:
            return path, _load(path)
        except Exception as exc:  # a torn or foreign file: fall back to an older checkpoint
            print(f"{path}: unreadable checkpoint skipped ({exc})", file=sys.stderr, flush=True)
    return None


def _load(path: Path) -> Any:
    with open(path, "rb") as handle:
        magic = handle.read(4)
        handle.seek(0)
        if magic != _ZIP_MAGIC:
            return pickle.load(handle)
        torch = _torch()
        if torch is None:
            raise CheckpointError(f"{path} was saved with torch, which is not installed")
        # The job's own checkpoint, written by this library: full unpickling is its own data.
        return torch.load(handle, map_location="cpu", weights_only=False)


def _torch() -> Any:
    """torch, to load a checkpoint it wrote; imported here only, never with `shock.job`."""
    module = sys.modules.get("torch")
    if module is not None:
        return module
    try:
        import torch
    except ImportError:
        return None
    return torch


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
