"""What the dashboard shows, read from a live scheduler: one consistent snapshot taken under
the scheduler's lock, and a bounded in-memory time series of utilisation and queue length."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from shock.cluster.runtime.runtime import Runtime

ACTIVE_STATES = ("queued", "running")
TIMELINE_SAMPLES = 1800  # one every 2 s: the last hour
ENDED_SHOWN = 100  # jobs that ended, newest first; every queued and running job is shown


@dataclass(frozen=True, slots=True)
class Sample:
    time_unix: float
    gpus_total: int
    gpus_busy: int
    queued: int
    running: int


def take_snapshot(scheduler: Runtime) -> dict[str, Any]:
    """Workers and their GPUs, jobs, the current allocation and each user's share, as JSON."""
    round_index, plan = scheduler.allocation()
    with scheduler.lock:  # one consistent view; the scheduler's lock is re-entrant
        statuses = [scheduler.status(job) for job in scheduler.jobs.values()]
        slots = sorted(scheduler.workers.values(), key=lambda slot: slot.registered_seq)
        workers: list[dict[str, Any]] = [
            {"id": slot.worker_id, "hostname": slot.hostname, "gpu_type": slot.gpu_type,
             "gpus": slot.gpus, "alive": slot.alive}
            for slot in slots
        ]  # fmt: skip
    jobs: list[dict[str, Any]] = []
    held: dict[tuple[str, int], int] = {}  # (worker, GPU) -> the job running there
    for status in statuses:
        gpus = [
            {"worker": place.worker_id, "gpus": list(place.gpus)} for place in status.placement
        ]
        for place in status.placement:
            for gpu in place.gpus:
                held[(place.worker_id, gpu)] = status.job_id
        target = status.target_steps
        jobs.append({
            "id": status.job_id, "user": status.user, "state": status.state,
            "job_type": status.job_type, "scale_factor": status.scale_factor,
            "step": status.step, "target_steps": target,
            "progress": min(1.0, status.step / target) if target > 0 else 0.0,
            "gpus": gpus, "queued_s": status.queued_s, "message": status.message,
            "weight": status.weight, "submitted_at_unix": status.submitted_at_unix,
        })  # fmt: skip
    jobs.sort(key=lambda job: job["id"])
    ended = [job for job in jobs if job["state"] not in ACTIVE_STATES]
    shown = {job["id"] for job in ended[-ENDED_SHOWN:]}
    for worker in workers:
        worker["gpu_jobs"] = [held.get((worker["id"], gpu)) for gpu in range(worker["gpus"])]
    total = sum(worker["gpus"] for worker in workers if worker["alive"])
    # One row per worker a job's gang spans (a gang may train across workers).
    allocation = [
        {"job_id": job_id, "worker": worker_id, "gpus": list(gpus)}
        for job_id, placement in sorted(plan.items())
        for worker_id, gpus in placement
    ]
    return {
        "time_unix": time.time(),
        "round": round_index,
        "workers": workers,
        "jobs": [job for job in jobs if job["state"] in ACTIVE_STATES or job["id"] in shown],
        "allocation": allocation,
        "shares": user_shares(scheduler),
        "totals": {
            "gpus": total,
            "gpus_busy": sum(1 for worker, _ in held if _alive(workers, worker)),
            "queued": sum(1 for job in jobs if job["state"] == "queued"),
            "running": sum(1 for job in jobs if job["state"] == "running"),
            "jobs": len(jobs),
        },
    }


def _alive(workers: list[dict[str, Any]], worker_id: str) -> bool:
    return any(worker["id"] == worker_id and worker["alive"] for worker in workers)


def user_shares(scheduler: Runtime) -> list[dict[str, Any]]:
    """Each user's share of the GPUs now and of the GPU time over the last hour and since
    the start, beside their weighted fair shares (`Runtime.user_shares`)."""
    return [asdict(share) for share in scheduler.user_shares()]


class Timeline:
    """Samples of utilisation and queue length, the newest `limit` kept."""

    def __init__(self, limit: int = TIMELINE_SAMPLES) -> None:
        self._samples: deque[Sample] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def add(self, snapshot: dict[str, Any]) -> Sample:
        totals = snapshot["totals"]
        sample = Sample(snapshot["time_unix"], totals["gpus"], totals["gpus_busy"],
                        totals["queued"], totals["running"])  # fmt: skip
        with self._lock:
            self._samples.append(sample)
        return sample

    def samples(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(sample) for sample in self._samples]
