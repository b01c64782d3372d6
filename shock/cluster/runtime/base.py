"""The state every part of the runtime works on, and the few helpers they all use.

`Runtime` (`runtime.py`) is assembled from parts of one job each: the job service
(`job_book.py`, `job_views.py`), the workers' side (`worker_desk.py`), job events
(`job_events.py`) and the rounds the engine plans (`rounds.py`). Each part reads and writes
the state declared here, always under `lock`.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from shock.cluster.oplog import log_event
from shock.cluster.runtime.messages import Command, Exit, JobEvent
from shock.cluster.runtime.state import Placement, Run, RuntimeSettings, TrackedJob, WorkerSlot

if TYPE_CHECKING:
    from shock.cluster.journal import Journal
    from shock.cluster.round_times import RoundTimes
    from shock.core.executor import BatchSizeChange, PlannedUnit
    from shock.core.run import RunRequest
    from shock.engine.measured_throughputs import ThroughputEstimates


class Transport(Protocol):
    """How the runtime reaches its workers (`transport.py` has the polling one the gRPC
    adapter uses; `shock/cluster/ray_transport.py` the Ray adapter's). The runtime decides
    and keeps the books; a transport carries its commands to workers and feeds what they
    report back into it (`apply_event`, `worker_lost`, ...). Every method is called under
    the runtime's lock."""

    # The results' backend name.
    backend_name: str
    # A job on several GPUs runs as one process per GPU (a gang of ranks); False: as one
    # process holding all its GPUs.
    runs_gangs_as_ranks: bool
    # A lost run's process is gone with it (no lease to wait out before a relaunch).
    lost_runs_are_gone: bool

    def attach(self, runtime: RuntimeBase) -> None:
        """Bind to the runtime once its journal is loaded (before the engine starts)."""

    def send(self, worker_id: str, command: Command) -> None:
        """Carry one command to a worker."""

    def poll(self, now: float) -> None:
        """Each pass of the runtime's wait: take in reports, notice workers come and go."""

    def run_closed(self, run_id: int) -> None:
        """A run ended in the runtime's books: free whatever the transport holds for it."""

    def stop(self) -> None:
        """The run is over: stop the workers' jobs (bounded)."""


class RuntimeBase:
    request: RunRequest
    settings: RuntimeSettings
    transport: Transport
    journal: Journal
    estimates: ThroughputEstimates
    round_times: RoundTimes
    lock: threading.RLock
    changed: threading.Condition  # notified on every change a waiter may care about
    workers: dict[str, WorkerSlot]
    runs: dict[int, Run]
    jobs: dict[int, TrackedJob]
    t0: float
    t0_fixed: bool
    accepts_submissions: bool
    done: bool
    incarnation: str
    round_length: float
    checkpoint_root: Path
    grace_s: float
    _stop: threading.Event | None
    _failure: str | None
    _round_index: int
    _round_start: float
    _round_end: float
    _units: tuple[PlannedUnit, ...]
    _plan: dict[int, Placement]
    _round_runs: dict[int, list[int]]
    _gpu_owner: dict[int, tuple[str, int]]
    _cluster_signature: tuple[tuple[str, str, int], ...]
    _new_rates: dict[tuple[str, int, str], float]
    _new_batch_sizes: dict[int, BatchSizeChange]

    def _command(self, worker_id: str, command: Command) -> None:
        self.transport.send(worker_id, command)

    def _record(self, job_id: int, text: str, event: str = "job-event",
                level: int = logging.DEBUG, **fields: object) -> None:  # fmt: skip
        """A job's event: journaled for watchers (across restarts), logged for the operator."""
        self.journal.add_job_event(job_id, time.time(), text)
        log_event(event, f"job {job_id}: {text}", level, job=job_id, **fields)
        self.changed.notify_all()

    def _gang_parts(self, run: Run) -> list[tuple[str, tuple[int, ...]]]:
        """Where the run's whole gang holds GPUs, in rank order (one part for one process)."""
        ranks = [other for other in self.runs.values()
                 if other.lead_run_id == run.lead_run_id and other.ended_at is None]  # fmt: skip
        ranks = sorted(ranks, key=lambda other: other.rank) or [run]
        return [(other.worker_id, other.gpus) for other in ranks]

    def _ready_workers(self) -> int:
        return sum(1 for w in self.workers.values() if w.registered and w.alive)

    def _live_signature(self) -> tuple[tuple[str, str, int], ...]:
        return tuple(sorted(
            (w.worker_id, w.gpu_type, w.gpus)
            for w in self.workers.values() if w.registered and w.alive
        ))  # fmt: skip

    # Provided by the parts (job_events.py, rounds.py, worker_desk.py, job_views.py,
    # job_book.py).

    def apply_event(self, event: JobEvent) -> None:
        raise NotImplementedError

    def _order_batch_size(self, run: Run, batch_size: int) -> None:
        raise NotImplementedError

    def _live_placements(self) -> dict[int, Placement]:
        raise NotImplementedError

    def apply_exit(self, job: TrackedJob, run: Run | None, exit: Exit, now: float) -> None:
        raise NotImplementedError

    def worker_lost(self, slot: WorkerSlot, now: float, why: str) -> None:
        raise NotImplementedError

    def planned_unit(self, job_id: int) -> PlannedUnit | None:
        raise NotImplementedError

    def gpu_owner(self, gpu: int) -> tuple[str, int] | None:
        raise NotImplementedError

    def close_run(self, run: Run, now: float, reason: str, wait_for_lease: bool = True) -> None:
        raise NotImplementedError

    def _fix_rho(self, job: TrackedJob, ended: float) -> None:
        raise NotImplementedError

    def _end_job(self, job: TrackedJob, state: str, now: float, message: str) -> None:
        raise NotImplementedError

    def _state(self, job: TrackedJob) -> str:
        raise NotImplementedError
