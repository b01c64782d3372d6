"""`python -m shock.workloads.run`: one job run, driven by its agent over stdin/stdout.

JSON-line messages go to stdout; everything else the process prints goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from shock.core.errors import ShockError
from shock.workloads.families import parse_job_type


class _ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # The agent reads errors on stdout as JSON: report bad arguments the same way.
        raise _ArgumentError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m shock.workloads.run",
        description="Train one shock workload under a lease (see docs/workloads.md).",
    )
    parser.add_argument("--job-id", type=int, required=True)
    parser.add_argument("--job-type", required=True, help='e.g. "ResNet-18 (batch size 32)"')
    parser.add_argument("--target-steps", type=int, required=True)
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--adaptation", choices=("static", "accordion", "gns"), default="static")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--report-every-s", type=float, default=1.0)
    parser.add_argument("--lease-steps", type=int, default=None)
    parser.add_argument("--lease-s", type=float, default=None)
    parser.add_argument("--checkpoint-every-s", type=float, default=10.0)
    parser.add_argument(
        "--adaptation-window-samples",
        type=int,
        default=None,
        help="samples per Accordion/GNS window (default: one epoch of the synthetic data)",
    )
    parser.add_argument("--num-threads", type=int, default=1, help="torch intra-op threads")
    gang = parser.add_argument_group("gang", "one rank of a data-parallel job on several GPUs")
    gang.add_argument("--world-size", type=int, default=1, help="ranks in the gang (1: alone)")
    gang.add_argument("--rank", type=int, default=0)
    gang.add_argument("--local-rank", type=int, default=0, help="its index on this machine")
    gang.add_argument("--master-addr", default="", help="rank 0's host, where the gang meets")
    gang.add_argument("--master-port", type=int, default=0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    launched_at = time.monotonic()  # --lease-s counts from here, start-up included
    # The agent reads JSON lines on stdout: keep every other print off it.
    messages_out = sys.stdout
    sys.stdout = sys.stderr
    from shock.job.channel import StdioChannel
    from shock.job.messages import Error

    channel = StdioChannel(messages_out, sys.stdin)
    try:
        args = build_parser().parse_args(argv)
    except _ArgumentError as exc:
        channel.send(Error(f"bad arguments: {exc}"))
        return 1
    # SIGTERM may come while the workload is still being built: remember it until then.
    stop_requests: list[Callable[[], None]] = []
    terminated = False

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        nonlocal terminated
        terminated = True
        for stop in stop_requests:
            stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        parse_job_type(args.job_type)  # fail fast, before importing torch
        import torch

        from shock.job.limits import observed_limits
        from shock.workloads.gang import Rendezvous
        from shock.workloads.harness import JobConfig, TrainingHarness
        from shock.workloads.workload import check_device

        torch.set_num_threads(args.num_threads)
        check_device(args.device)
        config = JobConfig(
            job_id=args.job_id,
            job_type=args.job_type,
            target_steps=args.target_steps,
            checkpoint_dir=args.checkpoint_dir,
            seed=args.seed,
            adaptation=args.adaptation,
            device=args.device,
            report_every_s=args.report_every_s,
            lease_steps=args.lease_steps,
            lease_s=args.lease_s,
            checkpoint_every_s=args.checkpoint_every_s,
            adaptation_window_samples=args.adaptation_window_samples,
            rendezvous=None if args.world_size <= 1 else Rendezvous(
                args.rank, args.world_size, args.master_addr, args.master_port, args.local_rank
            ),
        )
        limits = observed_limits(torch.get_num_threads())
        harness = TrainingHarness(config, channel, launched_at=launched_at, limits=limits)
        stop_requests.append(harness.preempt)
        if terminated:
            harness.preempt()
        harness.run()
    except (ShockError, ValueError, OSError) as exc:
        channel.send(Error(str(exc)))
        return 1
    except Exception as exc:  # a crash: still tell the agent, and keep the traceback on stderr
        traceback.print_exc()
        channel.send(Error(f"{type(exc).__name__}: {exc}"))
        return 1
    return 0


def exit_now(code: int) -> NoReturn:
    """End the process without the interpreter's teardown (a second or more for torch on a
    loaded CPU): the job's checkpoint is on disk and its exit line sent, and its agent
    frees its GPU only once the process is gone."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()  # type: ignore[union-attr]
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
