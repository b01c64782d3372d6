"""Install the example plugin packages (examples/) into this interpreter, once, as a user's
`pip install -e` would, so that the `shock` entry points they declare are found."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _distribution_installed(distribution: str) -> bool:
    """Whether the package's metadata is on sys.path (also after another process installed
    it: an editable install's import hook only takes effect in interpreters started later)."""
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _builds_editable_without_isolation() -> bool:
    """Whether this interpreter's setuptools can build a PEP 660 editable wheel by itself:
    it needs setuptools >= 64, and before 70.1 also the separate `wheel` package."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        return False
    major_minor = (int(found[1]), int(found[2]))
    has_wheel = importlib.util.find_spec("wheel") is not None
    return major_minor >= (70, 1) or (major_minor >= (64, 0) and has_wheel)


@contextmanager
def _install_lock(distribution: str) -> Iterator[None]:
    """Serialise installs across pytest-xdist workers (each runs the modules' fixtures)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no parallel workers to guard against
        yield
        return
    lock_path = Path(tempfile.gettempdir()) / f"{distribution}-install.lock"
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install_example(directory: str, distribution: str, module: str) -> None:
    """`pip install -e examples/<directory>` unless `module` is importable already; skips the
    test when this interpreter cannot build it."""
    source = EXAMPLES / directory
    if importlib.util.find_spec(module) is not None:
        return
    if importlib.util.find_spec("pip") is None:
        pytest.skip(f"pip is not available in {sys.executable}; cannot install {source}")
    with _install_lock(distribution):
        if _distribution_installed(distribution):
            return
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "-e",
            str(source),
        ]
        isolated = not _builds_editable_without_isolation()
        if isolated:
            # Old setuptools without `wheel` (e.g. Python 3.11's bundled 65.5): let pip fetch a
            # build backend into an isolated environment instead.
            command.remove("--no-build-isolation")
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-3000:]
        if isolated:
            pytest.skip(
                "cannot build the example plugin: this interpreter's setuptools cannot build "
                "editable wheels without isolation (install `wheel` or setuptools>=70.1) and "
                f"the isolated build failed:\n{output}"
            )
        pytest.fail(f"pip install -e {source} failed:\n{output}")
    importlib.invalidate_caches()


@contextmanager
def example_module(package: str, source_dir: Path, module: str) -> Iterator[ModuleType]:
    """`package.module` of an example, installed or straight from its source tree."""
    added = importlib.util.find_spec(package) is None
    if added:
        sys.path.insert(0, str(source_dir))
    try:
        yield importlib.import_module(f"{package}.{module}")
    finally:
        if added:
            sys.path.remove(str(source_dir))
