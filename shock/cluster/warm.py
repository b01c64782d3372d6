"""Warm job processes: interpreters that imported torch before their launch arrives.

Starting a job process means seconds of imports before its first step (2-5 s for torch on a
loaded CPU), paid at every (re)launch and so in every round a job moves. The agent keeps
up to one spare per GPU (`python -m shock.workloads.warm`), started ahead of time, and
hands a launch to a spare when one is ready. Only for the default job command: a custom
one is started as it is. Spares are started from the agent's main thread (their
parent-death signal is tied to the thread that forks them) and end with the agent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from shock.cluster.jobproc import die_with_parent

WARM_COMMAND: tuple[str, ...] = (sys.executable, "-m", "shock.workloads.warm")


class WarmPool:
    def __init__(self, size: int, log_path: Path, env: dict[str, str]) -> None:
        self.size = size
        self._log_path = log_path
        self._env = env
        self._spares: list[subprocess.Popen[bytes]] = []

    def fill(self) -> None:
        """Start spares until there are `size` live ones. A spare that ended before its
        launch (it could not import the harness) turns warming off: launches start cold,
        where the error reaches the scheduler, instead of spares crashing in a loop."""
        if any(p.poll() is not None for p in self._spares):
            self.close()
            self.size = 0
        if len(self._spares) >= self.size:
            return
        if len(self._spares) >= self.size:
            return
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as log:
            while len(self._spares) < self.size:
                self._spares.append(subprocess.Popen(
                    WARM_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                    start_new_session=True, preexec_fn=die_with_parent, env=self._env,
                ))  # fmt: skip

    def take(self) -> subprocess.Popen[bytes] | None:
        """A live spare, no longer the pool's; None when none is ready."""
        while self._spares:
            process = self._spares.pop(0)
            if process.poll() is None:
                return process
        return None

    def close(self) -> None:
        """End every spare: closing its stdin tells it it will never be launched."""
        for process in self._spares:
            with contextlib.suppress(OSError, ValueError):
                if process.stdin is not None:
                    process.stdin.close()
        for process in self._spares:
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
            if process.stdout is not None:
                process.stdout.close()
        self._spares = []
