"""The scheduler service's state machine: `Mechanism` in wall-clock rounds on real workers.

Each round: admit arrived jobs, `plan_round`, then for every planned job extend the lease of
its run if it stays on the same GPUs, otherwise preempt the old run and launch a new one as
soon as the job's previous run has exited and the target GPUs are free. At the round's end
(its length, or earlier once every run of the round has exited) each unit is credited with
the steps its job reported, so the mechanism's progress is measured, not simulated.
Measured throughputs feed an EWMA estimate that replaces the table's rates.

All state changes happen under one lock; the gRPC handlers (`service.py`) and the round loop
call into this class. Everything needed to resume is written to the journal first.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shock.cluster.estimates import ThroughputEstimates
from shock.cluster.journal import FairnessRow, Journal, ThroughputRow, WorkerRow
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.core.epochs import job_type_with_batch_size
from shock.core.errors import ShockError
from shock.core.events import JobFinished, RoundEnded, RunFinished, RunStarted
from shock.core.mechanism import Assignment, JobState, Mechanism, MechanismStats
from shock.core.metrics import JobRecord, RunCounters, compute_metrics
from shock.core.model import Cluster, JobSpec, batch_size_of
from shock.core.results import RunResult
from shock.core.run import RunRequest
from shock.core.throughputs import throughputs_to_dict

_log = logging.getLogger(__name__)

MEASURED_TABLE_FILE = "measured_throughputs.json"
_WORKER_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_COUNTER_FIELDS = (
    "busy_gpu_seconds", "preemptions", "lease_extensions", "placements", "rounds",
    "allocations", "solver_seconds",
)  # fmt: skip


class RequestError(ShockError):
    """A request the scheduler refuses: the service answers INVALID_ARGUMENT with it."""


class PreconditionError(ShockError):
    """A well-formed request that does not fit the scheduler's state (FAILED_PRECONDITION)."""


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
    told_shutdown: bool = False


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


@dataclass(slots=True)
class TrackedJob:
    spec: JobSpec
    step: int = 0
    checkpoint_step: int = 0
    completed_at: float | None = None
    run_id: int | None = None  # the live run, if any
    not_before: float = 0.0  # a lost run's lease: no relaunch before it ends
    credited: float = 0.0  # steps given to the mechanism
    failures: int = 0
    admitted: bool = False
    last_assignment: Assignment | None = None
    # What it runs as now: the trace's job type and steps until an approved batch-size
    # change (Accordion, GNS) takes effect; then the new batch size's type and the step
    # target the harness rescaled. Launches always name the trace's (a relaunch resumes
    # the new batch size from its checkpoint).
    job_type: str = ""
    target_steps: int = 0

    def __post_init__(self) -> None:
        self.job_type = self.job_type or self.spec.job_type
        self.target_steps = self.target_steps or self.spec.total_steps

    @property
    def job_id(self) -> int:
        return self.spec.job_id


class ClusterScheduler:
    def __init__(self, request: RunRequest, settings: SchedulerSettings) -> None:
        self.request = request
        self.settings = settings
        self.config = request.config.mechanism
        self.round_length = self.config.round_length_s
        self.grace_s = max(3 * settings.heartbeat_s, 0.25 * self.round_length)
        self.policy = request.policy.for_run(request.config.seed)
        self.journal = Journal(settings.state_dir)
        self.checkpoint_root = settings.state_dir / "checkpoints"
        self.estimates = ThroughputEstimates(prior=request.table)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.workers: dict[str, WorkerSlot] = {}
        self.runs: dict[int, Run] = {}
        self.jobs: dict[int, TrackedJob] = {}
        self.mechanism: Mechanism | None = None
        self._cluster_signature: tuple[tuple[str, str, int], ...] = ()
        self._gpu_owner: dict[int, tuple[str, int]] = {}
        self._stats_base = dict.fromkeys(_COUNTER_FIELDS, 0.0)
        self._round_index = 0
        self._round_start = 0.0
        self._round_end = 0.0
        self._assignments: list[Assignment] = []
        self._plan: dict[int, tuple[str, tuple[int, ...]]] = {}
        self._round_runs: dict[int, list[int]] = {}
        self._failure: str | None = None
        self.done = False
        self.incarnation = uuid.uuid4().hex
        self._load()

    # Start-up: a fresh run, or resume from the journal.

    def _load(self) -> None:
        journal = self.journal
        # Time zero of the trace: when the first round starts (the cluster is up), fixed in
        # the journal so that a restarted scheduler keeps measuring from it.
        t0 = journal.get_meta("t0")
        self.t0 = time.time() if t0 is None else float(t0)
        self._t0_fixed = t0 is not None
        if journal.get_meta("trace") is None:
            journal.set_meta("trace", self.request.trace.source)
            journal.add_jobs(list(self.request.trace.jobs))
        for row in journal.jobs():
            self.jobs[row.spec.job_id] = TrackedJob(
                row.spec, row.step, row.checkpoint_step, row.completed_at,
                job_type=row.job_type or "", target_steps=row.target_steps or 0,
            )  # fmt: skip
        # Fairness counters of the last round before a restart, given back to each job when
        # the new mechanism admits it (then dropped: they are only a starting point).
        self._saved_fairness: dict[int, list[FairnessRow]] = {}
        for fairness in journal.fairness():
            self._saved_fairness.setdefault(fairness.job_id, []).append(fairness)
        clock = journal.get_meta("fairness_clock")
        self._saved_clock: dict[str, object] | None = None if clock is None else json.loads(clock)
        self._restore_policy(journal.get_meta("policy_state"))
        counters = journal.get_meta("counters")
        if counters is not None:
            self._stats_base.update(json.loads(counters))
        self._round_index = int(self._stats_base["rounds"])
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
                    acked_seq=worker.acked_seq,
                )  # fmt: skip
        for run in journal.runs(open_only=True):
            self.runs[run.run_id] = Run(
                run.run_id, run.job_id, run.worker_id, run.gpus, run.launched_at,
                run.lease_until, started_at=run.started_at,
            )  # fmt: skip
            self.jobs[run.job_id].run_id = run.run_id
            if run.worker_id not in self.workers:
                self._close_run(self.runs[run.run_id], now, "lost")

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
                    raise PreconditionError(
                        f"workers of type {request.gpu_type} have {other.gpus} GPUs each; "
                        f"this one declares {len(request.devices)}"
                    )
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
            slot.last_seen = now
            slot.commands = []
            self.journal.set_worker_alive(slot.worker_id)
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
                or self._plan.get(run.job_id) != (run.worker_id, run.gpus)
            ):
                return pb.RenewLeaseReply(granted=False)
            run.lease_until = max(run.lease_until, self._round_end + self.grace_s)
            self.journal.set_run_lease(run.run_id, run.lease_until)
            return pb.RenewLeaseReply(granted=True, seconds=run.lease_until - now)

    # Job events.

    def _apply_event(self, event: pb.JobEvent) -> None:
        run = self.runs.get(event.run_id)
        job = self.jobs.get(event.job_id)
        if job is None or job.completed_at is not None:
            return  # completions are final: resent events of a finished job change nothing
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
            if progress.steps_per_s > 0:
                self._observe_throughput(job, run, progress.steps_per_s)
        elif kind == "checkpoint":
            job.checkpoint_step = event.checkpoint.step
            journal.set_checkpoint(job.job_id, job.checkpoint_step, event.checkpoint.path)
        elif kind == "batch_size_request" and self.settings.approve_batch_size_changes:
            size = event.batch_size_request.batch_size
            journal.set_batch_size(job.job_id, size)
            self._command(run.worker_id, pb.Command(
                batch_size=pb.BatchSize(run_id=run.run_id, batch_size=size)
            ))  # fmt: skip

    def _change_batch_size(self, job: TrackedJob, batch_size: int, target_steps: int) -> None:
        """The job trains at another batch size now: from here on it is that batch size's
        job type, so its throughput reports and the mechanism's rates use that type's entry
        (measured, else the prior table's, as for any type), and its steps count towards the
        target the harness rescaled."""
        job.job_type = job_type_with_batch_size(job.spec.model_family, batch_size)
        if target_steps > 0:
            job.target_steps = target_steps
        self.journal.set_job_type(job.job_id, job.job_type, job.target_steps)
        mechanism = self.mechanism
        state = None if mechanism is None else mechanism.active.get(job.job_id)
        if mechanism is None or state is None:
            return  # admission gives it the new type
        self._set_type_rates(mechanism, job)
        mechanism.change_job_type(state, job.job_type, job.target_steps, state.steps_done)

    def _set_type_rates(self, mechanism: Mechanism, job: TrackedJob) -> None:
        """Put the job's current type in the mechanism's table (it may be new to it)."""
        scale = job.spec.scale_factor
        for worker_type in mechanism.worker_types:
            rate = self.estimates.estimate(job.job_type, scale, worker_type)
            mechanism.table.set(job.job_type, scale, worker_type, rate)

    def _admit(self, mechanism: Mechanism, job: TrackedJob) -> JobState:
        """Admit a job with what it has done, at its current job type; after a restart,
        with the fairness counters it had in the journal."""
        state = mechanism.admit(job.spec)
        state.steps_done = job.credited
        if job.job_type != job.spec.job_type:
            self._set_type_rates(mechanism, job)
            mechanism.change_job_type(state, job.job_type, job.target_steps, job.credited)
        for saved in self._saved_fairness.pop(job.job_id, []):
            if saved.worker_type in mechanism.worker_types:
                column = mechanism.worker_types.index(saved.worker_type)
                state.time_so_far[column] = saved.time_so_far
                state.deficit[column] = saved.deficit
                if saved.allocation is not None:
                    if state.allocation is None:
                        state.allocation = [0.0] * len(mechanism.worker_types)
                    state.allocation[column] = saved.allocation
        return state

    def _restore_policy(self, saved: str | None) -> None:
        """Give the policy back what it kept before a restart (Shockwave's targets and plan,
        FTF's attained time, FIFO's placements, ...). A snapshot of another policy, or one
        that does not fit, is set aside: the policy then starts afresh, as it would without."""
        if saved is None:
            return
        try:
            document = json.loads(saved)
            if document["policy"] != self.policy.name:
                _log.warning(
                    "the journal holds the state of policy %r, not %r: %r starts afresh",
                    document["policy"], self.policy.name, self.policy.name,
                )  # fmt: skip
                return
            self.policy.restore(document["state"])
        except Exception as error:  # an edited or foreign journal: never fatal
            _log.warning(
                "policy state in the journal does not fit (%s: %s): %r starts afresh",
                type(error).__name__, error, self.policy.name,
            )  # fmt: skip
            self.policy = self.request.policy.for_run(self.request.config.seed)

    def _save_fairness(self) -> None:
        """Journal every active job's time counters and the mechanism's clock for them, so
        that a restarted scheduler goes on with the same fairness state."""
        mechanism = self.mechanism
        if mechanism is None:
            return
        rows = [
            FairnessRow(
                job_id, worker_type, state.time_so_far[column], state.deficit[column],
                None if state.allocation is None else state.allocation[column],
            )
            for job_id, state in sorted(mechanism.active.items())
            for column, worker_type in enumerate(mechanism.worker_types)
        ]  # fmt: skip
        self.journal.set_fairness(rows)
        snapshot = self.policy.snapshot()
        if snapshot is not None:
            document = {"policy": self.policy.name, "state": snapshot}
            self.journal.set_meta("policy_state", json.dumps(document))
        self.journal.set_meta("fairness_clock", json.dumps({
            "last_reset_s": mechanism.last_reset_s,
            "worker_time": dict(zip(mechanism.worker_types, mechanism.worker_time, strict=True)),
        }))  # fmt: skip

    def _apply_exit(self, job: TrackedJob, run: Run | None, exit: pb.Exit, now: float) -> None:
        if exit.target_steps > 0:
            job.target_steps = exit.target_steps
        completed = exit.reason == "done" and exit.step >= job.target_steps
        if (run is None or run.ended_at is not None) and not completed:
            return  # a run closed before its exit arrived: only a completion still counts
        if completed:
            job.step = job.target_steps
            run_id = run.run_id if run is not None else 0
            if self.journal.record_completion(job.spec.job_id, now, run_id, job.step):
                job.completed_at = now
                if run is not None and run.ended_at is not None:
                    # Closed as lost (its worker was silent), yet it finished: say so.
                    self.journal.correct_run_completed(run.run_id, now, job.step)
                hook = self.request.registry.hook
                hook.job_finished(
                    event=JobFinished(now - self.t0, job.spec.job_id,
                                      now - self.t0 - job.spec.arrival_time)
                )  # fmt: skip
        elif exit.reason in ("error", "crashed"):
            job.failures += 1
            job.step = job.checkpoint_step
            if job.failures >= self.settings.max_job_failures:
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
        if reason == "lost":
            # Its process may still be running (a partitioned worker) until its lease ends.
            job.step = job.checkpoint_step
            self.journal.set_progress(job.spec.job_id, job.step)
            if wait_for_lease:
                job.not_before = max(job.not_before, run.lease_until)

    def _observe_throughput(self, job: TrackedJob, run: Run, steps_per_s: float) -> None:
        worker_type = self.workers[run.worker_id].gpu_type
        job_type, scale = job.job_type, job.spec.scale_factor  # keyed by the current batch size
        value = self.estimates.observe(job_type, scale, worker_type, steps_per_s)
        samples = self.estimates.measured[(job_type, scale, worker_type)][1]
        self.journal.set_throughput(ThroughputRow(job_type, scale, worker_type, value, samples))
        mechanism = self.mechanism
        if mechanism is None or worker_type not in mechanism.worker_types:
            return
        column = mechanism.worker_types.index(worker_type)
        mechanism.table.set(job_type, scale, worker_type, value)
        for state in mechanism.active.values():
            if (state.spec.job_type, state.scale_factor) == (job_type, scale):
                before = state.rates[column]
                state.rates[column] = value
                if before <= 0 or abs(value - before) / before > 0.2:
                    mechanism.need_allocation = True  # rates moved: re-solve the policy

    def _command(self, worker_id: str, command: pb.Command) -> None:
        slot = self.workers.get(worker_id)
        if slot is not None:
            slot.commands.append(command)
            self._changed.notify_all()

    # The round loop.

    def run(self, stop: threading.Event | None = None) -> RunResult:
        """Drive rounds until every job completed; returns the run's result."""
        stop = stop or threading.Event()
        started = time.perf_counter()
        self.request.registry.hook.run_started(
            event=RunStarted(self.policy.name, "grpc", len(self.jobs))
        )
        deadline = time.monotonic() + self.settings.startup_timeout_s
        limit = self.settings.run_timeout_s
        run_deadline = None if limit is None else time.monotonic() + limit
        with self._lock:
            while not self.done:
                if stop.is_set():
                    raise ShockError("the cluster run was interrupted")
                if self._failure is not None:
                    raise ShockError(self._failure)
                if run_deadline is not None and time.monotonic() > run_deadline:
                    raise ShockError(f"the cluster run did not finish within {limit:g} s")
                now = time.time()
                self._check_workers(now)
                ready = sum(1 for w in self.workers.values() if w.registered and w.alive)
                if ready < self.settings.min_workers and self.mechanism is None:
                    if time.monotonic() > deadline:
                        raise ShockError(
                            f"only {ready} of {self.settings.min_workers} workers registered "
                            f"within {self.settings.startup_timeout_s:g} s"
                        )
                elif self._round_over(now):
                    if self._assignments:
                        self._end_round(now)
                    self.done = all(j.completed_at is not None for j in self.jobs.values())
                    if not self.done and ready > 0:
                        self._start_round(now)
                if not self.done:
                    self._dispatch(now)
                    # Wake at the round's end, not up to 0.2 s after it (rounds as long
                    # as the simulator's).
                    self._changed.wait(timeout=min(0.2, max(self._round_end - now, 0.01)))
            self._changed.notify_all()
            self._tell_workers_to_stop()
            result = self._result(time.perf_counter() - started)
        self.request.registry.hook.run_finished(
            event=RunFinished(time.time() - self.t0, len(result.records))
        )
        return result

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
                for run in list(self.runs.values()):
                    if run.worker_id == slot.worker_id and run.ended_at is None:
                        self._close_run(run, now, "lost")

    def _live_signature(self) -> tuple[tuple[str, str, int], ...]:
        return tuple(sorted(
            (w.worker_id, w.gpu_type, w.gpus)
            for w in self.workers.values() if w.registered and w.alive
        ))  # fmt: skip

    def _round_over(self, now: float) -> bool:
        if now >= self._round_end or self._live_signature() != self._cluster_signature:
            return True  # also early when a worker joined or died: plan for the new cluster
        if self.mechanism is None or not self._assignments:
            return self._arrival_due(now)
        # Early end, as in the simulator: every job of the round has finished its share.
        return all(
            self.jobs[job_id].completed_at is not None for job_id in self._plan
        )

    def _arrival_due(self, now: float) -> bool:
        return any(
            not job.admitted and job.completed_at is None
            and job.spec.arrival_time <= now - self.t0
            for job in self.jobs.values()
        )  # fmt: skip

    def _rebuild_mechanism(self) -> None:
        """A mechanism for the live workers; jobs keep their progress and time counters."""
        alive = sorted(
            (w for w in self.workers.values() if w.registered and w.alive),
            key=lambda w: (w.gpu_type, w.registered_seq, w.worker_id),
        )
        gpus_per_type: dict[str, int] = {}
        per_server: dict[str, int] = {}
        for slot in alive:
            gpus_per_type[slot.gpu_type] = gpus_per_type.get(slot.gpu_type, 0) + slot.gpus
            per_server[slot.gpu_type] = slot.gpus
        cluster = Cluster(gpus_per_type, per_server)
        # Global GPU ids follow Cluster.servers(): by type, one server per worker.
        self._gpu_owner = {}
        next_gpu = 0
        for slot in alive:
            for local in range(slot.gpus):
                self._gpu_owner[next_gpu] = (slot.worker_id, local)
                next_gpu += 1
        old = self.mechanism
        if old is not None:
            for name in _COUNTER_FIELDS:
                if hasattr(old.stats, name):
                    self._stats_base[name] += getattr(old.stats, name)
        keys = sorted({(j.spec.job_type, j.spec.scale_factor) for j in self.jobs.values()})
        keys += sorted({(j.job_type, j.spec.scale_factor) for j in self.jobs.values()} - set(keys))
        prices = self.request.config.prices
        if prices is not None and any(w not in prices for w in cluster.worker_types):
            prices = None
        mechanism = Mechanism(
            cluster, self.policy, self.request.solver, self.request.placement,
            self.estimates.table(keys, cluster.worker_types), self.config, prices=prices,
        )  # fmt: skip
        mechanism.stats = MechanismStats()
        if old is not None:
            mechanism.last_reset_s = old.last_reset_s
        elif self._saved_clock is not None:  # the first mechanism after a restart
            mechanism.last_reset_s = float(self._saved_clock["last_reset_s"])  # type: ignore[arg-type]
            worker_time = self._saved_clock["worker_time"]
            assert isinstance(worker_time, dict)
            for column, worker_type in enumerate(mechanism.worker_types):
                mechanism.worker_time[column] = float(worker_time.get(worker_type, 0.0))
            self._saved_clock = None
        for job in self.jobs.values():
            if job.admitted and job.completed_at is None:
                state = self._admit(mechanism, job)
                previous = old.active.get(job.spec.job_id) if old is not None else None
                if old is not None and previous is not None:
                    self._copy_counters(old, previous, mechanism, state)
        self.mechanism = mechanism
        self._cluster_signature = self._live_signature()
        for job in self.jobs.values():
            job.last_assignment = None

    @staticmethod
    def _copy_counters(old: Mechanism, before: JobState, new: Mechanism, after: JobState) -> None:
        for column, worker_type in enumerate(new.worker_types):
            if worker_type in old.worker_types:
                previous = old.worker_types.index(worker_type)
                after.time_so_far[column] = before.time_so_far[previous]
                after.deficit[column] = before.deficit[previous]

    def _start_round(self, now: float) -> None:
        if not self._t0_fixed:
            self.t0, self._t0_fixed = now, True
            self.journal.set_meta("t0", repr(now))
        if self.mechanism is None or self._live_signature() != self._cluster_signature:
            self._rebuild_mechanism()
        mechanism = self.mechanism
        assert mechanism is not None
        for job in sorted(self.jobs.values(), key=lambda j: (j.spec.arrival_time, j.spec.job_id)):
            if (
                not job.admitted
                and job.completed_at is None
                and job.spec.arrival_time <= now - self.t0
            ):
                job.admitted = True
                job.credited = float(job.step)
                self._admit(mechanism, job)
        assignments = mechanism.plan_round(now - self.t0)
        self._assignments = assignments
        self._round_start = now
        self._round_end = now + (self.round_length if assignments else 0.5)
        self._plan = {}
        self._round_runs = {}
        for assignment in assignments:
            worker_id = self._gpu_owner[assignment.gpus[0]][0]
            local = tuple(
                self._gpu_owner[g][1] for g in assignment.gpus
                if self._gpu_owner[g][0] == worker_id
            )  # fmt: skip
            for member in assignment.unit.members:
                self._plan[member.job_id] = (worker_id, local)
                self.jobs[member.job_id].last_assignment = assignment
        if assignments:
            self._round_index += 1
            self._save_fairness()  # the allocation may have been recomputed
            self.journal.set_meta("counters", json.dumps(self._counters_dict()))
            self.journal.add_round(self._round_index, now, [
                {"jobs": list(job_ids), "worker": worker, "gpus": list(gpus)}
                for job_ids, (worker, gpus) in self._grouped_plan()
            ])  # fmt: skip
        lease_until = self._round_end + self.grace_s
        for run in list(self.runs.values()):
            if run.ended_at is not None:
                continue
            target = self._plan.get(run.job_id)
            if target == (run.worker_id, run.gpus) and not run.preempting:
                run.lease_until = lease_until
                self.journal.set_run_lease(run.run_id, lease_until)
                self._round_runs.setdefault(run.job_id, []).append(run.run_id)
                self._command(run.worker_id, pb.Command(
                    lease=pb.Lease(run_id=run.run_id, seconds=lease_until - now)
                ))  # fmt: skip
            elif not run.preempting:
                run.preempting = True
                self._command(run.worker_id, pb.Command(preempt=pb.Preempt(run_id=run.run_id)))

    def _grouped_plan(self) -> list[tuple[tuple[int, ...], tuple[str, tuple[int, ...]]]]:
        return [(a.unit.member_ids, self._plan[a.unit.member_ids[0]]) for a in self._assignments]

    def _dispatch(self, now: float) -> None:
        """Launch every planned job that is not running, once its GPUs are free."""
        for job_id, (worker_id, gpus) in self._plan.items():
            job = self.jobs[job_id]
            slot = self.workers.get(worker_id)
            if (
                job.completed_at is not None
                or job.run_id is not None
                or now < job.not_before
                or slot is None
                or not slot.alive
                or now >= self._round_end
            ):
                continue
            busy = any(
                run.ended_at is None
                and run.worker_id == worker_id
                and set(run.gpus) & set(gpus)
                and self._plan.get(run.job_id) != (worker_id, gpus)
                for run in self.runs.values()
            )
            if busy:
                continue
            lease_until = self._round_end + self.grace_s
            run_id = self.journal.add_run(job_id, worker_id, gpus, now, lease_until, job.step)
            self.runs[run_id] = Run(run_id, job_id, worker_id, gpus, now, lease_until)
            job.run_id = run_id
            self._round_runs.setdefault(job_id, []).append(run_id)
            directory = self.checkpoint_root / f"job-{job_id}"
            directory.mkdir(parents=True, exist_ok=True)
            spec = job.spec
            self._command(worker_id, pb.Command(launch=pb.Launch(
                run_id=run_id, job_id=job_id, job_type=spec.job_type,
                target_steps=spec.total_steps, checkpoint_dir=str(directory), gpus=gpus,
                lease_s=lease_until - now, seed=self.request.config.seed + job_id,
                adaptation=spec.mode if spec.mode in ("accordion", "gns") else "static",
            )))  # fmt: skip

    def _credit_target(self, job: TrackedJob) -> float:
        total = job.target_steps
        if job.completed_at is not None:
            return float(total)
        return float(min(job.step, total - 1))

    def _end_round(self, now: float) -> None:
        """Credit each unit of the round with its jobs' measured steps and run time."""
        mechanism = self.mechanism
        assert mechanism is not None
        busy = 0.0
        credited: set[int] = set()
        for assignment in self._assignments:
            members = assignment.unit.members
            exec_s = max(self._exec_seconds(m.job_id, now) for m in members)
            steps = []
            for member in members:
                job = self.jobs[member.job_id]
                target = self._credit_target(job)
                steps.append(target - job.credited)
                job.credited = target
                credited.add(member.job_id)
            busy += exec_s * len(assignment.gpus)
            if all(m.job_id in mechanism.active for m in members):
                mechanism.credit(assignment, steps, exec_s)
        # Progress that arrived for jobs outside this round (late exits, lost runs).
        for job in self.jobs.values():
            state = mechanism.active.get(job.spec.job_id)
            if state is None or job.spec.job_id in credited:
                continue
            target = self._credit_target(job)
            if target != job.credited:
                assignment = job.last_assignment or Assignment(
                    state, 0, mechanism.worker_types[0], (), (state.rates[0],), False
                )
                mechanism.credit(assignment._replace(unit=state), [target - job.credited], 0.0)
                job.credited = target
        self._stats_base["busy_gpu_seconds"] += busy
        self.journal.set_meta("counters", json.dumps(self._counters_dict()))
        self._save_fairness()
        self._assignments = []
        completed = sum(1 for j in self.jobs.values() if j.completed_at is not None)
        self.request.registry.hook.round_ended(
            event=RoundEnded(now - self.t0, self._round_index, len(mechanism.active), completed)
        )

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

    def _counters_dict(self) -> dict[str, float]:
        counters = dict(self._stats_base)
        counters["rounds"] = self._round_index
        if self.mechanism is not None:
            stats = self.mechanism.stats
            counters["preemptions"] += stats.preemptions
            counters["lease_extensions"] += stats.lease_extensions
            counters["placements"] += stats.lease_opportunities
            counters["allocations"] += stats.allocations
            counters["solver_seconds"] += stats.solver_seconds
        return counters

    # Results.

    def measured_table_path(self) -> Path:
        return self.settings.state_dir / MEASURED_TABLE_FILE

    def _result(self, wall_s: float) -> RunResult:
        worker_types = tuple(sorted({w.gpu_type for w in self.workers.values()}))
        records = []
        for job in sorted(self.jobs.values(), key=lambda j: j.spec.job_id):
            if job.completed_at is None:
                continue
            spec = job.spec
            estimate = self.estimates.estimate
            fastest = max(
                (estimate(spec.job_type, spec.scale_factor, w) for w in worker_types), default=0.0
            )
            records.append(JobRecord(
                spec.job_id, spec.arrival_time, job.completed_at - self.t0,
                spec.total_steps / fastest if fastest > 0 else float("inf"), spec.scale_factor,
            ))  # fmt: skip
        counters_dict = self._counters_dict()
        counters = RunCounters(
            busy_gpu_seconds=counters_dict["busy_gpu_seconds"],
            preemptions=int(counters_dict["preemptions"]),
            lease_extensions=int(counters_dict["lease_extensions"]),
            placements=int(counters_dict["placements"]),
            rounds=int(counters_dict["rounds"]),
            allocations=int(counters_dict["allocations"]),
            solver_seconds=counters_dict["solver_seconds"],
        )
        gpus = sum(w.gpus for w in self.workers.values() if w.registered)
        metrics, rhos = compute_metrics(records, gpus, counters, wall_s, self.request.config.window)
        table = self.estimates.measured_table()
        path = self.measured_table_path()
        path.write_text(json.dumps(throughputs_to_dict(table), indent=2) + "\n")
        cluster = ",".join(
            f"{t}={sum(w.gpus for w in self.workers.values() if w.gpu_type == t and w.registered)}"
            for t in worker_types
        )
        return RunResult(
            policy=self.policy.name,
            backend="grpc",
            solver=self.request.solver.name,
            trace=self.journal.get_meta("trace") or self.request.trace.source,
            cluster=cluster,
            preset=self.request.config.preset,
            metrics=metrics,
            records=tuple(records),
            rhos=rhos,
            unfinished_jobs=len(self.jobs) - len(records),
            adaptation_rules="harness",
        )
