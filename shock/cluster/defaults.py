"""Names and defaults shared by the cluster's modules and the CLI (importing this module does
not import gRPC, so `shock` starts without the cluster extra)."""

from __future__ import annotations

import sys

TOKEN_ENV = "SHOCK_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 50051
# The real training harness; tests swap in a stand-in with `--job-command`.
DEFAULT_JOB_COMMAND: tuple[str, ...] = (sys.executable, "-m", "shock.workloads.run")
