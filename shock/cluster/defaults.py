"""Names and defaults shared by the cluster's modules and the CLI (importing this module does
not import gRPC, so `shock` starts without the cluster extra)."""

from __future__ import annotations

import sys

TOKEN_ENV = "SHOCK_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 50051
# The real training harness; tests swap in a stand-in with `--job-command`.
DEFAULT_JOB_COMMAND: tuple[str, ...] = (sys.executable, "-m", "shock.workloads.run")


def with_default_port(address: str) -> str:
    """`host:port` as given; a bare host (`scheduler.lab`, `[::1]`) gets the default port,
    DEFAULT_PORT (gRPC would otherwise try 443)."""
    address = address.strip()
    if address.startswith("["):  # [IPv6] or [IPv6]:port
        return address if "]:" in address else f"{address}:{DEFAULT_PORT}"
    if address.count(":") == 1 or "://" in address:  # host:port, or a gRPC target URI
        return address
    if ":" in address:  # a bare IPv6 address
        return f"[{address}]:{DEFAULT_PORT}"
    return f"{address}:{DEFAULT_PORT}"
