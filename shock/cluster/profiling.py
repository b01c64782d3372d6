"""Profile job types through local worker agents (`shock profile --local-workers N`).

In-process profiling measures one job alone with the interpreter already warm. A cluster run
has its jobs in their own processes, several at once on one machine (simulated GPUs share
the CPU), so their rates differ. Here each job type runs as one job of a small trace on the
grpc backend (a scheduler and N local workers, as `shock run --backend grpc` starts them),
with as many jobs at once as the workers have GPUs, and its rate is read back from the
journal: its steps over the seconds from "started" until it stopped (start-up excluded,
`shock.cluster.timeline.average_rates`).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from shock.cluster.timeline import average_rates, run_timings
from shock.core.errors import ShockError
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.trace import write_trace
from shock.engine.runner import RunOptions, run
from shock.plugins.backends.grpc import GrpcOptions

# The policy that runs each job to its end once started: no preemption, clean rates.
PROFILE_POLICY = "fifo"
MIN_STEPS = 20


@dataclass(frozen=True, slots=True)
class WorkerProfile:
    job_type: str
    steps_per_s: float


def profile_through_workers(
    job_types: Sequence[str],
    guess_steps_per_s: Callable[[str], float],
    state_dir: Path,
    gpu_type: str = "v100",
    workers: int = 1,
    gpus_per_worker: int = 1,
    seconds: float = 10.0,
    job_command: tuple[str, ...] = (),
) -> list[WorkerProfile]:
    """Run each job type for about `seconds` (sized by `guess_steps_per_s`, e.g. a short
    in-process measurement) on local workers; returns each type's measured rate."""
    if workers < 1 or gpus_per_worker < 1 or seconds <= 0:
        raise ShockError("need at least one worker with one GPU and seconds > 0")
    specs = [
        JobSpec(i, job_type, max(MIN_STEPS, math.ceil(seconds * guess_steps_per_s(job_type))),
                command="python3 train.py", working_directory="wd", num_steps_arg="--num_steps")
        for i, job_type in enumerate(job_types)
    ]  # fmt: skip
    state_dir.mkdir(parents=True, exist_ok=True)
    trace = state_dir / "profile.trace"
    write_trace(specs, trace, default_registry(), "gavel")
    local = GrpcOptions(
        local_workers=workers, gpus_per_worker=gpus_per_worker, gpu_type=gpu_type,
        job_command=shlex.join(job_command) if job_command else None,
        state_dir=state_dir / "run",
    )  # fmt: skip
    run(RunOptions(
        policy=PROFILE_POLICY, backend="grpc", trace=str(trace), backend_options=local,
        # Rounds longer than any job: a started job runs to its end.
        round_length_s=max(60.0, 4 * seconds),
    ))  # fmt: skip
    rates = average_rates(run_timings(state_dir / "run", {}))
    missing = [job_type for job_type in job_types if rates.get(job_type, 0.0) <= 0]
    if missing:
        raise ShockError(f"no rate measured for {', '.join(missing)} (see the worker logs)")
    return [WorkerProfile(job_type, rates[job_type]) for job_type in job_types]
