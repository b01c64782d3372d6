"""Per-family step time, the harness's overhead and checkpoint cost, on this machine's CPU.

For each family at its smallest Gavel batch size (A3C, CycleGAN: their default), it times:
- bare: `Workload.train_step` in a loop (the baseline, measured in the same run),
- harness static / accordion / gns: the same steps through `TrainingHarness`
  (in-memory channel, progress every 0.2 s, no checkpoint inside the window),
- one checkpoint write (torch.save + fsync + rename) and its size.

    .venv/bin/python benchmarks/workloads.py [--steps 60] [--families LM,A3C]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from shock.job.channel import MemoryChannel
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
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
