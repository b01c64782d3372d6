"""The scheduler's side of the Jobs service: submit, list, cancel, watch, logs.

`JobBook` is a part of `ClusterScheduler` (which inherits it): it keeps what users asked for
until the engine takes it (`Intake`), the jobs' recent events for watchers, and the log
requests in flight to workers. Everything runs under the scheduler's lock; every change is
journaled before it is acknowledged.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from shock.cluster.journal import Journal
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.core.errors import ShockError
from shock.core.executor import Intake
from shock.core.model import JobSpec, batch_size_of
from shock.core.run import RunRequest
from shock.engine.measured_throughputs import ThroughputEstimates
from shock.workloads.families import UnknownJobTypeError, parse_job_type

if TYPE_CHECKING:
    from shock.cluster.scheduler import Run, SchedulerSettings, TrackedJob, WorkerSlot

ADAPTATIONS = ("static", "accordion", "gns")
DEFAULT_LOG_BYTES = 1 << 20
_LOG_WAIT_S = 10.0
_EVENTS_KEPT = 200  # per job, for watchers that join late


class RequestError(ShockError):
    """A request the scheduler refuses: the service answers INVALID_ARGUMENT with it."""


class PreconditionError(ShockError):
    """A well-formed request that does not fit the scheduler's state (FAILED_PRECONDITION)."""


class NotFoundError(ShockError):
    """No such job (NOT_FOUND)."""


class PermissionError_(ShockError):
    """The caller may not do this to this job (PERMISSION_DENIED)."""


class ServiceStopped(ShockError):
    """The service was stopped before it could start running jobs."""


class JobBook:
    # The scheduler's state this part works on (set by ClusterScheduler).
    _lock: threading.RLock
    _changed: threading.Condition
    _stop: threading.Event | None
    jobs: dict[int, TrackedJob]
    runs: dict[int, Run]
    workers: dict[str, WorkerSlot]
    journal: Journal
    request: RunRequest
    estimates: ThroughputEstimates
    settings: SchedulerSettings
    t0: float
    accepts_submissions: bool

    def _init_book(self) -> None:
        self._arrived: list[JobSpec] = []
        self._cancelled: list[int] = []
        self._events: dict[int, list[tuple[float, str]]] = {}
        self._log_replies: dict[int, dict[int, pb.RunLog]] = {}
        self._log_request_ids = itertools.count(1)

    def _command(self, worker_id: str, command: pb.Command) -> None:  # the scheduler's
        raise NotImplementedError

    # What the engine takes.

    def _intake_waiting(self) -> bool:
        return bool(self._arrived or self._cancelled)

    def _take_intake(self) -> Intake:
        intake = Intake(tuple(self._arrived), tuple(self._cancelled))
        self._arrived, self._cancelled = [], []
        return intake

    # Events, for watchers.

    def _record(self, job_id: int, text: str) -> None:
        events = self._events.setdefault(job_id, [])
        events.append((time.time(), text))
        del events[:-_EVENTS_KEPT]
        self._changed.notify_all()

    def _note_event(self, job: TrackedJob, run: Run | None, event: pb.JobEvent) -> None:
        kind = event.WhichOneof("event")
        if kind == "started" and run is not None:
            self._record(job.job_id, f"run {run.run_id} started on {run.worker_id} GPUs "
                         f"{list(run.gpus)} at step {event.started.resumed_from_step}")  # fmt: skip
        elif kind == "checkpoint":
            self._record(job.job_id, f"checkpoint at step {event.checkpoint.step}")
        elif kind == "exit":
            self._record(job.job_id, f"run {event.run_id} ended ({event.exit.reason}) at step "
                         f"{event.exit.step}")  # fmt: skip

    # Users' requests.

    def submit(self, owner: str, request: pb.SubmitJobRequest) -> pb.SubmitJobReply:
        spec = self._checked_spec(owner, request)
        with self._lock:
            self._require_service("submitted")
            job_id = max(self.jobs, default=-1) + 1
            now = time.time()
            # Its arrival: now on the run's clock (0 until the cluster is up).
            arrival = max(0.0, now - self.t0) if self._cluster_up() else 0.0
            spec = JobSpec(
                job_id, spec.job_type, spec.total_steps, spec.scale_factor, arrival,
                spec.priority_weight, mode=spec.mode, entity=owner,
            )  # fmt: skip
            self.journal.add_submitted_job(spec, now)
            from shock.cluster.scheduler import TrackedJob

            self.jobs[job_id] = TrackedJob(spec, submitted_at=now)
            self._arrived.append(spec)
            self._record(job_id, f"submitted by {owner}")
            return pb.SubmitJobReply(job_id=job_id)

    def _cluster_up(self) -> bool:
        return bool(getattr(self, "_t0_fixed", False))

    def _checked_spec(self, owner: str, request: pb.SubmitJobRequest) -> JobSpec:
        if not request.job_type:
            raise RequestError("a job needs a job type (--job-type)")
        scale = request.scale_factor or 1
        if scale < 1:
            raise RequestError(f"--scale-factor must be >= 1, got {scale}")
        if request.steps < 1:
            raise RequestError(f"--steps must be >= 1, got {request.steps}")
        try:
            parse_job_type(request.job_type)  # one the training harness runs
        except UnknownJobTypeError as exc:
            raise RequestError(str(exc)) from None
        weight = request.weight or 1.0
        if not (weight > 0 and math.isfinite(weight)):
            raise RequestError(f"--weight must be a finite number > 0, got {weight}")
        adaptation = request.adaptation or "static"
        if adaptation not in ADAPTATIONS:
            raise RequestError(f"--adaptation must be one of {', '.join(ADAPTATIONS)}")
        if adaptation != "static" and batch_size_of(request.job_type) is None:
            raise RequestError(
                f"--adaptation {adaptation} changes a batch size: name the job type with one, "
                f"e.g. '{request.job_type} (batch size 32)'"
            )
        with self._lock:
            sizes = [w.gpus for w in self.workers.values() if w.alive]
        if sizes and scale > max(sizes):
            raise RequestError(
                f"the job needs {scale} GPUs on one worker; the largest worker has {max(sizes)}"
            )
        return JobSpec(-1, request.job_type, request.steps, scale, 0.0, weight,
                       mode=adaptation, entity=owner)  # fmt: skip

    def _require_service(self, what: str) -> None:
        if not self.accepts_submissions:
            raise PreconditionError(
                f"this scheduler runs a fixed trace: jobs cannot be {what} "
                "(start `shock serve` without --trace for a service)"
            )

    def _job(self, job_id: int) -> TrackedJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}")
        return job

    def owner_of(self, job_id: int) -> str:
        with self._lock:
            return self._job(job_id).spec.entity or ""

    def list_jobs(self, request: pb.ListJobsRequest) -> pb.ListJobsReply:
        with self._lock:
            wanted = [self._job(job_id) for job_id in request.job_ids] or list(self.jobs.values())
            return pb.ListJobsReply(jobs=[
                self.status(job) for job in wanted
                if not request.user or (job.spec.entity or "") == request.user
            ])  # fmt: skip

    def cancel(self, caller: str, admin: bool, job_id: int) -> pb.CancelJobReply:
        with self._lock:
            self._require_service("cancelled")
            job = self._job(job_id)
            owner = job.spec.entity or ""
            if not admin and owner != caller:
                raise PermissionError_(
                    f"job {job_id} belongs to {owner or 'nobody'}: only they or an admin may "
                    "cancel it"
                )
            if job.over:
                raise PreconditionError(f"job {job_id} is {self._state(job)} already")
            self._end_job(job, "cancelled", time.time(), f"cancelled by {caller}")
            return pb.CancelJobReply(job=self.status(job))

    def _end_job(self, job: TrackedJob, state: str, now: float, message: str) -> None:
        """The job never runs again; a live run checkpoints and stops; the engine drops it."""
        job.ended_state, job.ended_at, job.message = state, now, message
        self.journal.end_job(job.job_id, state, now, message)
        self._cancelled.append(job.job_id)
        if job.run_id is not None:
            run = self.runs[job.run_id]
            if not run.preempting and run.ended_at is None:
                run.preempting = True
                self._command(run.worker_id, pb.Command(preempt=pb.Preempt(run_id=run.run_id)))
        self._record(job.job_id, message)

    def _preempt_all(self, wait_s: float = 15.0) -> None:
        """Every live run checkpoints and stops; wait (bounded) until they said so."""
        for run in self.runs.values():
            if run.ended_at is None and not run.preempting:
                run.preempting = True
                self._command(run.worker_id, pb.Command(preempt=pb.Preempt(run_id=run.run_id)))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(
            run.ended_at is None and self.workers[run.worker_id].alive
            for run in self.runs.values()
            if run.worker_id in self.workers
        ):
            self._changed.wait(timeout=0.1)

    def watch(self, job_id: int, active: Callable[[], bool]) -> Iterator[pb.JobUpdate]:
        """The job's events so far, then new ones and its progress, until it is over."""
        sent_events = 0
        last: pb.JobStatus | None = None
        while active():
            with self._lock:
                job = self._job(job_id)
                events = self._events.get(job_id, [])
                fresh = events[sent_events:]
                sent_events = len(events)
                status = self.status(job)
                if not fresh and last is not None and _same(status, last):
                    if job.over:
                        return  # its last state and events are sent
                    self._changed.wait(timeout=1.0)
                    continue
            for at, text in fresh:
                yield pb.JobUpdate(job=status, event=text, time_unix=at)
            if not fresh:
                yield pb.JobUpdate(job=status, time_unix=time.time())
            last = status

    # Status.

    def _state(self, job: TrackedJob) -> str:
        if job.completed_at is not None:
            return "done"
        if job.ended_state is not None:
            return job.ended_state
        if job.run_id is not None:
            return "running"  # launched: it holds its GPUs
        return "queued"

    def status(self, job: TrackedJob) -> pb.JobStatus:
        now = time.time()
        spec = job.spec
        submitted = job.submitted_at
        if submitted is None:  # a trace's job: it arrived on the run's clock
            submitted = self.t0 + spec.arrival_time
        ended = job.completed_at if job.completed_at is not None else job.ended_at
        started = job.started_at
        queued = (started if started is not None else (ended or now)) - submitted
        placement = []
        state = self._state(job)
        if state == "running" and job.run_id is not None:
            run = self.runs[job.run_id]
            slot = self.workers.get(run.worker_id)
            placement.append(pb.JobPlacement(
                worker_id=run.worker_id, hostname=slot.hostname if slot else "", gpus=run.gpus
            ))  # fmt: skip
        return pb.JobStatus(
            job_id=job.job_id, user=spec.entity or "", state=state, job_type=job.job_type,
            scale_factor=spec.scale_factor, step=job.step, target_steps=job.target_steps,
            checkpoint_step=job.checkpoint_step, placement=placement,
            submitted_at_unix=submitted, queued_s=max(0.0, queued),
            rho=self._rho(job, (ended or now) - submitted), ended_at_unix=ended or 0.0,
            message=job.message, weight=spec.priority_weight, adaptation=spec.mode,
            steps_per_s={
                w: self.estimates.estimate(job.job_type, spec.scale_factor, w)
                for w in sorted(self._worker_types())
            },
        )  # fmt: skip

    def _worker_types(self) -> set[str]:
        """The GPU types of the workers (all the table's before any registered)."""
        return {w.gpu_type for w in self.workers.values() if w.gpu_type} or set(
            self.request.table.gpu_types
        )

    def _rho(self, job: TrackedJob, elapsed: float) -> float:
        """Time since submission over the time its progress takes alone on the fastest GPU
        type (finish-time fairness so far); 0 before any progress."""
        rate = max(
            (
                self.estimates.estimate(job.job_type, job.spec.scale_factor, w)
                for w in self._worker_types()
            ),
            default=0.0,
        )
        if job.step <= 0 or rate <= 0:
            return 0.0
        return elapsed / (job.step / rate)

    # Logs, fetched from the workers that ran the job.

    def job_logs(self, job_id: int, max_bytes: int) -> pb.JobLogsReply:
        max_bytes = max_bytes if max_bytes > 0 else DEFAULT_LOG_BYTES
        with self._lock:
            self._job(job_id)
            runs = [row for row in self.journal.runs() if row.job_id == job_id]
            logs: dict[int, pb.RunLog] = {}
            waiting: dict[int, list[int]] = {}
            by_worker: dict[str, list[int]] = {}
            for row in runs:
                by_worker.setdefault(row.worker_id, []).append(row.run_id)
            for worker_id, run_ids in by_worker.items():
                slot = self.workers.get(worker_id)
                if slot is None or not slot.alive or not slot.registered:
                    for run_id in run_ids:
                        logs[run_id] = pb.RunLog(
                            run_id=run_id, worker_id=worker_id,
                            error=f"{worker_id} is not connected: its log stays on its machine",
                        )  # fmt: skip
                    continue
                request_id = next(self._log_request_ids)
                self._log_replies[request_id] = {}
                waiting[request_id] = run_ids
                self._command(worker_id, pb.Command(fetch_log=pb.FetchLog(
                    request_id=request_id, run_ids=run_ids, max_bytes=max_bytes,
                )))  # fmt: skip
            deadline = time.monotonic() + _LOG_WAIT_S
            while waiting and time.monotonic() < deadline:
                for request_id in [r for r in waiting if self._log_replies[r]]:
                    logs.update(self._log_replies.pop(request_id))
                    del waiting[request_id]
                if waiting:
                    self._changed.wait(timeout=0.1)
            for request_id, run_ids in waiting.items():
                self._log_replies.pop(request_id, None)
                for run_id in run_ids:
                    logs[run_id] = pb.RunLog(run_id=run_id, error="its worker did not answer")
            return pb.JobLogsReply(logs=[logs[row.run_id] for row in runs if row.run_id in logs])

    def upload_log(self, request: pb.UploadLogRequest) -> pb.UploadLogReply:
        with self._lock:
            replies = self._log_replies.get(request.request_id)
            if replies is not None:
                for log in request.logs:
                    log.worker_id = request.worker_id
                    replies[log.run_id] = log
                if not request.logs:
                    replies[-1] = pb.RunLog(run_id=-1)  # answered, with nothing
                self._changed.notify_all()
            return pb.UploadLogReply()


def _same(a: pb.JobStatus, b: pb.JobStatus) -> bool:
    return (a.state, a.step, a.checkpoint_step, list(a.placement)) == (
        b.state, b.step, b.checkpoint_step, list(b.placement)
    )
