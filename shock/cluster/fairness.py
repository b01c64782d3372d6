"""Fairness a service's operator and users see: each job's finish-time fairness ρ and each
user's share of GPU time over a window beside their weighted fair share.

ρ is the definition of docs/metrics.md: time since submission over the job's time alone on
the fastest GPU type for the work it did, times max(1, N/G), with N the time-averaged number
of jobs in the system (queued or running) since its submission and G the GPUs. While the job
runs, this is ρ so far; when it ends, the value is fixed (it is journaled once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# A job's stay in the system: (submitted, ended or now), unix times.
Lifetime = tuple[float, float]


def average_jobs_in_system(lifetimes: Iterable[Lifetime], start: float, end: float) -> float:
    """The time-averaged number of jobs whose lifetimes overlap [start, end] (at least 1:
    the job itself)."""
    if end <= start:
        return 1.0
    overlap = sum(max(0.0, min(stop, end) - max(begin, start)) for begin, stop in lifetimes)
    return max(1.0, overlap / (end - start))


def finish_time_rho(elapsed_s: float, steps: float, steps_per_s: float, jobs_in_system: float,
                    gpus: int) -> float:  # fmt: skip
    """ρ for `steps` done in `elapsed_s` (0.0 before any progress or without a rate)."""
    if steps <= 0 or steps_per_s <= 0:
        return 0.0
    alone_s = steps / steps_per_s
    return elapsed_s / (alone_s * max(1.0, jobs_in_system / max(gpus, 1)))


@dataclass(frozen=True, slots=True)
class WindowShare:
    """A user's use of GPU time over a window, beside their fair share of it."""

    seconds: float  # the window's length
    gpu_seconds: float  # the GPU-seconds their jobs held
    share: float  # of all users' GPU-seconds in the window
    fair_share: float  # their weighted fair share, time-averaged over the window


@dataclass(frozen=True, slots=True)
class UserShare:
    """One user's shares: of the GPUs now, and of the GPU time over two windows."""

    user: str
    weight: float
    gpus: int  # held now
    share: float  # of all GPUs, now
    fair_share: float  # weight over the weights of the users with jobs queued or running
    recent: WindowShare  # the last hour (or the window asked for)
    since_start: WindowShare  # since the service started


def weighted_fair_share(user: str, weights: Mapping[str, float], active: Iterable[str]) -> float:
    active = set(active)
    if user not in active:
        return 0.0
    return weights.get(user, 1.0) / sum(weights.get(name, 1.0) for name in active)


def average_fair_shares(
    weights: Mapping[str, float],
    lifetimes: Iterable[tuple[str, Lifetime]],
    start: float,
    end: float,
) -> dict[str, float]:
    """Each user's weighted fair share, averaged over the parts of [start, end] in which
    some user had a job in the system (a user with work owes nobody idle time)."""
    # A sweep over the lifetimes' starts and ends, counting each user's jobs in the system.
    changes: list[tuple[float, int, str]] = []
    for user, (begin, stop) in lifetimes:
        begin, stop = max(begin, start), min(stop, end)
        if stop > begin:
            changes += [(begin, 1, user), (stop, -1, user)]
    changes.sort()
    jobs: dict[str, int] = {}
    totals: dict[str, float] = {}
    busy_s = 0.0
    previous = start
    for at, change, user in changes:
        if at > previous and jobs:
            busy_s += at - previous
            weight_sum = sum(weights.get(name, 1.0) for name in jobs)
            for name in jobs:
                totals[name] = totals.get(name, 0.0) + (at - previous) * (
                    weights.get(name, 1.0) / weight_sum
                )
        previous = max(previous, at)
        jobs[user] = jobs.get(user, 0) + change
        if jobs[user] == 0:
            del jobs[user]
    return {user: value / busy_s for user, value in totals.items()} if busy_s else {}
