"""The scheduler's side of the Jobs service: submit, list, cancel, watch, logs.

`JobBook` is a part of `ClusterScheduler` (which inherits it): it keeps what users asked for
until the engine takes it (`Intake`), the jobs' recent events for watchers, and the log
requests in flight to workers. Everything runs under the scheduler's lock; every change is
journaled before it is acknowledged.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from shock.cluster.fairness import (
    Lifetime,
    UserShare,
    WindowShare,
    average_fair_shares,
    average_jobs_in_system,
    finish_time_rho,
    weighted_fair_share,
)
from shock.cluster.job_command import UNSTATED_STEPS, JobCommand
from shock.cluster.journal import Journal
from shock.cluster.names import placement_text
from shock.cluster.oplog import log_event
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
DEFAULT_SHARE_WINDOW_S = 3600.0  # users' shares of GPU time: the last hour
_LOG_WAIT_S = 10.0


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
    _round_index: int
    _plan: dict[int, tuple[tuple[str, tuple[int, ...]], ...]]

    def _init_book(self) -> None:
        self._arrived: list[JobSpec] = []
        self._cancelled: list[int] = []
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

    # Events: journaled for watchers (across restarts), logged for the operator.

    def _record(self, job_id: int, text: str, event: str = "job-event",
                level: int = logging.DEBUG, **fields: object) -> None:  # fmt: skip
        self.journal.add_job_event(job_id, time.time(), text)
        log_event(event, f"job {job_id}: {text}", level, job=job_id, **fields)
        self._changed.notify_all()

    def _gang_parts(self, run: Run) -> list[tuple[str, tuple[int, ...]]]:
        """Where the run's whole gang holds GPUs, in rank order (one part for one process)."""
        ranks = [other for other in self.runs.values()
                 if other.lead_run_id == run.lead_run_id and other.ended_at is None]  # fmt: skip
        ranks = sorted(ranks, key=lambda other: other.rank) or [run]
        return [(other.worker_id, other.gpus) for other in ranks]

    def _note_event(self, job: TrackedJob, run: Run | None, event: pb.JobEvent) -> None:
        kind = event.WhichOneof("event")
        if kind == "started" and run is not None:
            self._record(job.job_id, f"run {run.run_id} started on "
                         f"{placement_text(self._gang_parts(run))} at step "
                         f"{event.started.resumed_from_step}", "run-started")  # fmt: skip
        elif kind == "checkpoint":
            self._record(job.job_id, f"checkpoint at step {event.checkpoint.step}",
                         "job-checkpoint")  # fmt: skip
        elif kind == "exit":
            waiting = "" if event.exit.reason in ("done", "") else "; queued until it runs again"
            self._record(job.job_id, f"run {event.run_id} ended ({event.exit.reason}) at step "
                         f"{event.exit.step}{waiting}", "run-ended")  # fmt: skip

    # Users' requests.

    def submit(self, owner: str, request: pb.SubmitJobRequest) -> pb.SubmitJobReply:
        spec = self._checked_spec(owner, request)
        command = _command_of(request)
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
            self.journal.add_submitted_job(
                spec, now, None if command is None else command.to_json()
            )
            from shock.cluster.scheduler import TrackedJob

            self.jobs[job_id] = TrackedJob(spec, submitted_at=now, command=command)
            self._arrived.append(spec)
            self._record(job_id, f"submitted by {owner}: {spec.job_type}, {spec.total_steps} "
                         f"steps on {spec.scale_factor} GPU(s); queued", "job-submitted",
                         logging.INFO, user=owner, job_type=spec.job_type,
                         steps=spec.total_steps, gpus=spec.scale_factor)  # fmt: skip
            return pb.SubmitJobReply(job_id=job_id)

    def _cluster_up(self) -> bool:
        return bool(getattr(self, "_t0_fixed", False))

    def _checked_spec(self, owner: str, request: pb.SubmitJobRequest) -> JobSpec:
        command = _command_of(request)
        if command is None and not request.job_type:
            raise RequestError("a job needs a job type (--job-type) or a command (-- COMMAND)")
        job_type = request.job_type
        if command is not None:
            job_type = request.name or command.program
        if request.HasField("gpus"):
            scale = request.gpus
            if scale < 1:
                raise RequestError(f"--gpus must be >= 1, got {scale}")
        else:
            scale = request.scale_factor or 1
            if scale < 1:
                raise RequestError(f"--scale-factor must be >= 1, got {scale}")
        steps = request.steps
        if command is not None and steps == 0:
            steps = UNSTATED_STEPS  # until the job says its own
        if steps < 1:
            raise RequestError(f"--steps must be >= 1, got {request.steps}")
        if command is None:
            try:
                parse_job_type(job_type)  # one the training harness runs
            except UnknownJobTypeError as exc:
                raise RequestError(str(exc)) from None
            # A batch size the table lacks runs too: the policies see estimated rates
            # (Gavel's estimator), refined from what the job reports.
        weight = request.weight or 1.0
        if not (weight > 0 and math.isfinite(weight)):
            raise RequestError(f"--weight must be a finite number > 0, got {weight}")
        adaptation = request.adaptation or "static"
        if adaptation not in ADAPTATIONS:
            raise RequestError(f"--adaptation must be one of {', '.join(ADAPTATIONS)}")
        if adaptation != "static" and command is None and batch_size_of(job_type) is None:
            raise RequestError(
                f"--adaptation {adaptation} changes a batch size: name the job type with one, "
                f"e.g. '{request.job_type} (batch size 32)'"
            )
        with self._lock:
            per_type: dict[str, int] = {}
            for worker in self.workers.values():
                if worker.alive and worker.gpu_type:
                    per_type[worker.gpu_type] = per_type.get(worker.gpu_type, 0) + worker.gpus
        if per_type and scale > max(per_type.values()):
            have = ", ".join(f"{n} {t}" for t, n in sorted(per_type.items()))
            raise RequestError(f"the job needs {scale} GPUs of one type; the cluster has {have}")
        return JobSpec(-1, job_type, steps, scale, 0.0, weight,
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
        self._fix_rho(job, now)
        self._cancelled.append(job.job_id)
        if job.run_id is not None:
            run = self.runs[job.run_id]
            if not run.preempting and run.ended_at is None:
                run.preempting = True
                self._command(run.worker_id, pb.Command(preempt=pb.Preempt(run_id=run.run_id)))
        self._record(job.job_id, message, f"job-{state}",
                     logging.WARNING if state == "failed" else logging.INFO,
                     user=job.spec.entity or "", step=job.step)  # fmt: skip

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

    def watch(self, job_id: int, active: Callable[[], bool], history_only: bool = False
              ) -> Iterator[pb.JobUpdate]:  # fmt: skip
        """The job's whole history from the journal (with the times it happened, also from
        before a restart), then new events, its progress and, while it waits, why; until it
        is over (`history_only`: until its history and its state now are sent)."""
        sent_seq = 0
        last: pb.JobStatus | None = None
        waiting_noted = -1  # the round whose waiting state was last said
        while active():
            with self._lock:
                job = self._job(job_id)
                fresh = self.journal.job_events(job_id, sent_seq)
                if fresh:
                    sent_seq = fresh[-1].seq
                status = self.status(job)
                waiting = None
                if status.state == "queued" and self._round_index != waiting_noted:
                    waiting_noted = self._round_index
                    waiting = self._waiting_reason(job)
                if not fresh and waiting is None and last is not None and _same(status, last):
                    if job.over:
                        return  # its last state and events are sent
                    self._changed.wait(timeout=1.0)
                    continue
            for row in fresh:
                yield pb.JobUpdate(job=status, event=row.text, time_unix=row.at)
            if history_only:
                yield pb.JobUpdate(job=status, event=waiting or "", time_unix=time.time())
                return
            if waiting is not None:
                yield pb.JobUpdate(job=status, event=waiting, time_unix=time.time())
            elif not fresh:
                yield pb.JobUpdate(job=status, time_unix=time.time())
            last = status

    def _waiting_reason(self, job: TrackedJob) -> str:
        """Why a queued job is not running, in words."""
        alive = [w for w in self.workers.values() if w.registered and w.alive]
        if not alive:
            return "waiting: no worker is connected"
        if job.job_id in self._plan:
            return (f"waiting: round {self._round_index} gives it "
                    f"{placement_text(self._plan[job.job_id])}, once they are free")  # fmt: skip
        total = sum(w.gpus for w in alive)
        busy = sum(len(run.gpus) for run in self.runs.values() if run.ended_at is None)
        queued = sum(1 for other in self.jobs.values() if self._state(other) == "queued")
        return (f"waiting for GPUs: round {self._round_index} gave it none ({busy} of {total} "
                f"GPUs busy, {queued} job(s) queued)")  # fmt: skip

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
        submitted = self._submitted_at(job)
        ended = job.completed_at if job.completed_at is not None else job.ended_at
        started = job.started_at
        queued = (started if started is not None else (ended or now)) - submitted
        placement = []
        state = self._state(job)
        if state == "running" and job.run_id is not None:
            for worker_id, gpus in _merged(self._gang_parts(self.runs[job.run_id])):
                slot = self.workers.get(worker_id)
                placement.append(pb.JobPlacement(
                    worker_id=worker_id, hostname=slot.hostname if slot else "", gpus=gpus
                ))  # fmt: skip
        return pb.JobStatus(
            job_id=job.job_id, user=spec.entity or "", state=state, job_type=job.job_type,
            scale_factor=spec.scale_factor, step=job.step, target_steps=job.target_steps,
            checkpoint_step=job.checkpoint_step, placement=placement,
            submitted_at_unix=submitted, queued_s=max(0.0, queued),
            rho=job.rho if job.rho is not None else self._rho(job, submitted, ended or now),
            ended_at_unix=ended or 0.0,
            message=job.message, weight=spec.priority_weight, adaptation=spec.mode,
            command=() if job.command is None else job.command.argv,
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

    def _submitted_at(self, job: TrackedJob) -> float:
        if job.submitted_at is not None:
            return job.submitted_at
        return self.t0 + job.spec.arrival_time  # a trace's job: on the run's clock

    def _lifetimes(self, now: float) -> list[Lifetime]:
        """Every job's stay in the system (queued or running), until it ended or now."""
        lifetimes = []
        for job in self.jobs.values():
            ended = job.completed_at if job.completed_at is not None else job.ended_at
            lifetimes.append((self._submitted_at(job), ended if ended is not None else now))
        return lifetimes

    def _rho(self, job: TrackedJob, submitted: float, until: float) -> float:
        """Finish-time fairness so far (docs/metrics.md): time since submission over the
        time its progress takes alone on the fastest GPU type, times max(1, N/G)."""
        rate = max(
            (
                self.estimates.estimate(job.job_type, job.spec.scale_factor, w)
                for w in self._worker_types()
            ),
            default=0.0,
        )
        if job.step <= 0 or rate <= 0:
            return 0.0
        jobs_in_system = average_jobs_in_system(self._lifetimes(until), submitted, until)
        gpus = sum(w.gpus for w in self.workers.values() if w.alive) or 1
        return finish_time_rho(until - submitted, job.step, rate, jobs_in_system, gpus)

    def _fix_rho(self, job: TrackedJob, ended: float) -> None:
        """Its ρ when it ended, journaled once: it does not move as estimates do later."""
        if job.rho is None:
            job.rho = self._rho(job, self._submitted_at(job), ended)
            self.journal.set_rho(job.job_id, job.rho)

    # Users' shares.

    def user_shares(self, window_s: float = DEFAULT_SHARE_WINDOW_S) -> list[UserShare]:
        """Each user's share of the GPUs now and of the GPU time over the last `window_s`
        and since the start, beside their weighted fair shares. Users are those of the
        users file (with its weights) and of the jobs (weight 1 when not in the file)."""
        if not window_s > 0:
            raise RequestError(f"the window must be > 0 s, got {window_s:g}")
        with self._lock:
            now = time.time()
            weights = dict(self.request.config.entity_weights or {})
            jobs = list(self.jobs.values())
            owned = [(job.spec.entity or "", life) for job, life in zip(
                jobs, self._lifetimes(now), strict=True)]  # fmt: skip
            for user, _ in owned:
                weights.setdefault(user, 1.0)
            held: dict[str, int] = {}
            active: set[str] = set()
            for job in jobs:
                state = self._state(job)
                if state in ("queued", "running"):
                    active.add(job.spec.entity or "")
                if state == "running" and job.run_id is not None:
                    gpus = sum(len(g) for _, g in self._gang_parts(self.runs[job.run_id]))
                    held[job.spec.entity or ""] = held.get(job.spec.entity or "", 0) + gpus
            total = sum(w.gpus for w in self.workers.values() if w.registered and w.alive)
            start = min(self.t0, now) if self._cluster_up() else now
            windows: list[dict[str, WindowShare]] = []
            for since in (max(start, now - window_s), start):
                used = self.journal.gpu_seconds_by_user(since, now)
                fair = average_fair_shares(weights, owned, since, now)
                all_used = sum(used.values())
                windows.append({
                    user: WindowShare(now - since, used.get(user, 0.0),
                                      used.get(user, 0.0) / all_used if all_used else 0.0,
                                      fair.get(user, 0.0))
                    for user in weights
                })  # fmt: skip
        return [
            UserShare(
                user, weight, held.get(user, 0), held.get(user, 0) / total if total else 0.0,
                weighted_fair_share(user, weights, active), windows[0][user], windows[1][user],
            )
            for user, weight in sorted(weights.items())
        ]

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


def _merged(parts: list[tuple[str, tuple[int, ...]]]) -> list[tuple[str, tuple[int, ...]]]:
    """One entry per worker, its GPUs in rank order."""
    merged: dict[str, tuple[int, ...]] = {}
    for worker_id, gpus in parts:
        merged[worker_id] = merged.get(worker_id, ()) + tuple(gpus)
    return list(merged.items())
def _command_of(request: pb.SubmitJobRequest) -> JobCommand | None:
    """The submitted command, checked; None for a built-in family's job."""
    if not request.command:
        if request.workdir or request.env:
            raise RequestError("--workdir and --env go with a command: -- COMMAND ARGS...")
        return None
    if not request.command[0]:
        raise RequestError("the command is empty")
    for name in request.env:
        if not name or "=" in name or "\0" in name:
            raise RequestError(f"--env {name!r}: expected NAME=VALUE with a name")
    return JobCommand(
        tuple(request.command), request.workdir, tuple(sorted(request.env.items())),
        max(request.steps, 0),
    )  # fmt: skip


def _same(a: pb.JobStatus, b: pb.JobStatus) -> bool:
    return (a.state, a.step, a.checkpoint_step, list(a.placement)) == (
        b.state, b.step, b.checkpoint_step, list(b.placement)
    )
