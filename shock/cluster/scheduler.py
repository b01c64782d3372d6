"""The gRPC cluster's executor: the engine's round plans carried out on real workers.

The engine (shock/engine/engine.py) decides; this class carries each round out in wall-clock
time. For every planned job it extends the lease of its run if it stays on the same GPUs,
otherwise preempts the old run and launches a new one as soon as the job's previous run has
exited and the target GPUs are free. At the round's end (its length, earlier once every job
of the round completed, or when a worker joined or died) it reports the steps each job made,
when it stopped, the throughputs jobs measured (smoothed) and the batch sizes they switched
to, so the engine's progress is measured, not simulated.

All state changes happen under one lock; the gRPC handlers (`service.py`) and the engine's
calls come in on different threads. Everything needed to resume is written to the journal
first, the engine's own state included.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from shock.cluster.job_command import JobCommand
from shock.cluster.job_service import JobBook, PreconditionError, RequestError, ServiceStopped
from shock.cluster.journal import Journal, ThroughputRow, WorkerRow
from shock.cluster.launch import launch_grant
from shock.cluster.names import placement_text
from shock.cluster.oplog import log_event
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.round_times import RoundTimes
from shock.core.errors import ShockError
from shock.core.executor import (
    BatchSizeChange,
    ExecutorCapabilities,
    Intake,
    MeasuredRate,
    PlannedUnit,
    RoundPlan,
    RoundReport,
    StrayProgress,
    UnitProgress,
)
from shock.core.model import Cluster, JobSpec, Server, batch_size_of
from shock.core.results import RunResult
from shock.core.run import RunRequest
from shock.core.throughputs import throughputs_to_dict
from shock.engine.engine import run_engine
from shock.engine.epochs import job_type_with_batch_size
from shock.engine.measured_throughputs import ThroughputEstimates
from shock.engine.throughput_estimator import UnknownTypeRates

_log = logging.getLogger(__name__)

MEASURED_TABLE_FILE = "measured_throughputs.json"
ENGINE_STATE_KEY = "engine_state"
_WORKER_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# Adaptation modes the training harness carries out itself (shock/job/adaptation.py).
HARNESS_ADAPTATIONS = frozenset({"static", "accordion", "gns"})
# Where a gang's rank 0 listens for its peers: a port drawn from this range, below the
# usual ephemeral ports. A port taken by something else fails the gang's start: it is
# relaunched from its checkpoint on another draw.
RENDEZVOUS_PORTS = range(20000, 30000)

# Where a job runs: one (worker, local GPUs) member per process, in rank order.
Placement = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    state_dir: Path
    heartbeat_s: float = 1.0
    # A worker silent this long is dead: its runs end and its jobs resume elsewhere.
    dead_after_s: float = 10.0
    min_workers: int = 1
    startup_timeout_s: float = 120.0
    # Stop with an error when the run takes longer than this (None: no limit).
    run_timeout_s: float | None = None
    max_job_failures: int = 3
    approve_batch_size_changes: bool = True
    # A service (`shock serve` without a trace): jobs are submitted and cancelled while it
    # runs, and it runs until stopped. Fixed in the journal when the state directory is new.
    accepts_submissions: bool = False


@dataclass(slots=True)
class WorkerSlot:
    worker_id: str
    gpu_type: str
    gpus: int
    registered_seq: int  # registration order, for a stable GPU numbering
    last_seen: float
    registered: bool = False  # registered with this scheduler process
    alive: bool = True
    acked_seq: int = 0
    commands: list[pb.Command] = field(default_factory=list)
    cpus: float = 0.0  # what it offers to jobs, as it registered (0: not said)
    memory_gb: float = 0.0
    told_shutdown: bool = False
    hostname: str = ""
    rendezvous_host: str = ""  # where its jobs are reached by a gang's other ranks


@dataclass(slots=True)
class Run:
    run_id: int
    job_id: int
    worker_id: str
    gpus: tuple[int, ...]
    launched_at: float
    lease_until: float
    started_at: float | None = None
    ended_at: float | None = None
    preempting: bool = False
    # Its place in its gang (a job on several GPUs runs one process per GPU); rank 0 is the
    # gang's lead: its run is the job's run, its events the job's progress.
    rank: int = 0
    world_size: int = 1
    lead_run_id: int = 0


@dataclass(slots=True)
class TrackedJob:
    spec: JobSpec
    step: int = 0
    checkpoint_step: int = 0
    completed_at: float | None = None
    run_id: int | None = None  # the live run, if any
    not_before: float = 0.0  # a lost run's lease: no relaunch before it ends
    credited: float = 0.0  # steps reported to the engine
    failures: int = 0
    # What it runs as now: the trace's job type and steps until an approved batch-size
    # change (Accordion, GNS) takes effect; then the new batch size's type and the step
    # target the harness rescaled. Launches always name the trace's (a relaunch resumes
    # the new batch size from its checkpoint).
    job_type: str = ""
    target_steps: int = 0
    # A service's job: when it was submitted (unix time; None: a trace's), first started,
    # and how it ended when it did not complete.
    submitted_at: float | None = None
    started_at: float | None = None
    ended_state: str | None = None  # cancelled or failed
    ended_at: float | None = None
    message: str = ""
    rho: float | None = None  # its finish-time fairness, fixed when it ended
    # A person's own command (`shock submit -- COMMAND`); None: a built-in family's job.
    command: JobCommand | None = None

    @property
    def over(self) -> bool:
        """Completed, cancelled or failed: it never runs again."""
        return self.completed_at is not None or self.ended_state is not None

    def __post_init__(self) -> None:
        self.job_type = self.job_type or self.spec.job_type
        self.target_steps = self.target_steps or self.spec.total_steps

    @property
    def job_id(self) -> int:
        return self.spec.job_id


class ClusterScheduler(JobBook):
    """The gRPC executor; also what the gRPC service's handlers call."""

    backend_name = "grpc"  # the results' backend
    # A job on several GPUs runs as one process per GPU (a gang); False: as one process on
    # the worker holding its first GPU.
    runs_gangs_as_ranks = True
    capabilities = ExecutorCapabilities(
        simulates_jobs=False,
        native_adaptations=HARNESS_ADAPTATIONS,
        measures_rates=True,
        durable=True,
    )

    def __init__(self, request: RunRequest, settings: SchedulerSettings) -> None:
        self.request = request
        self.settings = settings
        self.round_length = request.config.mechanism.round_length_s
        self.grace_s = max(3 * settings.heartbeat_s, 0.25 * self.round_length)
        self.journal = Journal(settings.state_dir)
        self.checkpoint_root = settings.state_dir / "checkpoints"
        self.estimates = ThroughputEstimates(
            prior=request.table,
            fallback=UnknownTypeRates(request.table, request.cluster.worker_types),
        )
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.workers: dict[str, WorkerSlot] = {}
        self.runs: dict[int, Run] = {}
        self.jobs: dict[int, TrackedJob] = {}
        self._cluster_signature: tuple[tuple[str, str, int], ...] = ()
        self._gpu_owner: dict[int, tuple[str, int]] = {}
        self._round_index = 0
        self._round_start = 0.0
        self._round_end = 0.0
        self._units: tuple[PlannedUnit, ...] = ()
        self._plan: dict[int, Placement] = {}
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
            ClusterScheduler.capabilities, accepts_submissions=self.accepts_submissions
        )

    # Start-up: a fresh run, or resume from the journal.

    def _load(self) -> None:
        journal = self.journal
        # Time zero of the trace: when the cluster is up, fixed in the journal so that a
        # restarted scheduler keeps measuring from it.
        t0 = journal.get_meta("t0")
        self.t0 = time.time() if t0 is None else float(t0)
        self._t0_fixed = t0 is not None
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
                self._close_run(self.runs[run.run_id], now, "lost")

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
        with self._lock:
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
            if not self._t0_fixed:
                self.t0, self._t0_fixed = time.time(), True
                self.journal.set_meta("t0", repr(self.t0))
            return self._take_cluster()

    def clock(self) -> float:
        return time.time() - self.t0

    def run_round(self, plan: RoundPlan) -> RoundReport:
        with self._lock:
            self.round_times.round_started(time.time())
            self._begin_round(plan, time.time())
            self._wait_until(self._round_over)
            report = self._report(time.time())
            self.round_times.round_reported(time.time())
            return report

    def idle_until(self, time_s: float) -> None:
        with self._lock:
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
        with self._lock:
            if self._stop is not None and self._stop.is_set():
                return None
            return self._take_intake()

    def cluster_changed(self) -> Cluster | None:
        """The live workers' cluster when it changed and still has a worker."""
        with self._lock:
            if self._live_signature() == self._cluster_signature or not self._ready_workers():
                return None
            return self._take_cluster()

    def stop(self) -> None:
        with self._lock:
            if self.accepts_submissions:
                # The service stops, its workers stay: they checkpoint their jobs and wait
                # for it to come back.
                self._preempt_all()
                return
            self.done = True
            self._changed.notify_all()
            self._tell_workers_to_stop()

    def save_state(self, state: dict[str, object]) -> None:
        with self._lock:
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
        result = run_engine(self.request, self, self.backend_name)
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
            self._check_workers(now)
            if done(now):
                return
            self._dispatch(now)
            # Wake at the round's end, not up to 0.2 s after it (rounds as long as the
            # simulator's).
            self._changed.wait(timeout=min(0.2, max(self._round_end - now, 0.01)))

    def _ready_workers(self) -> int:
        return sum(1 for w in self.workers.values() if w.registered and w.alive)

    def _live_signature(self) -> tuple[tuple[str, str, int], ...]:
        return tuple(sorted(
            (w.worker_id, w.gpu_type, w.gpus)
            for w in self.workers.values() if w.registered and w.alive
        ))  # fmt: skip

    def _take_cluster(self) -> Cluster:
        """The cluster of the live workers, one server per worker; global GPU ids follow
        `Cluster.servers()` (by type, then registration order)."""
        alive = sorted(
            (w for w in self.workers.values() if w.registered and w.alive),
            key=lambda w: (w.gpu_type, w.registered_seq, w.worker_id),
        )
        gpus_per_type: dict[str, int] = {}
        per_server: dict[str, int] = {}
        for slot in alive:
            gpus_per_type[slot.gpu_type] = gpus_per_type.get(slot.gpu_type, 0) + slot.gpus
            per_server[slot.gpu_type] = slot.gpus
        self._gpu_owner = {}
        next_gpu = 0
        for slot in alive:
            for local in range(slot.gpus):
                self._gpu_owner[next_gpu] = (slot.worker_id, local)
                next_gpu += 1
        self._cluster_signature = self._live_signature()
        if not alive or any(s.cpus <= 0 or s.memory_gb <= 0 for s in alive):
            return Cluster(gpus_per_type, per_server)
        # Every worker said what it offers: resource-aware placements grant from that.
        servers = tuple(
            Server(index, slot.gpu_type, slot.gpus, slot.cpus, slot.memory_gb)
            for index, slot in enumerate(alive)
        )
        return Cluster(gpus_per_type, per_server, explicit_servers=servers)

    # Worker-facing operations (called by the gRPC service).

    def register(self, request: pb.RegisterRequest) -> pb.RegisterReply:
        if not _WORKER_TYPE.fullmatch(request.gpu_type):
            raise RequestError(f"gpu_type must be a name such as v100, got {request.gpu_type!r}")
        if not request.devices:
            raise RequestError("a worker must declare at least one device")
        with self._lock:
            now = time.time()
            slot = self.workers.get(request.worker_id) if request.worker_id else None
            if slot is None and request.worker_id:
                known = {w.worker_id: w for w in self.journal.workers()}
                row = known.get(request.worker_id)
                if row is not None:  # declared dead before; it is back
                    slot = WorkerSlot(row.worker_id, row.gpu_type, row.gpus, len(known), now,
                                      acked_seq=row.acked_seq)  # fmt: skip
            for other in self.workers.values():
                if (
                    other is not slot
                    and other.alive
                    and other.gpu_type == request.gpu_type
                    and other.gpus != len(request.devices)
                ):
                    reason = (f"workers of type {request.gpu_type} have {other.gpus} GPUs each; "
                              f"this one declares {len(request.devices)}")  # fmt: skip
                    log_event("worker-refused", f"refused worker on {request.hostname}: {reason}",
                              logging.WARNING, host=request.hostname, reason=reason)  # fmt: skip
                    raise PreconditionError(reason)
            if slot is None:
                worker_id = f"worker-{len(self.journal.workers()) + 1}"
                slot = WorkerSlot(
                    worker_id, request.gpu_type, len(request.devices), len(self.workers), now
                )
                self.journal.add_worker(
                    WorkerRow(worker_id, request.hostname, request.gpu_type, slot.gpus, 0, None),
                    now,
                )
            self.workers[slot.worker_id] = slot
            slot.registered = True
            slot.alive = True
            slot.cpus = max(request.cpus, 0.0)
            slot.memory_gb = max(request.memory_gb, 0.0)
            slot.hostname = request.hostname
            slot.rendezvous_host = request.rendezvous_host or request.hostname
            slot.last_seen = now
            slot.commands = []
            self.journal.set_worker_alive(slot.worker_id)
            log_event("worker-joined", f"{slot.worker_id} joined from {request.hostname}: "
                      f"{slot.gpus} {slot.gpu_type} GPUs", worker=slot.worker_id,
                      host=request.hostname, gpu_type=slot.gpu_type, gpus=slot.gpus)  # fmt: skip
            self._reconcile(slot, request.live_runs, now)
            self._changed.notify_all()
            return pb.RegisterReply(
                worker_id=slot.worker_id, heartbeat_s=self.settings.heartbeat_s,
                scheduler_incarnation=self.incarnation,
            )  # fmt: skip

    def _reconcile(self, slot: WorkerSlot, live: Sequence[pb.LiveRun], now: float) -> None:
        """Keep the runs the worker still has that we expect; stop the ones we do not; end
        the ones it no longer has."""
        reported = {run.run_id for run in live}
        for run_id in reported:
            run = self.runs.get(run_id)
            if run is None or run.ended_at is not None or run.worker_id != slot.worker_id:
                slot.commands.append(pb.Command(preempt=pb.Preempt(run_id=run_id)))
        for run in list(self.runs.values()):
            if run.worker_id == slot.worker_id and run.run_id not in reported:
                # The worker says it is not running: safe to relaunch at once.
                self._close_run(run, now, "lost", wait_for_lease=False)

    def heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatReply:
        with self._lock:
            slot = self.workers.get(request.worker_id)
            if slot is None or not slot.registered or not slot.alive:
                return pb.HeartbeatReply(reregister=True)
            slot.last_seen = time.time()
            self._close_unlaunched(slot, {run.run_id for run in request.live_runs})
            wait_s = min(max(request.wait_s, 0.0), self.settings.heartbeat_s)
            if not slot.commands and not self.done:
                self._changed.wait_for(lambda: bool(slot.commands) or self.done, timeout=wait_s)
            commands, slot.commands = slot.commands, []
            slot.last_seen = time.time()
            if self.done:
                slot.told_shutdown = True
                self._changed.notify_all()
            return pb.HeartbeatReply(commands=commands, shutdown=self.done)

    def _close_unlaunched(self, slot: WorkerSlot, live: set[int]) -> None:
        """A run the worker never started (its launch command was lost with a reply) and
        still does not list long after its launch is closed, so its job can go on."""
        now = time.time()
        patience = max(self.settings.dead_after_s, 3 * self.settings.heartbeat_s)
        for run in list(self.runs.values()):
            if (
                run.worker_id == slot.worker_id
                and run.ended_at is None
                and run.started_at is None
                and run.run_id not in live
                and now - run.launched_at > patience
            ):
                self._close_run(run, now, "lost", wait_for_lease=False)

    def report_events(self, request: pb.ReportEventsRequest) -> pb.ReportEventsReply:
        with self._lock:
            slot = self.workers.get(request.worker_id)
            if slot is None:
                known = {w.worker_id: w.acked_seq for w in self.journal.workers()}
                if request.worker_id not in known:
                    raise PreconditionError(f"unknown worker {request.worker_id!r}: register first")
                slot = WorkerSlot(request.worker_id, "", 0, -1, time.time(),
                                  alive=False, acked_seq=known[request.worker_id])  # fmt: skip
            acked = slot.acked_seq
            with self.journal.transaction():
                for event in sorted(request.events, key=lambda e: e.seq):
                    if event.seq <= acked:
                        continue  # already applied: a resend
                    self._apply_event(event)
                    acked = event.seq
                self.journal.set_acked_seq(slot.worker_id, acked)
            slot.acked_seq = acked
            self._changed.notify_all()
            return pb.ReportEventsReply(acked_seq=acked)

    def renew_lease(self, request: pb.RenewLeaseRequest) -> pb.RenewLeaseReply:
        with self._lock:
            run = self.runs.get(request.run_id)
            now = time.time()
            if (
                run is None
                or run.ended_at is not None
                or run.preempting
                or self._plan.get(run.job_id) != self._live_placements().get(run.job_id)
            ):
                return pb.RenewLeaseReply(granted=False)
            run.lease_until = max(run.lease_until, self._round_end + self.grace_s)
            self.journal.set_run_lease(run.run_id, run.lease_until)
            return pb.RenewLeaseReply(granted=True, seconds=run.lease_until - now)

    # Job events.

    # Job events.

    def _apply_event(self, event: pb.JobEvent) -> None:
        run = self.runs.get(event.run_id)
        if run is not None and run.rank > 0:
            self._apply_member_event(run, event)
            return
        job = self.jobs.get(event.job_id)
        if job is None or job.completed_at is not None:
            return  # completions are final: resent events of a finished job change nothing
        self._note_event(job, run, event)
        kind = event.WhichOneof("event")
        now = time.time()
        if kind == "exit":
            self._apply_exit(job, run, event.exit, now)
            return
        if run is None or run.ended_at is not None:
            return  # a late message from a run that already ended
        journal = self.journal
        if kind == "started":
            run.started_at = now
            if job.started_at is None:
                job.started_at = now
                journal.set_job_started(job.job_id, now)
            job.step = event.started.resumed_from_step
            journal.set_run_started(run.run_id, job.step, now)
            journal.set_progress(job.job_id, job.step)
        elif kind == "progress":
            progress = event.progress
            job.step = progress.step
            journal.set_run_step(run.run_id, job.step)
            journal.set_progress(job.job_id, job.step)
            current = batch_size_of(job.job_type)  # None: a type named without one (A3C)
            if current is not None and progress.batch_size not in (0, current):
                self._change_batch_size(job, progress.batch_size, progress.target_steps)
            elif job.command is not None and progress.target_steps not in (0, job.target_steps):
                self._change_target(job, progress.target_steps)
            if progress.steps_per_s > 0:
                self._observe_throughput(job, run, progress.steps_per_s)
        elif kind == "checkpoint":
            job.checkpoint_step = event.checkpoint.step
            journal.set_checkpoint(job.job_id, job.checkpoint_step, event.checkpoint.path)
        elif kind == "batch_size_request" and self.settings.approve_batch_size_changes:
            self._order_batch_size(run, event.batch_size_request.batch_size)

    def _apply_member_event(self, run: Run, event: pb.JobEvent) -> None:
        """A gang's rank other than 0: only when it started and how it ended count (the
        lead reports the gang's progress and checkpoints)."""
        if run.ended_at is not None:
            return
        kind = event.WhichOneof("event")
        now = time.time()
        if kind == "started":
            run.started_at = now
            self.journal.set_run_started(run.run_id, event.started.resumed_from_step, now)
        elif kind == "exit":
            self.journal.set_run_step(run.run_id, event.exit.step)
            self._close_run(run, now, event.exit.reason or "exited", wait_for_lease=False)

    def _order_batch_size(self, run: Run, batch_size: int) -> None:
        self.journal.set_batch_size(run.job_id, batch_size)
        self._command(run.worker_id, pb.Command(
            batch_size=pb.BatchSize(run_id=run.run_id, batch_size=batch_size)
        ))  # fmt: skip

    def _change_batch_size(self, job: TrackedJob, batch_size: int, target_steps: int) -> None:
        """The job trains at another batch size now: from here on it is that batch size's
        job type, so its throughput reports are keyed by that type, and its steps count
        towards the target the harness rescaled. The engine hears of it with the round."""
        job.job_type = job_type_with_batch_size(job.spec.model_family, batch_size)
        if target_steps > 0:
            job.target_steps = target_steps
        self.journal.set_job_type(job.job_id, job.job_type, job.target_steps)
        self._new_batch_sizes[job.job_id] = BatchSizeChange(
            job.job_id, job.job_type, job.target_steps
        )

    def _change_target(self, job: TrackedJob, target_steps: int) -> None:
        """A person's job said how many steps it runs (shock.job's `steps(total=...)`)."""
        job.target_steps = target_steps
        self.journal.set_job_type(job.job_id, job.job_type, target_steps)
        self._new_batch_sizes[job.job_id] = BatchSizeChange(job.job_id, job.job_type, target_steps)

    def _apply_exit(self, job: TrackedJob, run: Run | None, exit: pb.Exit, now: float) -> None:
        if exit.target_steps > 0:
            job.target_steps = exit.target_steps
        completed = exit.reason == "done" and exit.step >= job.target_steps
        if job.command is not None and exit.reason == "done":
            # A command that ended well is done, whether or not it counted its steps.
            completed = True
            job.target_steps = max(exit.step, 1) if exit.target_steps > 0 else job.target_steps
        if (run is None or run.ended_at is not None) and not completed:
            return  # a run closed before its exit arrived: only a completion still counts
        if completed:
            job.step = job.target_steps
            run_id = run.run_id if run is not None else 0
            if self.journal.record_completion(job.spec.job_id, now, run_id, job.step):
                job.completed_at = now
                self._fix_rho(job, now)
                self._record(job.job_id, f"done at step {job.step}", "job-finished",
                             logging.INFO, user=job.spec.entity or "")  # fmt: skip
                if run is not None and run.ended_at is not None:
                    # Closed as lost (its worker was silent), yet it finished: say so.
                    self.journal.correct_run_completed(run.run_id, now, job.step)
                self._changed.notify_all()  # the round may be over
        elif exit.reason in ("error", "crashed"):
            job.failures += 1
            job.step = job.checkpoint_step
            if job.command is not None and self.accepts_submissions:
                # A person's own command fails at its first error: it would fail again.
                reason = exit.message or f"{exit.reason} (exit code {exit.exit_code})"
                self._end_job(job, "failed", now, f"failed: {reason}")
            elif job.failures >= self.settings.max_job_failures and self.accepts_submissions:
                # A service goes on without it.
                self._end_job(job, "failed", now, f"failed {job.failures} times; last: "
                              f"{exit.reason} {exit.message}".strip())  # fmt: skip
            elif job.failures >= self.settings.max_job_failures:
                self._failure = (
                    f"job {job.spec.job_id} ({job.spec.job_type}) failed "
                    f"{job.failures} times; last: {exit.reason} {exit.message}".strip()
                    + " (its output is in the worker's job logs)"
                )
        else:
            job.step = exit.step
        self.journal.set_progress(job.spec.job_id, job.step)
        if run is not None and run.ended_at is None:
            self.journal.set_run_step(run.run_id, job.step)
            self._close_run(run, now, exit.reason or "exited", wait_for_lease=False)

    def _close_run(self, run: Run, now: float, reason: str, wait_for_lease: bool = True) -> None:
        run.ended_at = now
        self.journal.end_run(run.run_id, now, reason)
        job = self.jobs[run.job_id]
        if job.run_id == run.run_id:
            job.run_id = None
        if run.world_size > 1:
            # A gang trains only whole: when one rank ends, the others stop too (they agree
            # on a step and the lead checkpoints it, or they fail on the missing peer).
            for other in self.runs.values():
                if (
                    other.lead_run_id == run.lead_run_id
                    and other.ended_at is None
                    and not other.preempting
                ):
                    other.preempting = True
                    self._command(other.worker_id, pb.Command(
                        preempt=pb.Preempt(run_id=other.run_id)
                    ))  # fmt: skip
        if reason == "lost" and run.rank > 0:
            if wait_for_lease:
                job.not_before = max(job.not_before, run.lease_until)
        elif reason == "lost":
            # Its process may still be running (a partitioned worker) until its lease ends.
            job.step = job.checkpoint_step
            self.journal.set_progress(job.spec.job_id, job.step)
            if wait_for_lease:
                job.not_before = max(job.not_before, run.lease_until)

    def _observe_throughput(self, job: TrackedJob, run: Run, steps_per_s: float) -> None:
        worker_type = self.workers[run.worker_id].gpu_type
        job_type, scale = job.job_type, job.spec.scale_factor  # keyed by the current batch size
        value = self.estimates.observe(job_type, scale, worker_type, steps_per_s)
        samples = self.estimates.reports(job_type, scale, worker_type)
        self.journal.set_throughput(ThroughputRow(job_type, scale, worker_type, value, samples))
        self._new_rates[(job_type, scale, worker_type)] = value

    def _command(self, worker_id: str, command: pb.Command) -> None:
        slot = self.workers.get(worker_id)
        if slot is not None:
            slot.commands.append(command)
            self._changed.notify_all()

    # A round: the plan carried out, then reported.

    def allocation(self) -> tuple[int, dict[int, Placement]]:
        """The current round and where its plan puts each job: (worker, its GPUs) for each
        worker the job's gang spans."""
        with self._lock:
            return self._round_index, dict(self._plan)

    def _round_over(self, now: float) -> bool:
        if now >= self._round_end or self._live_signature() != self._cluster_signature:
            return True  # also early when a worker joined or died: plan for the new cluster
        # Early end, as in the simulator: every job of the round has finished its work (or
        # was cancelled).
        return all(self.jobs[job_id].over for job_id in self._plan)

    def _begin_round(self, plan: RoundPlan, now: float) -> None:
        self._units = plan.units
        self._round_index = plan.index
        self._round_start = now
        self._round_end = now + (plan.end_s - plan.start_s)
        self._plan = {}
        self._round_runs = {}
        for unit in plan.units:
            owners = [self._gpu_owner.get(g) for g in unit.gpus]
            if any(owner is None for owner in owners):
                continue  # planned on a cluster that has changed since: it does not run
            placement = self._placement([owner for owner in owners if owner is not None])
            for job_id in unit.job_ids:
                self._plan[job_id] = placement
        self.journal.add_round(plan.index, now, [
            self._round_entry(unit.job_ids, target)
            for unit in plan.units
            for target in (self._plan.get(unit.job_ids[0]),)
            if target is not None
        ])  # fmt: skip
        lease_until = self._round_end + self.grace_s
        placements = self._live_placements()
        for run in list(self.runs.values()):
            if run.ended_at is not None:
                continue
            target = self._plan.get(run.job_id)
            if target == placements.get(run.job_id) and not run.preempting:
                run.lease_until = lease_until
                self.journal.set_run_lease(run.run_id, lease_until)
                if run.rank == 0:
                    self._round_runs.setdefault(run.job_id, []).append(run.run_id)
                self._command(run.worker_id, pb.Command(
                    lease=pb.Lease(run_id=run.run_id, seconds=lease_until - now)
                ))  # fmt: skip
            elif not run.preempting:
                run.preempting = True
                self._command(run.worker_id, pb.Command(preempt=pb.Preempt(run_id=run.run_id)))
                if run.rank == 0:
                    moved = "moves it" if run.job_id in self._plan else "gives its GPUs to others"
                    self._record(run.job_id, f"preempted: round {plan.index} {moved}",
                                 "job-preempted", logging.INFO, run=run.run_id)  # fmt: skip
        # Batch sizes the engine's adaptation model wants of jobs that run on.
        for order in plan.batch_size_orders:
            job = self.jobs.get(order.job_id)
            if job is not None and job.run_id is not None:
                run = self.runs[job.run_id]
                if not run.preempting and run.world_size == 1:  # a gang trains static
                    self._order_batch_size(run, order.batch_size)

    def _dispatch(self, now: float) -> None:
        """Launch every planned job that is not running, once its GPUs are free."""
        unit_of = {job_id: unit for unit in self._units for job_id in unit.job_ids}
        live_jobs = {run.job_id for run in self.runs.values() if run.ended_at is None}
        for job_id, placement in self._plan.items():
            job = self.jobs[job_id]
            slots = [self.workers.get(worker_id) for worker_id, _ in placement]
            if (
                job.over
                or job.run_id is not None
                or job_id in live_jobs  # a gang's other ranks are still stopping
                or now < job.not_before
                or any(slot is None or not slot.alive for slot in slots)
                or now >= self._round_end
            ):
                continue
            busy = any(
                run.ended_at is None
                and run.worker_id == worker_id
                and set(run.gpus) & set(gpus)
                and self._plan.get(run.job_id) != placement
                for worker_id, gpus in placement
                for run in self.runs.values()
            )
            if busy:
                continue
            self._launch_job(job, placement, unit_of.get(job_id), now)

    def _launch_job(
        self, job: TrackedJob, placement: Placement, unit: PlannedUnit | None, now: float
    ) -> None:
        """One run per member of the placement: a gang's ranks meet at rank 0's worker."""
        job_id, spec = job.job_id, job.spec
        lease_until = self._round_end + self.grace_s
        directory = self.checkpoint_root / f"job-{job_id}"
        directory.mkdir(parents=True, exist_ok=True)
        # Modes the harness does not carry out run static; the engine orders their sizes.
        adaptation = spec.mode if spec.mode in HARNESS_ADAPTATIONS else "static"
        world_size = len(placement)
        master_addr, master_port = "", 0
        if world_size > 1:
            adaptation = "static"  # a gang's batch size stays the job's
            lead = self.workers[placement[0][0]]
            master_addr = lead.rendezvous_host or lead.hostname
            master_port = random.choice(RENDEZVOUS_PORTS)
        lead_run_id = 0
        local_ranks: dict[str, int] = {}
        for rank, (worker_id, gpus) in enumerate(placement):
            run_id = self.journal.add_run(job_id, worker_id, gpus, now, lease_until, job.step)
            lead_run_id = lead_run_id or run_id
            self.runs[run_id] = Run(
                run_id, job_id, worker_id, gpus, now, lease_until,
                rank=rank, world_size=world_size, lead_run_id=lead_run_id,
            )  # fmt: skip
            local_rank = local_ranks.get(worker_id, 0)
            local_ranks[worker_id] = local_rank + 1
            grant = launch_grant(unit, unit.gpus[rank] if unit and world_size > 1 else None)
            launch = pb.Launch(
                run_id=run_id, job_id=job_id, job_type=spec.job_type,
                target_steps=spec.total_steps if job.command is None else job.command.steps,
                checkpoint_dir=str(directory), gpus=gpus,
                lease_s=lease_until - now, seed=self.request.config.seed + job_id,
                adaptation=adaptation, cpus=grant.get("cpus", 0.0),
                memory_gb=grant.get("memory_gb", 0.0),
            )  # fmt: skip
            if job.command is not None:
                launch.command.extend(job.command.argv)
                launch.workdir = job.command.workdir
                launch.env.update(dict(job.command.env))
                launch.adaptation = spec.mode if world_size == 1 else "static"
            if world_size > 1:
                launch.rank, launch.world_size, launch.local_rank = rank, world_size, local_rank
                launch.master_addr, launch.master_port = master_addr, master_port
            self._command(worker_id, pb.Command(launch=launch))
        job.run_id = lead_run_id
        self._round_runs.setdefault(job_id, []).append(lead_run_id)
        self._record(job_id, f"launched as run {lead_run_id} on {placement_text(placement)} "
                     f"from step {job.step} (round {self._round_index})", "job-launched",
                     logging.INFO, run=lead_run_id, user=spec.entity or "")  # fmt: skip

    @staticmethod
    def _round_entry(job_ids: Sequence[int], placement: Placement) -> dict[str, object]:
        """A unit's journal entry: its lead's worker and GPUs, and a gang's every rank."""
        entry: dict[str, object] = {
            "jobs": list(job_ids), "worker": placement[0][0], "gpus": list(placement[0][1])
        }
        if len(placement) > 1:
            entry["ranks"] = [[worker_id, list(gpus)] for worker_id, gpus in placement]
        return entry

    def _placement(self, owners: Sequence[tuple[str, int]]) -> Placement:
        """Where a unit's GPUs (their owners, in the unit's order) run its job."""
        if self.runs_gangs_as_ranks and len(owners) > 1:
            return tuple((worker_id, (local,)) for worker_id, local in owners)
        worker_id = owners[0][0]
        return ((worker_id, tuple(local for owner, local in owners if owner == worker_id)),)

    def _live_placements(self) -> dict[int, Placement]:
        """Where each job runs now: its live runs, in rank order, when its gang is whole."""
        live: dict[int, list[Run]] = {}
        for run in self.runs.values():
            if run.ended_at is None:
                live.setdefault(run.job_id, []).append(run)
        return {
            job_id: tuple((run.worker_id, run.gpus) for run in sorted(runs, key=lambda r: r.rank))
            for job_id, runs in live.items()
            if len(runs) == runs[0].world_size
        }

    def _credit_target(self, job: TrackedJob) -> float:
        total = job.target_steps
        if job.completed_at is not None:
            return float(total)
        return float(min(job.step, total - 1))

    def _report(self, now: float) -> RoundReport:
        """Each planned unit's measured steps and run time; progress of jobs outside the
        round (late exits, lost runs); rates and batch sizes reported since the last one."""
        units = []
        planned: set[int] = set()
        for unit in self._units:
            exec_s = max(self._exec_seconds(job_id, now) for job_id in unit.job_ids)
            steps = []
            stopped = []
            for job_id in unit.job_ids:
                steps.append(self._take_progress(self.jobs[job_id]))
                stopped.append(self._stopped_s(self.jobs[job_id], now))
                planned.add(job_id)
            units.append(UnitProgress(tuple(steps), tuple(stopped), exec_s))
        stray = [
            StrayProgress(job.job_id, self._take_progress(job), self._stopped_s(job, now))
            for job in self.jobs.values()
            if job.job_id not in planned and self._credit_target(job) != job.credited
        ]
        worker_types = {w.gpu_type for w in self.workers.values()}
        rates = tuple(
            MeasuredRate(job_type, scale, worker_type, value)
            for (job_type, scale, worker_type), value in self._new_rates.items()
            if worker_type in worker_types
        )
        report = RoundReport(
            now - self.t0, tuple(units), tuple(stray), rates,
            tuple(self._new_batch_sizes.values()),
        )  # fmt: skip
        self._new_rates = {}
        self._new_batch_sizes = {}
        self._units = ()
        return report

    def _take_progress(self, job: TrackedJob) -> float:
        target = self._credit_target(job)
        steps = target - job.credited
        job.credited = target
        return steps

    def _stopped_s(self, job: TrackedJob, now: float) -> float:
        return (job.completed_at if job.completed_at is not None else now) - self.t0

    def _exec_seconds(self, job_id: int, now: float) -> float:
        """The seconds the job held its GPUs this round: from the round's start (its first
        run of the round; a (re)start's switch-over, process start and restore are its
        own overhead, as the simulator charges them) until its runs ended."""
        total = 0.0
        for index, run_id in enumerate(self._round_runs.get(job_id, [])):
            run = self.runs[run_id]
            begin = self._round_start if index == 0 else max(run.launched_at, self._round_start)
            end = min(run.ended_at if run.ended_at is not None else now, now)
            total += max(0.0, end - begin)
        return min(total, now - self._round_start)

    # Workers coming and going.

    def _tell_workers_to_stop(self) -> None:
        """Wait (bounded) until every live worker heard "shutdown" on a heartbeat."""
        deadline = time.monotonic() + 3 * self.settings.heartbeat_s + 1.0
        while time.monotonic() < deadline:
            waiting = [w for w in self.workers.values()
                       if w.registered and w.alive and not w.told_shutdown]  # fmt: skip
            if not waiting:
                return
            self._changed.wait(timeout=0.1)

    def _check_workers(self, now: float) -> None:
        for slot in self.workers.values():
            if slot.alive and now - slot.last_seen > self.settings.dead_after_s:
                slot.alive = False
                self.journal.set_worker_dead(slot.worker_id, now)
                log_event("worker-lost", f"{slot.worker_id} ({slot.hostname}) silent for "
                          f"{now - slot.last_seen:.0f} s: lost; its jobs resume elsewhere",
                          logging.WARNING, worker=slot.worker_id, host=slot.hostname)  # fmt: skip
                for run in list(self.runs.values()):
                    if run.worker_id == slot.worker_id and run.ended_at is None:
                        self._close_run(run, now, "lost")
