"""Run the `shock` command in a subprocess, as a user would (shared by the CLI tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_shock(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Without COLUMNS rich lays out for 80 columns, as for any non-terminal output.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "shock", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_shock_wide(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m shock ...` in a fresh interpreter (which sees newly installed plugins), wide
    enough that no table cell wraps."""
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "shock", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )
