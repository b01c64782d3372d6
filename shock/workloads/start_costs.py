"""What starting and restarting a job costs on a device: launch to first step, checkpoint
write and restore. `shock profile` measures them per job type; the simulator charges them
(`shock run --start-costs FILE`).

Launch to first step is measured as a job really starts: a fresh Python process that imports
torch, builds the workload on the device and takes one step (`python -m
shock.workloads.start_costs`); the seconds run from spawning it until it says the step is
done. Checkpoint and restore are timed in this process on the same workload: `torch.save`
of the model and optimiser state to a file, flushed and fsynced, and `torch.load` plus
`load_state_dict` of it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from shock.workloads.families import parse_job_type
from shock.workloads.profile import build_sized_workload


@dataclass(frozen=True, slots=True)
class StartCosts:
    job_type: str
    launch_s: float  # process spawn to the end of the first training step
    checkpoint_s: float  # writing model and optimiser state (fsynced)
    restore_s: float  # reading it back into the model and optimiser

    @property
    def restart_s(self) -> float:
        """A preemption: checkpoint, a new process's launch, restore."""
        return self.checkpoint_s + self.launch_s + self.restore_s


def measure_launch(job_type: str, device: str, size: str, seed: int) -> float:
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "shock.workloads.start_costs", "--job-type", job_type,
         "--device", device, "--workload-size", size, "--seed", str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert child.stdout is not None
    line = child.stdout.readline()
    elapsed = time.perf_counter() - started
    child.wait()
    if child.returncode != 0 or line.strip() != "first step done":
        raise RuntimeError(f"{job_type}: the launch probe failed (exit code {child.returncode})")
    return elapsed


def measure_checkpoint(job_type: str, device: str, size: str, seed: int) -> tuple[float, float]:
    family, batch_size = parse_job_type(job_type)
    workload = build_sized_workload(family, seed, device, size)
    workload.train_step(0, batch_size)  # the optimiser has its state
    with tempfile.TemporaryDirectory(prefix="shock-start-costs-") as scratch:
        path = Path(scratch) / "ckpt.pt"
        started = time.perf_counter()
        with open(path, "wb") as handle:
            state = {
                "model": workload.model.state_dict(),
                "optimizer": workload.optimizer.state_dict(),
            }
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        checkpoint_s = time.perf_counter() - started
        started = time.perf_counter()
        loaded = torch.load(path, map_location=workload.device, weights_only=True)
        workload.model.load_state_dict(loaded["model"])
        workload.optimizer.load_state_dict(loaded["optimizer"])
        if workload.device.type == "cuda":
            torch.cuda.synchronize(workload.device)
        restore_s = time.perf_counter() - started
    return checkpoint_s, restore_s


def measure_start_costs(
    job_type: str, device: str = "cpu", size: str = "standin", seed: int = 0
) -> StartCosts:
    launch_s = measure_launch(job_type, device, size, seed)
    checkpoint_s, restore_s = measure_checkpoint(job_type, device, size, seed)
    return StartCosts(job_type, launch_s, checkpoint_s, restore_s)


def start_costs_to_dict(gpu_type: str, costs: list[StartCosts]) -> dict[str, object]:
    """The side file `shock profile --start-costs` writes (`shock run --start-costs` reads)."""
    return {
        gpu_type: {
            c.job_type: {
                "launch_s": round(c.launch_s, 4),
                "checkpoint_s": round(c.checkpoint_s, 4),
                "restore_s": round(c.restore_s, 4),
            }
            for c in costs
        }
    }


def _first_step() -> None:
    """The launch probe: build the workload, take one step, say so."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-type", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workload-size", default="standin")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    family, batch_size = parse_job_type(args.job_type)
    workload = build_sized_workload(family, args.seed, args.device, args.workload_size)
    workload.train_step(0, batch_size)  # .item() waits for the device
    print("first step done", flush=True)


if __name__ == "__main__":
    _first_step()
