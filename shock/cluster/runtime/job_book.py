"""The job service: submit, list, cancel, watch and read the logs of jobs, and the intake the
engine takes them from.

Everything runs under the runtime's lock; every change is journaled before it is
acknowledged. Requests and answers are shock's own types (`job_messages.py`); the gRPC
adapter translates them.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from shock.cluster.job_command import UNSTATED_STEPS, JobCommand
from shock.cluster.names import placement_text
from shock.cluster.runtime.errors import (
    NotFoundError,
    PermissionError_,
    PreconditionError,
    RequestError,
)
from shock.cluster.runtime.job_messages import JobStatus, JobUpdate, Submission
from shock.cluster.runtime.job_views import JobViews
from shock.cluster.runtime.messages import FetchLog, Preempt, RunLog
from shock.cluster.runtime.state import TrackedJob, launch_steps, samples_per_step
from shock.core.executor import Intake
from shock.core.model import JobSpec, batch_size_of
from shock.workloads.families import UnknownJobTypeError, parse_job_type

ADAPTATIONS = ("static", "accordion", "gns")
DEFAULT_LOG_BYTES = 1 << 20
_LOG_WAIT_S = 10.0


class JobBook(JobViews):
    def _init_book(self) -> None:
        self._arrived: list[JobSpec] = []
        self._cancelled: list[int] = []
        self._log_replies: dict[int, dict[int, RunLog]] = {}
        self._log_request_ids = itertools.count(1)

    # What the engine takes.

    def _intake_waiting(self) -> bool:
        return bool(self._arrived or self._cancelled)

    def _take_intake(self) -> Intake:
        intake = Intake(tuple(self._arrived), tuple(self._cancelled))
        self._arrived, self._cancelled = [], []
        return intake

    # Users' requests.

    def submit(self, owner: str, submission: Submission) -> int:
        """Queue a job for `owner`; its id."""
        spec = self._checked_spec(owner, submission)
        command = _command_of(submission)
        with self.lock:
            self._require_service("submitted")
            job_id = max(self.jobs, default=-1) + 1
            now = time.time()
            # Its arrival: now on the run's clock (0 until the cluster is up).
            arrival = max(0.0, now - self.t0) if self._cluster_up() else 0.0
            spec = JobSpec(
                job_id, spec.job_type, spec.total_steps, spec.scale_factor, arrival,
                spec.priority_weight, mode=spec.mode, entity=owner, elastic=spec.elastic,
            )  # fmt: skip
            self.journal.add_submitted_job(
                spec, now, None if command is None else command.to_json()
            )
            self.jobs[job_id] = TrackedJob(spec, submitted_at=now, command=command)
            self._arrived.append(spec)
            gpus = f"{spec.scale_factor} GPU(s)" if not spec.elastic else "any GPU count (elastic)"
            self._record(job_id, f"submitted by {owner}: {spec.job_type}, "
                         f"{launch_steps(spec)} steps on {gpus}; queued", "job-submitted",
                         logging.INFO, user=owner, job_type=spec.job_type,
                         steps=launch_steps(spec), gpus=spec.scale_factor)  # fmt: skip
            return job_id

    def _checked_spec(self, owner: str, request: Submission) -> JobSpec:
        command = _command_of(request)
        if command is None and not request.job_type:
            raise RequestError("a job needs a job type (--job-type) or a command (-- COMMAND)")
        job_type = request.job_type
        if command is not None:
            job_type = request.name or command.program
        if request.gpus is not None:
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
        if request.elastic and command is not None:
            raise RequestError("--elastic runs a built-in family's job (--job-type), not a command")
        if request.elastic and adaptation != "static":
            raise RequestError(f"--elastic leaves the batch size to the elastic policy: drop "
                               f"--adaptation {adaptation}")  # fmt: skip
        if adaptation != "static" and command is None and batch_size_of(job_type) is None:
            raise RequestError(
                f"--adaptation {adaptation} changes a batch size: name the job type with one, "
                f"e.g. '{request.job_type} (batch size 32)'"
            )
        with self.lock:
            per_type: dict[str, int] = {}
            for worker in self.workers.values():
                if worker.alive and worker.gpu_type:
                    per_type[worker.gpu_type] = per_type.get(worker.gpu_type, 0) + worker.gpus
        if per_type and scale > max(per_type.values()):
            have = ", ".join(f"{n} {t}" for t, n in sorted(per_type.items()))
            raise RequestError(f"the job needs {scale} GPUs of one type; the cluster has {have}")
        spec = JobSpec(-1, job_type, steps, scale, 0.0, weight, mode=adaptation, entity=owner,
                       elastic=request.elastic)  # fmt: skip
        # An elastic job of a Pollux application counts its work in samples, as Pollux's
        # traces do; people give its training steps.
        return replace(spec, total_steps=steps * samples_per_step(spec))

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
        with self.lock:
            return self._job(job_id).spec.entity or ""

    def list_jobs(self, job_ids: Sequence[int] = (), user: str = "") -> list[JobStatus]:
        """These jobs (every one when none is named), of this user only when one is named."""
        with self.lock:
            wanted = [self._job(job_id) for job_id in job_ids] or list(self.jobs.values())
            return [
                self.status(job) for job in wanted
                if not user or (job.spec.entity or "") == user
            ]  # fmt: skip

    def cancel(self, caller: str, admin: bool, job_id: int) -> JobStatus:
        with self.lock:
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
            return self.status(job)

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
                self._command(run.worker_id, Preempt(run.run_id))
        self._record(job.job_id, message, f"job-{state}",
                     logging.WARNING if state == "failed" else logging.INFO,
                     user=job.spec.entity or "", step=job.step)  # fmt: skip

    def _preempt_all(self, wait_s: float = 15.0) -> None:
        """Every live run checkpoints and stops; wait (bounded) until they said so."""
        for run in self.runs.values():
            if run.ended_at is None and not run.preempting:
                run.preempting = True
                self._command(run.worker_id, Preempt(run.run_id))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(
            run.ended_at is None and self.workers[run.worker_id].alive
            for run in self.runs.values()
            if run.worker_id in self.workers
        ):
            self.changed.wait(timeout=0.1)

    def watch(self, job_id: int, active: Callable[[], bool], history_only: bool = False
              ) -> Iterator[JobUpdate]:  # fmt: skip
        """The job's whole history from the journal (with the times it happened, also from
        before a restart), then new events, its progress and, while it waits, why; until it
        is over (`history_only`: until its history and its state now are sent)."""
        sent_seq = 0
        last: JobStatus | None = None
        waiting_noted = -1  # the round whose waiting state was last said
        while active():
            with self.lock:
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
                    self.changed.wait(timeout=1.0)
                    continue
            for row in fresh:
                yield JobUpdate(status, row.text, row.at)
            if history_only:
                yield JobUpdate(status, waiting or "", time.time())
                return
            if waiting is not None:
                yield JobUpdate(status, waiting, time.time())
            elif not fresh:
                yield JobUpdate(status, "", time.time())
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

    # Logs, fetched from the workers that ran the job.

    def job_logs(self, job_id: int, max_bytes: int = 0) -> list[RunLog]:
        """The output of each of the job's runs, oldest first, fetched from their workers."""
        max_bytes = max_bytes if max_bytes > 0 else DEFAULT_LOG_BYTES
        with self.lock:
            self._job(job_id)
            runs = [row for row in self.journal.runs() if row.job_id == job_id]
            logs: dict[int, RunLog] = {}
            waiting: dict[int, list[int]] = {}
            by_worker: dict[str, list[int]] = {}
            for row in runs:
                by_worker.setdefault(row.worker_id, []).append(row.run_id)
            for worker_id, run_ids in by_worker.items():
                slot = self.workers.get(worker_id)
                if slot is None or not slot.alive or not slot.registered:
                    for run_id in run_ids:
                        logs[run_id] = RunLog(
                            run_id, worker_id,
                            error=f"{worker_id} is not connected: its log stays on its machine",
                        )  # fmt: skip
                    continue
                request_id = next(self._log_request_ids)
                self._log_replies[request_id] = {}
                waiting[request_id] = run_ids
                self._command(worker_id, FetchLog(request_id, tuple(run_ids), max_bytes))
            deadline = time.monotonic() + _LOG_WAIT_S
            while waiting and time.monotonic() < deadline:
                for request_id in [r for r in waiting if self._log_replies[r]]:
                    logs.update(self._log_replies.pop(request_id))
                    del waiting[request_id]
                if waiting:
                    self.changed.wait(timeout=0.1)
            for request_id, run_ids in waiting.items():
                self._log_replies.pop(request_id, None)
                for run_id in run_ids:
                    logs[run_id] = RunLog(run_id, error="its worker did not answer")
            return [logs[row.run_id] for row in runs if row.run_id in logs]

    def upload_log(self, worker_id: str, request_id: int, logs: Sequence[RunLog]) -> None:
        """A worker's answer to a `FetchLog`."""
        with self.lock:
            replies = self._log_replies.get(request_id)
            if replies is not None:
                for log in logs:
                    replies[log.run_id] = replace(log, worker_id=worker_id)
                if not logs:
                    replies[-1] = RunLog(run_id=-1)  # answered, with nothing
                self.changed.notify_all()


def _command_of(request: Submission) -> JobCommand | None:
    """The submitted command, checked; None for a built-in family's job."""
    if not request.command:
        if request.workdir or request.env:
            raise RequestError("--workdir and --env go with a command: -- COMMAND ARGS...")
        return None
    if not request.command[0]:
        raise RequestError("the command is empty")
    for name, _ in request.env:
        if not name or "=" in name or "\0" in name:
            raise RequestError(f"--env {name!r}: expected NAME=VALUE with a name")
    return JobCommand(
        tuple(request.command), request.workdir, tuple(sorted(request.env)),
        max(request.steps, 0),
    )  # fmt: skip


def _same(a: JobStatus, b: JobStatus) -> bool:
    return (a.state, a.step, a.checkpoint_step, list(a.placement)) == (
        b.state, b.step, b.checkpoint_step, list(b.placement)
    )
