"""One job lease on a Ray cluster: an actor that runs the job process the gRPC worker runs.

The actor (created by `ray_transport.py` inside the lease's placement group) starts the job
command with `JobProcess` (the same contract, arguments, CPU bounds and kill semantics as a
worker agent's), buffers the job's events and hands them to the scheduler when it polls, and
relays the scheduler's lease, preempt and batch-size messages to the job's stdin. Importing
this module does not import Ray: the scheduler wraps the class with `ray.remote`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from shock.cluster.bounds import UNBOUNDED, JobBounds, threads_for
from shock.cluster.jobproc import JobProcess
from shock.cluster.runtime.messages import JobEvent, Launch


class JobLeaseActor:
    """Runs one job process for one run; every method returns at once except `events`,
    which waits (bounded) for something to report."""

    def __init__(
        self,
        launch: Launch,
        command: Sequence[str],
        use_cuda: bool,
        log_path: str,
        checkpoint_every_s: float | None,
    ) -> None:
        self._lock = threading.Condition()
        self._events: list[JobEvent] = []
        self._seq = 0
        self._lease_deadline = time.monotonic() + launch.lease_s
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        # Ray hands the actor its own CUDA device (CUDA_VISIBLE_DEVICES) when its bundle
        # holds a GPU; without one the job trains on the CPU (simulated GPUs).
        device = "cuda:0" if use_cuda else "cpu"
        # The grant's cores become torch threads; no CPU pinning, since Ray does not say
        # which cores of the node are this lease's.
        bounds = JobBounds(threads=threads_for(launch.cpus)) if launch.cpus > 0 else UNBOUNDED
        started: list[JobProcess] = []
        ready = threading.Event()

        def hold() -> None:
            # The job's parent-death signal is tied to the thread that starts it: one that
            # lives as long as the actor's process, not a pool thread Ray may retire.
            try:
                started.append(JobProcess(
                    launch, command, device, Path(log_path),
                    on_event=self._post, on_lease_request=self._renew_lease,
                    checkpoint_every_s=checkpoint_every_s, env=env, bounds=bounds,
                ))  # fmt: skip
            finally:
                ready.set()
            threading.Event().wait()

        threading.Thread(target=hold, name=f"run-{launch.run_id}", daemon=True).start()
        ready.wait()
        if not started:
            raise RuntimeError(f"could not start job {launch.job_id}: see {log_path}")
        self._job = started[0]

    def _post(self, job: JobProcess, event: JobEvent) -> None:
        with self._lock:
            self._seq += 1
            self._events.append(
                JobEvent(event.payload, self._seq, job.run_id, job.job_id, time.time())
            )
            self._lock.notify_all()

    def _renew_lease(self, job: JobProcess, step: int) -> None:
        """The job asks for more time: it gets what the scheduler granted so far."""
        left = self._lease_deadline - time.monotonic()
        if left > 0:
            job.send({"type": "lease", "seconds": left})

    def events(self, wait_s: float) -> tuple[list[JobEvent], bool]:
        """The events since the last call, waiting up to `wait_s`
        for one; and whether the job process is gone (then nothing more will come)."""
        with self._lock:
            if not self._events and not self._job.finished:
                self._lock.wait(timeout=wait_s)
            events, self._events = self._events, []
            return events, self._job.finished

    def lease(self, seconds: float) -> None:
        self._lease_deadline = time.monotonic() + seconds
        self._job.send({"type": "lease", "seconds": seconds})

    def preempt(self) -> None:
        """Checkpoint and stop now (the job's exit event follows)."""
        self._job.preempt()

    def batch_size(self, batch_size: int) -> None:
        self._job.send({"type": "batch_size", "batch_size": batch_size})

    def stop(self, grace_s: float) -> None:
        """Preempt, then end the process group after `grace_s` (before the actor is killed:
        killing the actor alone would leave the job process to its parent-death signal)."""
        self._job.preempt()
        self._job.kill(grace_s)
        with self._lock:
            self._lock.notify_all()

    def pid(self) -> int:
        return self._job.process.pid
