"""One Ray-using test module at a time across pytest-xdist's workers.

Ray instances started side by side on one machine by different test processes disturb each
other (shared per-user files such as ~/.ray, ports picked in the same ranges), so each module
that starts Ray holds an exclusive lock on one file for as long as it runs; the other worker
waits for it (a state, not a time) and then starts its own.
"""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = Path(tempfile.gettempdir()) / "shock-tests-ray.lock"


@contextmanager
def ray_to_ourselves() -> Iterator[None]:
    with LOCK_FILE.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
