"""Which names each installed plugin registers, cached so that a command imports only the
plugin modules whose names it looks up.

After a full load of the entry-point group, a manifest records for each entry point the
(kind, name) pairs its module registered, whether it implements an observer hook (such a
module is always loaded: the engine calls observers without looking them up), and the size
and modification time of its module file. The manifest's file name is a digest of the
installed entry points and their distributions' versions, so installing, removing or
upgrading a plugin package starts a new one; a manifest whose module files changed since is
not used. A stale manifest costs speed, never a result: a name it does not know makes the
registry load every plugin. Third-party entry points are recorded exactly like shock's own.

The cache lives in `$SHOCK_CACHE_DIR`, else `$XDG_CACHE_HOME/shock`, else `~/.cache/shock`;
where it cannot be written, every command loads every plugin as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST_VERSION = 1
# A module file as recorded: path, modification time (ns), size.
FileStamp = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class InstalledEntryPoint:
    """One entry point of the group, as found without importing it."""

    name: str
    value: str
    module: str
    provider: str  # the distribution's name (the target where none is known)
    version: str  # the distribution's version ("" where none is known)
    location: str  # where the distribution is installed (each environment its own manifest)


@dataclass(frozen=True, slots=True)
class DeclaredPlugin:
    """What one entry point's module registered when it was last loaded."""

    names: tuple[tuple[str, str], ...]  # (kind, name)
    observes: bool  # implements an observer hook: loaded with every registry
    files: tuple[FileStamp, ...]


def cache_directory() -> Path:
    explicit = os.environ.get("SHOCK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "shock"


def manifest_path(installed: list[InstalledEntryPoint]) -> Path:
    """The manifest's file for exactly this set of entry points (and this Python)."""
    fields = sorted((e.name, e.value, e.provider, e.version, e.location) for e in installed)
    text = json.dumps([MANIFEST_VERSION, sys.version, fields])
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    return cache_directory() / f"plugins-{digest}.json"


def file_stamp(path: str) -> FileStamp | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (path, found.st_mtime_ns, found.st_size)


def module_stamps(module_name: str) -> tuple[FileStamp, ...]:
    """The stamp of an imported module's file (none for a module without one)."""
    path = getattr(sys.modules.get(module_name), "__file__", None)
    stamp = file_stamp(path) if isinstance(path, str) else None
    return () if stamp is None else (stamp,)


def read_manifest(path: Path) -> dict[str, DeclaredPlugin] | None:
    """The manifest at `path` by entry-point name; None where there is none, it cannot be
    read, or a module file it recorded changed since."""
    try:
        raw = json.loads(path.read_text())
        if raw.get("version") != MANIFEST_VERSION:
            return None
        plugins = {
            name: DeclaredPlugin(
                tuple((str(kind), str(n)) for kind, n in entry["names"]),
                bool(entry["observes"]),
                tuple((str(p), int(m), int(s)) for p, m, s in entry["files"]),
            )
            for name, entry in raw["entry_points"].items()
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    for plugin in plugins.values():
        for stamp in plugin.files:
            if file_stamp(stamp[0]) != stamp:
                return None
    return plugins


def write_manifest(path: Path, plugins: dict[str, DeclaredPlugin]) -> None:
    """Write the manifest atomically (concurrent commands may write the same one); a cache
    that cannot be written is left alone."""
    document = {
        "version": MANIFEST_VERSION,
        "entry_points": {
            name: {
                "names": [list(pair) for pair in plugin.names],
                "observes": plugin.observes,
                "files": [list(stamp) for stamp in plugin.files],
            }
            for name, plugin in plugins.items()
        },
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".plugins-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(document, out)
        os.replace(temporary, path)
    except OSError:
        forget_manifest(Path(temporary))


def forget_manifest(path: Path) -> None:
    """Remove a manifest found stale; the next full load writes it anew."""
    try:
        path.unlink()
    except OSError:
        return
