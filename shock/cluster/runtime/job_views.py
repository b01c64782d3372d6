"""What people see of jobs and users: a job's status, its finish-time fairness (rho), and
each user's share of the GPUs beside their fair share."""

from __future__ import annotations

import time

from shock.cluster.fairness import (
    Lifetime,
    UserShare,
    WindowShare,
    average_fair_shares,
    average_jobs_in_system,
    finish_time_rho,
    weighted_fair_share,
)
from shock.cluster.runtime.base import RuntimeBase
from shock.cluster.runtime.errors import RequestError
from shock.cluster.runtime.job_messages import JobPlacement, JobStatus
from shock.cluster.runtime.state import TrackedJob

DEFAULT_SHARE_WINDOW_S = 3600.0  # users' shares of GPU time: the last hour


class JobViews(RuntimeBase):
    def _state(self, job: TrackedJob) -> str:
        if job.completed_at is not None:
            return "done"
        if job.ended_state is not None:
            return job.ended_state
        if job.run_id is not None:
            return "running"  # launched: it holds its GPUs
        return "queued"

    def status(self, job: TrackedJob) -> JobStatus:
        """What its owner sees of the job now (under the lock)."""
        now = time.time()
        spec = job.spec
        submitted = self._submitted_at(job)
        ended = job.completed_at if job.completed_at is not None else job.ended_at
        started = job.started_at
        queued = (started if started is not None else (ended or now)) - submitted
        placement: list[JobPlacement] = []
        state = self._state(job)
        if state == "running" and job.run_id is not None:
            for worker_id, gpus in _merged(self._gang_parts(self.runs[job.run_id])):
                slot = self.workers.get(worker_id)
                placement.append(
                    JobPlacement(worker_id, slot.hostname if slot else "", tuple(gpus))
                )
        return JobStatus(
            job_id=job.job_id, user=spec.entity or "", state=state, job_type=job.job_type,
            scale_factor=spec.scale_factor, step=job.step, target_steps=job.target_steps,
            checkpoint_step=job.checkpoint_step, placement=tuple(placement),
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
        with self.lock:
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

    def _cluster_up(self) -> bool:
        return self.t0_fixed


def _merged(parts: list[tuple[str, tuple[int, ...]]]) -> list[tuple[str, tuple[int, ...]]]:
    """One entry per worker, its GPUs in rank order."""
    merged: dict[str, tuple[int, ...]] = {}
    for worker_id, gpus in parts:
        merged[worker_id] = merged.get(worker_id, ()) + tuple(gpus)
    return list(merged.items())
