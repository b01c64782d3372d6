"""Per-family step time, the harness's overhead and checkpoint cost, on this machine's CPU.

For each family at its smallest Gavel batch size (A3C, CycleGAN: their default), it times:
- bare: `Workload.train_step` in a loop (the baseline, measured in the same run),
- harness static / accordion / gns: the same steps through `TrainingHarness`
  (in-memory channel, progress every 0.2 s, no checkpoint inside the window),
- one checkpoint write (torch.save + fsync + rename) and its size;

and what `shock.job` costs a person's loop per step: the issue's loop (`s.steps()` plus
`s.checkpoint_due()`, empty steps) against a bare `range()` loop measured in the same run, in
CPU seconds of the process (its channel's reader thread and an agent draining the reports
included), locally and under a (stand-in) agent over pipes, as a share of a 10 ms step.

    .venv/bin/python benchmarks/workloads.py [--steps 60] [--families LM,A3C]
        [--library-steps 200000] [--library-only]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import torch

from shock.job.channel import MemoryChannel, NullChannel, StdioChannel
from shock.job.environment import read_environment
from shock.job.session import Session
from shock.workloads.families import FAMILIES
from shock.workloads.harness import JobConfig, TrainingHarness
from shock.workloads.workload import build_workload


def bare_ms_per_step(family: str, batch_size: int, steps: int) -> float:
    workload = build_workload(family, seed=0)
    workload.train_step(0, batch_size)  # warm-up
    start = time.perf_counter()
    for index in range(1, steps + 1):
        workload.train_step(index * batch_size, batch_size)
    return 1000 * (time.perf_counter() - start) / steps


def harness_ms_per_step(job_type: str, steps: int, mode: str, root: Path) -> float:
    config = JobConfig(
        job_id=0,
        job_type=job_type,
        target_steps=steps + 1,
        checkpoint_dir=root / f"{mode}-{job_type}",
        adaptation=mode,
        report_every_s=0.2,
        checkpoint_every_s=3600.0,
    )
    harness = TrainingHarness(config, MemoryChannel())
    # One warm-up step through the harness, then time the rest (the final checkpoint excluded).
    harness._train_step()
    start = time.perf_counter()
    for _ in range(steps):
        harness._train_step()
    return 1000 * (time.perf_counter() - start) / steps


def checkpoint_cost(job_type: str, root: Path) -> tuple[float, int]:
    config = JobConfig(job_id=0, job_type=job_type, target_steps=3, checkpoint_dir=root / "ck")
    harness = TrainingHarness(config, MemoryChannel())
    harness._train_step()
    start = time.perf_counter()
    harness._checkpoint(time.monotonic())
    elapsed = time.perf_counter() - start
    path = next((root / "ck").glob("ckpt-*.pt"))
    return 1000 * elapsed, path.stat().st_size


REFERENCE_STEP_S = 0.010  # the step the library's cost is measured against


def bare_loop_s(steps: int) -> float:
    state = {"step": 0}
    start = time.process_time()
    for step in range(steps):
        state["step"] = step + 1
    return time.process_time() - start


def session_loop_s(steps: int, under_agent: bool, root: Path) -> float:
    """The issue's loop with empty steps, CPU seconds (checkpoints never due inside)."""
    drain: threading.Thread | None = None
    if under_agent:
        to_job_read, to_job_write = os.pipe()
        from_job_read, from_job_write = os.pipe()
        channel = StdioChannel(os.fdopen(from_job_write, "w"), os.fdopen(to_job_read, "r"))

        def agent() -> None:  # reads the job's reports as a worker would
            with os.fdopen(from_job_read, "rb") as reports:
                for _ in reports:
                    pass

        drain = threading.Thread(target=agent, daemon=True)
        drain.start()
        environment = read_environment({"SHOCK_CHANNEL": f"{to_job_read},{from_job_write}",
                                        "SHOCK_CHECKPOINT_EVERY_S": "3600"})  # fmt: skip
        session = Session(environment, channel, checkpoint_dir=root / "agent")
    else:
        environment = read_environment({"SHOCK_CHECKPOINT_EVERY_S": "3600"})
        session = Session(environment, NullChannel(), checkpoint_dir=root / "local")
    state = {"step": 0}
    start = time.process_time()
    for step in session.steps(total=steps, start=0):
        state["step"] = step + 1
        if session.checkpoint_due():
            session.checkpoint(state)
    elapsed = time.process_time() - start
    if under_agent:
        session.close()
        os.close(to_job_write)
    return elapsed


def library_table(steps: int) -> None:
    header = (f"{'shock.job loop':22} {'steps':>8} {'bare us/step':>12} {'us/step':>8} "
              f"{'library us':>10} {'of a 10 ms step':>15}")  # fmt: skip
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as scratch:
        for label, under_agent in (("local session", False), ("under an agent (pipes)", True)):
            bare = bare_loop_s(steps)
            timed = session_loop_s(steps, under_agent, Path(scratch))
            cost = (timed - bare) / steps
            print(f"{label:22} {steps:>8} {1e6 * bare / steps:>12.2f} "
                  f"{1e6 * timed / steps:>8.2f} {1e6 * cost:>10.2f} "
                  f"{100 * cost / REFERENCE_STEP_S:>14.3f}%")  # fmt: skip
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--library-steps", type=int, default=200_000)
    parser.add_argument("--library-only", action="store_true")
    args = parser.parse_args()
    library_table(args.library_steps)
    if args.library_only:
        return
    torch.set_num_threads(1)
    header = (
        f"{'family':15} {'bs':>5} {'bare ms':>8} {'static':>8} {'accord.':>8} {'gns':>8} "
        f"{'static/bare':>11} {'gns/bare':>9} {'ckpt ms':>8} {'ckpt KiB':>9}"
    )
    print(header)
    print("-" * len(header))
    for family in args.families.split(","):
        spec = FAMILIES[family]
        batch_size = spec.default_batch_size
        job_type = f"{family} (batch size {batch_size})"
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            bare = bare_ms_per_step(family, batch_size, args.steps)
            timed = {
                mode: harness_ms_per_step(job_type, args.steps, mode, root)
                for mode in ("static", "accordion", "gns")
            }
            checkpoint_ms, size = checkpoint_cost(job_type, root)
        print(
            f"{family:15} {batch_size:>5} {bare:>8.2f} {timed['static']:>8.2f} "
            f"{timed['accordion']:>8.2f} {timed['gns']:>8.2f} {timed['static'] / bare:>11.2f} "
            f"{timed['gns'] / bare:>9.2f} {checkpoint_ms:>8.1f} {size / 1024:>9.0f}"
        )


if __name__ == "__main__":
    main()
