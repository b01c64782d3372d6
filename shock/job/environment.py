"""The environment a worker agent gives a job's command: the job contract's fields as
variables, read back here as one typed record (no torch, no gRPC).

Outside shock none of them is set and the job runs as a local session.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import ShockError

JOB_ID = "SHOCK_JOB_ID"
RUN_ID = "SHOCK_RUN_ID"
CHANNEL = "SHOCK_CHANNEL"  # "READ_FD,WRITE_FD": commands in, messages out
CHECKPOINT_DIR = "SHOCK_CHECKPOINT_DIR"
CHECKPOINT_EVERY_S = "SHOCK_CHECKPOINT_EVERY_S"
DEVICE = "SHOCK_DEVICE"
LEASE_S = "SHOCK_LEASE_S"
TARGET_STEPS = "SHOCK_TARGET_STEPS"
BATCH_SIZE = "SHOCK_BATCH_SIZE"
ADAPTATION = "SHOCK_ADAPTATION"
REPORT_EVERY_S = "SHOCK_REPORT_EVERY_S"
# A gang's rendezvous, also under torch.distributed's own names (init_method="env://").
RANK, WORLD_SIZE, LOCAL_RANK = "RANK", "WORLD_SIZE", "LOCAL_RANK"
MASTER_ADDR, MASTER_PORT = "MASTER_ADDR", "MASTER_PORT"

DEFAULT_CHECKPOINT_EVERY_S = 10.0
DEFAULT_REPORT_EVERY_S = 1.0
LOCAL_CHECKPOINT_DIR = Path("shock-checkpoints")


class JobEnvironmentError(ShockError):
    """A contract variable that does not parse (names the variable)."""


@dataclass(frozen=True, slots=True)
class JobEnvironment:
    """What this process was launched with; `job_id` None: not launched by shock."""

    job_id: int | None
    run_id: int | None
    channel_fds: tuple[int, int] | None
    checkpoint_dir: Path
    checkpoint_every_s: float
    report_every_s: float
    device: str
    lease_s: float | None
    target_steps: int | None
    batch_size: int | None
    adaptation: str
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int

    @property
    def under_shock(self) -> bool:
        return self.channel_fds is not None


def read_environment(environ: Mapping[str, str] | None = None) -> JobEnvironment:
    env = os.environ if environ is None else environ
    channel = env.get(CHANNEL)
    fds: tuple[int, int] | None = None
    if channel:
        parts = channel.split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise JobEnvironmentError(f"{CHANNEL}: expected 'READ_FD,WRITE_FD', got {channel!r}")
        fds = (int(parts[0]), int(parts[1]))
    return JobEnvironment(
        job_id=_int(env, JOB_ID),
        run_id=_int(env, RUN_ID),
        channel_fds=fds,
        checkpoint_dir=Path(env.get(CHECKPOINT_DIR) or LOCAL_CHECKPOINT_DIR),
        checkpoint_every_s=_seconds(env, CHECKPOINT_EVERY_S) or DEFAULT_CHECKPOINT_EVERY_S,
        report_every_s=_seconds(env, REPORT_EVERY_S) or DEFAULT_REPORT_EVERY_S,
        device=env.get(DEVICE) or "cpu",
        lease_s=_seconds(env, LEASE_S),
        target_steps=_int(env, TARGET_STEPS) or None,
        batch_size=_int(env, BATCH_SIZE) or None,
        adaptation=env.get(ADAPTATION) or "static",
        rank=_int(env, RANK) or 0,
        world_size=_int(env, WORLD_SIZE) or 1,
        local_rank=_int(env, LOCAL_RANK) or 0,
        master_addr=env.get(MASTER_ADDR, ""),
        master_port=_int(env, MASTER_PORT) or 0,
    )


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise JobEnvironmentError(f"{name}: expected an integer, got {raw!r}") from None
    if value < 0:
        raise JobEnvironmentError(f"{name}: expected an integer >= 0, got {raw!r}")
    return value


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise JobEnvironmentError(f"{name}: expected seconds, got {raw!r}") from None
    if not value > 0:
        raise JobEnvironmentError(f"{name}: expected seconds > 0, got {raw!r}")
    return value
