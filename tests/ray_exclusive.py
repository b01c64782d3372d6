"""One Ray-using test module at a time across pytest-xdist's workers.

Ray instances started side by side on one machine by different test processes disturb each
other (shared per-user files such as ~/.ray, ports picked in the same ranges), so each module
that starts Ray holds an exclusive lock on one file for as long as it runs; the other worker
waits for it (a state, not a time) and then starts its own.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = Path(tempfile.gettempdir()) / "shock-tests-ray.lock"
# Ray's ports listen on every interface: every instance the tests start requires a token.
# Ray keeps the first token a process uses, so all of a test process's instances share one.
TOKEN = secrets.token_hex(32)


@contextmanager
def ray_to_ourselves() -> Iterator[None]:
    """Hold the lock, with Ray's token authentication set to the tests' own token."""
    with LOCK_FILE.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        previous = {name: os.environ.get(name) for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)
        try:
            yield
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            fcntl.flock(handle, fcntl.LOCK_UN)
