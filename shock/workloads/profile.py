"""Measure a workload's throughput on this machine: steps per second at its batch size."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from shock.workloads.families import parse_job_type
from shock.workloads.workload import Workload, build_workload

WORKLOAD_SIZES = ("standin", "full")


def build_sized_workload(family: str, seed: int, device: str, size: str) -> Workload:
    """The CPU stand-in (default) or the full-size model (`--workload-size full`)."""
    if size == "full":
        from shock.workloads.full.workload import build_full_workload

        return build_full_workload(family, seed, device)
    if size != "standin":
        choices = ", ".join(WORKLOAD_SIZES)
        raise ValueError(f"--workload-size: expected one of {choices}, got {size!r}")
    return build_workload(family, seed, device)


@dataclass(frozen=True, slots=True)
class ProfileResult:
    job_type: str
    batch_size: int
    steps: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds

    @property
    def ms_per_step(self) -> float:
        return 1000.0 * self.seconds / self.steps


def measure_throughput(
    job_type: str,
    device: str = "cpu",
    seconds: float = 1.0,
    warmup_steps: int = 3,
    min_steps: int = 3,
    seed: int = 0,
    size: str = "standin",
) -> ProfileResult:
    """Train `warmup_steps` unmeasured steps, then at least `min_steps` and `seconds`."""
    if seconds <= 0 or warmup_steps < 0 or min_steps < 1:
        raise ValueError("need seconds > 0, warmup_steps >= 0 and min_steps >= 1")
    family, batch_size = parse_job_type(job_type)
    workload = build_sized_workload(family, seed, device, size)
    position = 0
    for _ in range(warmup_steps):
        workload.train_step(position, batch_size)
        position += batch_size
    _synchronize(workload.device)
    start = time.perf_counter()
    steps = 0
    while True:
        workload.train_step(position, batch_size)
        position += batch_size
        steps += 1
        if steps >= min_steps:
            _synchronize(workload.device)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return ProfileResult(job_type, batch_size, steps, elapsed)


def _synchronize(device: torch.device) -> None:
    # train_step's loss.item() already waits for the GPU; this keeps the timing honest anyway.
    if device.type == "cuda":
        torch.cuda.synchronize(device)
