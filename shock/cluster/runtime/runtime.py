"""The runtime: the engine's executor for real jobs, and what its adapters call.

The engine (shock/engine/engine.py) decides; the runtime carries each round out in
wall-clock time. For every planned job it extends the lease of its run if it stays on the
same GPUs, otherwise preempts the old run and launches a new one as soon as the job's
previous run has exited and the target GPUs are free (`rounds.py`). At the round's end (its
length, earlier once every job of the round completed, or when a worker joined or died) it
reports the steps each job made, when it stopped, the throughputs jobs measured (smoothed)
and the batch sizes they switched to, so the engine's progress is measured, not simulated.

It speaks only shock's own types; a transport (`transport.py`) carries its commands to the
workers and their reports back. All state changes happen under one lock: the adapters'
threads and the engine's calls come in on different threads. Everything needed to resume is
written to the journal first, the engine's own state included.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from shock.cluster.job_command import JobCommand
from shock.cluster.journal import Journal
from shock.cluster.round_times import RoundTimes
from shock.cluster.runtime.errors import ServiceStopped
from shock.cluster.runtime.job_book import JobBook
from shock.cluster.runtime.job_events import JobEvents
from shock.cluster.runtime.rounds import Rounds
from shock.cluster.runtime.state import (
    HARNESS_ADAPTATIONS,
    Run,
    RuntimeSettings,
    TrackedJob,
    WorkerSlot,
)
from shock.cluster.runtime.transport import PolledTransport, Transport
from shock.cluster.runtime.worker_desk import WorkerDesk
from shock.core.errors import ShockError
from shock.core.executor import (
    BatchSizeChange,
    ExecutorCapabilities,
    Intake,
    PlannedUnit,
    RoundPlan,
    RoundReport,
)
from shock.core.model import Cluster, JobSpec
from shock.core.results import RunResult
from shock.core.run import RunRequest
from shock.core.throughputs import throughputs_to_dict
from shock.engine.engine import run_engine
from shock.engine.measured_throughputs import ThroughputEstimates
from shock.engine.throughput_estimator import UnknownTypeRates

_log = logging.getLogger(__name__)

MEASURED_TABLE_FILE = "measured_throughputs.json"
ENGINE_STATE_KEY = "engine_state"


class Runtime(JobBook, WorkerDesk, JobEvents, Rounds):
    """The executor the engine drives, and the operations its adapters call."""

    capabilities = ExecutorCapabilities(
        simulates_jobs=False,
        native_adaptations=HARNESS_ADAPTATIONS,
        measures_rates=True,
        durable=True,
    )

    def __init__(
        self,
        request: RunRequest,
        settings: RuntimeSettings,
        transport: Transport | None = None,
    ) -> None:
        self.request = request
        self.settings = settings
        self.transport = transport or PolledTransport()
        self.round_length = request.config.mechanism.round_length_s
        self.grace_s = max(3 * settings.heartbeat_s, 0.25 * self.round_length)
        self.journal = Journal(settings.state_dir)
        self.checkpoint_root = settings.state_dir / "checkpoints"
        self.estimates = ThroughputEstimates(
            prior=request.table,
            fallback=UnknownTypeRates(request.table, request.cluster.worker_types),
        )
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.workers: dict[str, WorkerSlot] = {}
        self.runs: dict[int, Run] = {}
        self.jobs: dict[int, TrackedJob] = {}
        self._cluster_signature: tuple[tuple[str, str, int], ...] = ()
        self._gpu_owner: dict[int, tuple[str, int]] = {}
        self._round_index = 0
        self._round_start = 0.0
        self._round_end = 0.0
        self._units: tuple[PlannedUnit, ...] = ()
        self._plan = {}
        self._round_runs: dict[int, list[int]] = {}
        # What happened since the last report, for the next one.
        self._new_rates: dict[tuple[str, int, str], float] = {}
        self._new_batch_sizes: dict[int, BatchSizeChange] = {}
        self._failure: str | None = None
        self._stop: threading.Event | None = None
        self._run_deadline: float | None = None
        self.done = False
        self.incarnation = uuid.uuid4().hex
        self._saved_engine: dict[str, object] | None = None
        self.round_times = RoundTimes()
        self._init_book()
        self._load()
        self.capabilities = replace(
            Runtime.capabilities, accepts_submissions=self.accepts_submissions
        )
        with self.lock:
            self.transport.attach(self)

    # Start-up: a fresh run, or resume from the journal.

    def _load(self) -> None:
        journal = self.journal
        # Time zero of the trace: when the cluster is up, fixed in the journal so that a
        # restarted scheduler keeps measuring from it.
        t0 = journal.get_meta("t0")
        self.t0 = time.time() if t0 is None else float(t0)
        self.t0_fixed = t0 is not None
        if journal.get_meta("trace") is None:
            journal.set_meta("trace", self.request.trace.source)
            journal.set_meta("mode", "service" if self.settings.accepts_submissions else "trace")
            journal.add_jobs(list(self.request.trace.jobs))
        self.accepts_submissions = journal.get_meta("mode") == "service"
        for row in journal.jobs():
            self.jobs[row.spec.job_id] = TrackedJob(
                row.spec, row.step, row.checkpoint_step, row.completed_at,
                job_type=row.job_type or "", target_steps=row.target_steps or 0,
                submitted_at=row.submitted_at, started_at=row.started_at,
                ended_state=row.ended_state, ended_at=row.ended_at, message=row.message or "",
                rho=row.rho,
                command=None if row.command is None else JobCommand.from_json(row.command),
            )  # fmt: skip
        # The journal's jobs are the run's, also when a restart names no trace: every one
        # submitted, less those cancelled or failed.
        trace = replace(
            self.request.trace,
            jobs=tuple(job.spec for job in self.jobs.values() if job.ended_state is None),
            source=journal.get_meta("trace") or self.request.trace.source,
        )
        self.request = replace(self.request, trace=trace)
        saved = journal.get_meta(ENGINE_STATE_KEY)
        if saved is not None:
            self._restore_saved(saved)
        for measured in journal.throughputs():
            key = (measured.job_type, measured.scale_factor, measured.worker_type)
            self.estimates.measured[key] = (measured.steps_per_s, measured.samples)
        now = time.time()
        for sequence, worker in enumerate(journal.workers()):
            if worker.dead_at is None:
                # Known from before a restart: alive until it stays silent too long, counted
                # from one dead-after period ahead (the restart itself took time, and workers
                # may be busy or backing off while they reconnect).
                self.workers[worker.worker_id] = WorkerSlot(
                    worker.worker_id, worker.gpu_type, worker.gpus, sequence,
                    now + self.settings.dead_after_s,
                    acked_seq=worker.acked_seq, hostname=worker.hostname,
                )  # fmt: skip
        open_runs = journal.runs(open_only=True)
        open_per_job: dict[int, int] = {}
        for run in open_runs:
            open_per_job[run.job_id] = open_per_job.get(run.job_id, 0) + 1
        for run in open_runs:
            self.runs[run.run_id] = Run(
                run.run_id, run.job_id, run.worker_id, run.gpus, run.launched_at,
                run.lease_until, started_at=run.started_at, lead_run_id=run.run_id,
            )  # fmt: skip
            if open_per_job[run.job_id] > 1:
                # A gang's ranks (the journal keeps no ranks): they run on until their leases
                # end, and the job is relaunched from its checkpoint once all have exited.
                self.runs[run.run_id].preempting = True
            else:
                self.jobs[run.job_id].run_id = run.run_id
            if run.worker_id not in self.workers:
                self.close_run(self.runs[run.run_id], now, "lost")

    def _restore_saved(self, saved: str) -> None:
        """The engine's state and, with it, how much of each job's progress it was told."""
        try:
            document = json.loads(saved)
            engine = document["engine"]
            credited = {int(job_id): float(steps) for job_id, steps in document["credited"].items()}
            # Jobs cancelled (or failed) after this state was saved are not the engine's now.
            if isinstance(engine.get("jobs"), list):
                engine["jobs"] = [
                    saved for saved in engine["jobs"]
                    if (job := self.jobs.get(int(saved["id"]))) is not None
                    and job.ended_state is None
                ]  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            _log.warning("the journal's engine state does not parse (%s): starting afresh", error)
            return
        self._saved_engine = engine
        self._round_index = int(engine.get("rounds", 0))
        for job_id, steps in credited.items():
            if job_id in self.jobs:
                self.jobs[job_id].credited = steps

    # The executor: what the engine calls.

    def start(self, request: RunRequest, jobs: tuple[JobSpec, ...]) -> Cluster:
        """Wait until enough workers registered; time zero is then (if it is not fixed)."""
        with self.lock:
            deadline = time.monotonic() + self.settings.startup_timeout_s

            def ready(now: float) -> bool:
                if self._ready_workers() >= self.settings.min_workers:
                    return True
                if self.accepts_submissions:
                    # A service waits for its workers as long as it runs.
                    if self._stop is not None and self._stop.is_set():
                        raise ServiceStopped("stopped before any worker registered")
                    return False
                if time.monotonic() > deadline:
                    raise ShockError(
                        f"only {self._ready_workers()} of {self.settings.min_workers} workers "
                        f"registered within {self.settings.startup_timeout_s:g} s"
                    )
                return False

            self._wait_until(ready)
            if not self.t0_fixed:
                self.t0, self.t0_fixed = time.time(), True
                self.journal.set_meta("t0", repr(self.t0))
            return self._take_cluster()

    def clock(self) -> float:
        return time.time() - self.t0

    def run_round(self, plan: RoundPlan) -> RoundReport:
        with self.lock:
            self.round_times.round_started(time.time())
            self._begin_round(plan, time.time())
            self._wait_until(self._round_over)
            report = self._report(time.time())
            self.round_times.round_reported(time.time())
            return report

    def idle_until(self, time_s: float) -> None:
        with self.lock:
            signature = self._cluster_signature
            self._round_end = self.t0 + time_s
            self._wait_until(
                lambda now: now - self.t0 >= time_s
                or self._live_signature() != signature
                or self._intake_waiting()
            )
            self.round_times.waited(time.time())

    def intake(self) -> Intake | None:
        """Jobs submitted and cancelled since the engine last asked; None once stopping."""
        with self.lock:
            if self._stop is not None and self._stop.is_set():
                return None
            return self._take_intake()

    def cluster_changed(self) -> Cluster | None:
        """The live workers' cluster when it changed and still has a worker."""
        with self.lock:
            if self._live_signature() == self._cluster_signature or not self._ready_workers():
                return None
            return self._take_cluster()

    def stop(self) -> None:
        with self.lock:
            if self.accepts_submissions:
                # The service stops, its workers stay: they checkpoint their jobs and wait
                # for it to come back.
                self._preempt_all()
                return
            self.done = True
            self.changed.notify_all()
            self.transport.stop()

    def save_state(self, state: dict[str, object]) -> None:
        with self.lock:
            credited = {str(job.job_id): job.credited for job in self.jobs.values() if job.credited}
            document = {"engine": state, "credited": credited}
            self.journal.set_meta(ENGINE_STATE_KEY, json.dumps(document))

    def load_state(self) -> dict[str, object] | None:
        return self._saved_engine

    # Running a whole trace.

    def run(self, stop: threading.Event | None = None) -> RunResult:
        """Drive the trace through the engine until every job completed (or the window's)."""
        self._stop = stop or threading.Event()
        limit = self.settings.run_timeout_s
        self._run_deadline = None if limit is None else time.monotonic() + limit
        result = run_engine(self.request, self, self.transport.backend_name)
        table = throughputs_to_dict(self.estimates.measured_table())
        self.measured_table_path().write_text(json.dumps(table, indent=2) + "\n")
        return result

    def measured_table_path(self) -> Path:
        return self.settings.state_dir / MEASURED_TABLE_FILE

    # Waiting, under the lock.

    def _wait_until(self, done: Callable[[float], bool]) -> None:
        """Check workers, dispatch planned jobs and wait for state changes until `done`."""
        while True:
            if self._stop is not None and self._stop.is_set():
                if self.accepts_submissions:
                    return  # a service stops cleanly: the engine's next intake ends the run
                raise ShockError("the cluster run was interrupted")
            if self._failure is not None:
                raise ShockError(self._failure)
            if self._run_deadline is not None and time.monotonic() > self._run_deadline:
                raise ShockError(
                    f"the cluster run did not finish within {self.settings.run_timeout_s:g} s"
                )
            now = time.time()
            self.transport.poll(now)
            if done(now):
                return
            self._dispatch(now)
            # Wake at the round's end, not up to 0.2 s after it (rounds as long as the
            # simulator's).
            self.changed.wait(timeout=min(0.2, max(self._round_end - now, 0.01)))
