"""FOR TESTS ONLY: a stand-in training job that speaks the job contract exactly.

It does no training: each step sleeps a fixed time that depends on the model family and batch
size, so tests know the true throughput. Everything else is the contract (docs/cluster.md,
"Job contract"): started/progress/checkpoint/lease_request/exit JSON lines on stdout, lease,
preempt and batch-size messages on stdin, SIGTERM as preempt, atomic checkpoints (temp file
+ os.replace) and resume from the latest one.

    python tests/fake_job.py --job-id 7 --job-type "ResNet-18 (batch size 32)" \
        --target-steps 500 --checkpoint-dir DIR --seed 0 [--lease-s S] ...

`--seconds-per-step` overrides the per-family step time; `--startup-s` delays the start (to
mimic a real job's imports and set-up).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

# Seconds per step at batch size 32 (so families differ, as real ones do).
FAMILY_STEP_S = {
    "ResNet-18": 0.05,
    "ResNet-50": 0.10,
    "Transformer": 0.08,
    "LM": 0.04,
    "Recommendation": 0.03,
    "A3C": 0.06,
    "CycleGAN": 0.12,
}


def step_seconds(job_type: str) -> float:
    family = job_type.split(" ", 1)[0]
    if family not in FAMILY_STEP_S:
        raise ValueError(f"unknown model family {family!r}")
    match = re.search(r"\(batch size (\d+)\)", job_type)
    batch = int(match.group(1)) if match else 32
    return FAMILY_STEP_S[family] * (batch / 32) ** 0.5


def emit(message: dict[str, object]) -> None:
    try:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass  # the agent is gone; keep going within the lease


class Control:
    """What the agent asked for, updated by the stdin thread and SIGTERM."""

    def __init__(self, lease_s: float | None, lease_steps: int | None, start_step: int) -> None:
        self.lock = threading.Lock()
        self.preempt = False
        now = time.monotonic()
        self.deadline = None if lease_s is None else now + lease_s
        self.step_limit = None if lease_steps is None else start_step + lease_steps
        self.requested = False
        self.batch_size: int | None = None

    def listen(self, step: list[int]) -> None:
        for line in sys.stdin:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self.lock:
                if message.get("type") == "preempt":
                    self.preempt = True
                elif message.get("type") == "lease":
                    if message.get("seconds") is not None:
                        self.deadline = time.monotonic() + float(message["seconds"])
                    if message.get("steps") is not None:
                        self.step_limit = step[0] + int(message["steps"])
                    self.requested = False
                elif message.get("type") == "batch_size":
                    self.batch_size = int(message["batch_size"])
        # EOF: ignored, training continues within the lease.


def latest_checkpoint(directory: Path) -> tuple[int, dict[str, object]] | None:
    best = None
    for path in directory.glob("ckpt-*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if best is None or data["step"] > best[0]:
            best = (int(data["step"]), data)
    return best


def write_checkpoint(directory: Path, step: int, batch_size: int) -> Path:
    path = directory / f"ckpt-{step}.json"
    temporary = directory / f".ckpt-{step}.json.tmp"
    temporary.write_text(json.dumps({"step": step, "batch_size": batch_size}))
    os.replace(temporary, path)
    for old in directory.glob("ckpt-*.json"):
        if old != path:
            old.unlink(missing_ok=True)
    return path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-id", type=int, required=True)
    parser.add_argument("--job-type", required=True)
    parser.add_argument("--target-steps", type=int, required=True)
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--adaptation", default="static")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--report-every-s", type=float, default=1.0)
    parser.add_argument("--lease-steps", type=int)
    parser.add_argument("--lease-s", type=float)
    parser.add_argument("--checkpoint-every-s", type=float, default=10.0)
    parser.add_argument("--num-threads", type=int, default=1)  # a CPU grant; nothing to bound here
    parser.add_argument("--seconds-per-step", type=float)
    parser.add_argument("--startup-s", type=float, default=0.0, help="mimic imports, model setup")
    args = parser.parse_args()
    time.sleep(args.startup_s)
    try:
        seconds_per_step = args.seconds_per_step or step_seconds(args.job_type)
    except ValueError as exc:
        emit({"type": "error", "message": str(exc)})
        return 1
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    found = latest_checkpoint(args.checkpoint_dir)
    step = found[0] if found else 0
    batch_size = int(found[1]["batch_size"]) if found else 32  # type: ignore[call-overload]
    control = Control(args.lease_s, args.lease_steps, step)
    signal.signal(signal.SIGTERM, lambda signum, frame: setattr(control, "preempt", True))
    shared_step = [step]
    threading.Thread(target=control.listen, args=(shared_step,), daemon=True).start()
    emit({"type": "started", "job_id": args.job_id, "step": step, "batch_size": batch_size,
          "resumed_from_step": step})  # fmt: skip

    def checkpoint() -> None:
        path = write_checkpoint(args.checkpoint_dir, step, batch_size)
        emit({"type": "checkpoint", "step": step, "path": str(path)})

    last_report = last_checkpoint = time.monotonic()
    report_step = step
    reason = "done"
    while step < args.target_steps:
        with control.lock:
            now = time.monotonic()
            if control.preempt:
                reason = "preempted"
                break
            if (control.deadline is not None and now >= control.deadline) or (
                control.step_limit is not None and step >= control.step_limit
            ):
                reason = "lease_expired"
                break
            near_end = (
                control.deadline is not None
                and control.deadline - now <= 0.1 * max(args.lease_s or 0.0, 1.0)
            )
            if near_end and not control.requested:
                control.requested = True
                emit({"type": "lease_request", "step": step})
            if control.batch_size is not None:
                batch_size, control.batch_size = control.batch_size, None
        time.sleep(seconds_per_step)
        step += 1
        shared_step[0] = step
        now = time.monotonic()
        if now - last_report >= args.report_every_s:
            emit({"type": "progress", "step": step,
                  "steps_per_s": (step - report_step) / (now - last_report),
                  "batch_size": batch_size, "loss": 1.0 / (1 + step)})  # fmt: skip
            last_report, report_step = now, step
        if now - last_checkpoint >= args.checkpoint_every_s:
            checkpoint()
            last_checkpoint = now
    checkpoint()
    emit({"type": "exit", "reason": reason, "step": step, "target_steps": args.target_steps})
    return 0


if __name__ == "__main__":
    sys.exit(main())
