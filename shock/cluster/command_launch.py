"""A person's own command as a job process: its environment (the job contract's fields as
variables, docs/your-own-jobs.md) and its start.

The job talks to its agent over two pipes named in `SHOCK_CHANNEL` (JSON lines both ways,
the same messages as the built-in harness's stdin/stdout), so everything the command
prints, on stdout and stderr, goes to its job log.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from shock.cluster.bounds import JobBounds, child_setup, thread_environment
from shock.cluster.runtime.messages import Launch
from shock.job import environment as contract


class CommandStartError(Exception):
    """The command could not be started (missing, not executable, no such directory)."""


@dataclass(slots=True)
class CommandProcess:
    process: subprocess.Popen[bytes]
    events: IO[bytes]  # the job's messages
    commands: IO[bytes]  # the agent's commands to it


def command_environment(
    launch: Launch,
    device: str,
    checkpoint_every_s: float | None,
    base: dict[str, str],
    bounds: JobBounds,
    channel_fds: tuple[int, int],
) -> dict[str, str]:
    """The agent's environment, the user's `--env`, then the contract's variables (which a
    user's variable cannot override)."""
    env = thread_environment(dict(base), bounds) | dict(launch.env)
    fields = {
        contract.JOB_ID: str(launch.job_id),
        contract.RUN_ID: str(launch.run_id),
        contract.CHANNEL: f"{channel_fds[0]},{channel_fds[1]}",
        contract.CHECKPOINT_DIR: launch.checkpoint_dir,
        contract.ADAPTATION: launch.adaptation or "static",
    }
    if device.startswith("cuda"):
        # The job sees its own GPUs only, as cuda:0, cuda:1, ...
        fields["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in launch.gpus)
        fields[contract.DEVICE] = "cuda:0"
    else:
        fields["CUDA_VISIBLE_DEVICES"] = ""  # a simulated GPU: the job runs on the CPU
        fields[contract.DEVICE] = "cpu"
    if launch.lease_s > 0:
        fields[contract.LEASE_S] = f"{launch.lease_s:.3f}"
    if checkpoint_every_s is not None:
        fields[contract.CHECKPOINT_EVERY_S] = str(checkpoint_every_s)
    if launch.target_steps > 0:
        fields[contract.TARGET_STEPS] = str(launch.target_steps)
    if launch.world_size > 1:
        fields |= {
            contract.RANK: str(launch.rank),
            contract.WORLD_SIZE: str(launch.world_size),
            contract.LOCAL_RANK: str(launch.local_rank),
            contract.MASTER_ADDR: launch.master_addr,
            contract.MASTER_PORT: str(launch.master_port),
        }
    return env | fields


def start_command(
    launch: Launch,
    device: str,
    checkpoint_every_s: float | None,
    base_env: dict[str, str],
    bounds: JobBounds,
    log: IO[bytes],
    on_start: Callable[[], None],
) -> CommandProcess:
    """Start the command in its working directory, stdout and stderr into `log`;
    CommandStartError in one line when it cannot start."""
    to_job_read, to_job_write = os.pipe()
    from_job_read, from_job_write = os.pipe()
    child_fds = (to_job_read, from_job_write)
    env = command_environment(
        launch, device, checkpoint_every_s, base_env, bounds, child_fds
    )
    workdir = launch.workdir or None
    try:
        if workdir is not None and not Path(workdir).is_dir():
            raise CommandStartError(f"working directory {workdir} does not exist on this worker")
        process = subprocess.Popen(
            list(launch.command),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=child_fds,
            start_new_session=True,  # its own process group: stop it with its children
            preexec_fn=child_setup(bounds, on_start),
            env=env,
        )
    except (OSError, CommandStartError) as exc:
        for fd in (*child_fds, to_job_write, from_job_read):
            with contextlib.suppress(OSError):
                os.close(fd)
        if isinstance(exc, CommandStartError):
            raise
        reason = exc.strerror or str(exc)
        raise CommandStartError(f"cannot start {launch.command[0]!r}: {reason}") from None
    for fd in child_fds:
        os.close(fd)
    return CommandProcess(
        process, os.fdopen(from_job_read, "rb"), os.fdopen(to_job_write, "wb")
    )
