"""What the runtime does with a run's events: progress, checkpoints, batch sizes, exits."""

from __future__ import annotations

import logging
import time

from shock.cluster.journal import ThroughputRow
from shock.cluster.names import placement_text
from shock.cluster.runtime.base import RuntimeBase
from shock.cluster.runtime.messages import (
    BatchSizeRequest,
    Checkpoint,
    Exit,
    JobEvent,
    Preempt,
    Progress,
    SetBatchSize,
    Started,
)
from shock.cluster.runtime.state import Run, TrackedJob
from shock.core.executor import BatchSizeChange
from shock.core.model import batch_size_of
from shock.engine.epochs import job_type_with_batch_size


class JobEvents(RuntimeBase):
    def apply_event(self, event: JobEvent) -> None:
        """One event of a run (under the lock, inside a journal transaction)."""
        run = self.runs.get(event.run_id)
        if run is not None and run.rank > 0:
            self._apply_member_event(run, event)
            return
        job = self.jobs.get(event.job_id)
        if job is None or job.completed_at is not None:
            return  # completions are final: resent events of a finished job change nothing
        self._note_event(job, run, event)
        payload = event.payload
        now = time.time()
        if isinstance(payload, Exit):
            self.apply_exit(job, run, payload, now)
            return
        if run is None or run.ended_at is not None:
            return  # a late message from a run that already ended
        journal = self.journal
        if isinstance(payload, Started):
            run.started_at = now
            if job.started_at is None:
                job.started_at = now
                journal.set_job_started(job.job_id, now)
            job.step = payload.resumed_from_step
            journal.set_run_started(run.run_id, job.step, now)
            journal.set_progress(job.job_id, job.step)
        elif isinstance(payload, Progress):
            job.step = payload.step
            journal.set_run_step(run.run_id, job.step)
            journal.set_progress(job.job_id, job.step)
            current = batch_size_of(job.job_type)  # None: a type named without one (A3C)
            if current is not None and payload.batch_size not in (0, current):
                self._change_batch_size(job, payload.batch_size, payload.target_steps)
            elif job.command is not None and payload.target_steps not in (0, job.target_steps):
                self._change_target(job, payload.target_steps)
            if payload.steps_per_s > 0:
                self._observe_throughput(job, run, payload.steps_per_s)
        elif isinstance(payload, Checkpoint):
            job.checkpoint_step = payload.step
            journal.set_checkpoint(job.job_id, job.checkpoint_step, payload.path)
        elif isinstance(payload, BatchSizeRequest) and self.settings.approve_batch_size_changes:
            self._order_batch_size(run, payload.batch_size)

    def _note_event(self, job: TrackedJob, run: Run | None, event: JobEvent) -> None:
        payload = event.payload
        if isinstance(payload, Started) and run is not None:
            self._record(job.job_id, f"run {run.run_id} started on "
                         f"{placement_text(self._gang_parts(run))} at step "
                         f"{payload.resumed_from_step}", "run-started")  # fmt: skip
        elif isinstance(payload, Checkpoint):
            self._record(job.job_id, f"checkpoint at step {payload.step}", "job-checkpoint")
        elif isinstance(payload, Exit):
            waiting = "" if payload.reason in ("done", "") else "; queued until it runs again"
            self._record(job.job_id, f"run {event.run_id} ended ({payload.reason}) at step "
                         f"{payload.step}{waiting}", "run-ended")  # fmt: skip

    def _apply_member_event(self, run: Run, event: JobEvent) -> None:
        """A gang's rank other than 0: only when it started and how it ended count (the
        lead reports the gang's progress and checkpoints)."""
        if run.ended_at is not None:
            return
        payload = event.payload
        now = time.time()
        if isinstance(payload, Started):
            run.started_at = now
            self.journal.set_run_started(run.run_id, payload.resumed_from_step, now)
        elif isinstance(payload, Exit):
            self.journal.set_run_step(run.run_id, payload.step)
            self.close_run(run, now, payload.reason or "exited", wait_for_lease=False)

    def _order_batch_size(self, run: Run, batch_size: int) -> None:
        self.journal.set_batch_size(run.job_id, batch_size)
        self._command(run.worker_id, SetBatchSize(run.run_id, batch_size))

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

    def _observe_throughput(self, job: TrackedJob, run: Run, steps_per_s: float) -> None:
        worker_type = self.workers[run.worker_id].gpu_type
        job_type, scale = job.job_type, job.spec.scale_factor  # keyed by the current batch size
        value = self.estimates.observe(job_type, scale, worker_type, steps_per_s)
        samples = self.estimates.reports(job_type, scale, worker_type)
        self.journal.set_throughput(ThroughputRow(job_type, scale, worker_type, value, samples))
        self._new_rates[(job_type, scale, worker_type)] = value

    def apply_exit(self, job: TrackedJob, run: Run | None, exit: Exit, now: float) -> None:
        """How a run ended: a completion (final), a failure (counted), or a stop."""
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
                self.changed.notify_all()  # the round may be over
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
            self.close_run(run, now, exit.reason or "exited", wait_for_lease=False)

    def close_run(self, run: Run, now: float, reason: str, wait_for_lease: bool = True) -> None:
        """The run ends in the books. `wait_for_lease`: a lost run's process may still be
        running (a partitioned worker) until its lease ends, so its job waits that long."""
        if self.transport.lost_runs_are_gone:
            wait_for_lease = False
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
                    self._command(other.worker_id, Preempt(other.run_id))
        if reason == "lost" and run.rank > 0:
            if wait_for_lease:
                job.not_before = max(job.not_before, run.lease_until)
        elif reason == "lost":
            job.step = job.checkpoint_step
            self.journal.set_progress(job.job_id, job.step)
            if wait_for_lease:
                job.not_before = max(job.not_before, run.lease_until)
        self.transport.run_closed(run.run_id)
