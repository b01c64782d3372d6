"""Where a cluster run's time went, read back from its journal: one row per job run.

For the fidelity comparison with the simulator (benchmarks/fidelity.py, docs/cluster.md):
the simulator charges a (re)started job a fixed overhead at the start of its round and then
runs it at its table rate. The journal says what the cluster really did, so each run's
*lost time* is measured the same way: the seconds from the start of the round it was
launched in until it stopped training, minus the seconds its steps take at the measured
rate. That covers everything between a round's start and steady training: waiting for the
GPUs' previous job to checkpoint and exit, command delivery, process start and imports,
model build, checkpoint restore, the slow first steps, and for a completion the final
checkpoint and exit.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TypeVar

from shock.cluster.journal import Journal, RunRow

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class RunTiming:
    run_id: int
    job_id: int
    job_type: str
    round_start: float  # the start of the round the run was launched in
    dispatch_wait_s: float  # round start -> launch command (GPUs still held by their last job)
    startup_s: float | None  # launch -> "started" (process start, imports, model, restore)
    active_s: float  # round start -> the run stopped training (preempted, lease out, done)
    steps: int
    lost_s: float  # active_s minus the steps' time at the measured rate
    relaunched_on_kept_gpus: bool  # planned on the same GPUs as last round, yet relaunched
    completed: bool


@dataclass(frozen=True, slots=True)
class Round:
    start: float
    # job id -> (worker, GPUs on it)
    placement: Mapping[int, tuple[str, tuple[int, ...]]]


def read_rounds(journal: Journal) -> list[Round]:
    rounds = []
    for _, start, assignments in journal.rounds():
        placement: dict[int, tuple[str, tuple[int, ...]]] = {}
        for entry in assignments:
            where = (str(entry["worker"]), tuple(int(g) for g in entry["gpus"]))  # type: ignore[attr-defined]
            for job_id in entry["jobs"]:  # type: ignore[attr-defined]
                placement[int(job_id)] = where
        rounds.append(Round(start, placement))
    return rounds


def run_timings(state_dir: Path, steps_per_s: Mapping[str, float]) -> list[RunTiming]:
    """Every finished run of the journal under `state_dir`, with `steps_per_s` the measured
    rate of each job type (a type missing from it gets no lost time: NaN)."""
    journal = Journal(state_dir)
    try:
        rounds = read_rounds(journal)
        runs = [r for r in journal.runs() if r.ended_at is not None]
        job_types = {row.spec.job_id: row.spec.job_type for row in journal.jobs()}
        completions = {row.spec.job_id: row.completed_at for row in journal.jobs()}
    finally:
        journal.close()
    starts = [r.start for r in rounds]
    return [
        _timing(run, rounds, starts, job_types[run.job_id], completions[run.job_id], steps_per_s)
        for run in runs
    ]


def _timing(
    run: RunRow,
    rounds: list[Round],
    starts: list[float],
    job_type: str,
    completed_at: float | None,
    steps_per_s: Mapping[str, float],
) -> RunTiming:
    assert run.ended_at is not None
    index = max(bisect_right(starts, run.launched_at) - 1, 0)
    round_start = starts[index] if starts else run.launched_at
    where = (run.worker_id, run.gpus)
    completed = run.end_reason == "done" and completed_at is not None
    # It trained until the first later round that did not plan it on the same GPUs (the
    # scheduler preempted it then), or until it ended, whichever came first.
    stopped = run.ended_at
    for later in rounds[index + 1 :]:
        if later.start >= run.ended_at:
            break
        if later.placement.get(run.job_id) != where:
            stopped = later.start
            break
    kept = index > 0 and rounds[index - 1].placement.get(run.job_id) == where
    steps = run.last_step - (
        run.resumed_from_step if run.resumed_from_step is not None else run.start_step
    )
    active = stopped - round_start
    rate = steps_per_s.get(job_type, 0.0)
    lost = active - steps / rate if rate > 0 else float("nan")
    return RunTiming(
        run.run_id, run.job_id, job_type, round_start, run.launched_at - round_start,
        None if run.started_at is None else run.started_at - run.launched_at,
        active, steps, lost, kept and run.start_step > 0, completed,
    )  # fmt: skip


def average_rates(timings: list[RunTiming]) -> dict[str, float]:
    """Steps/s of each job type over the whole run: its runs' steps over their seconds from
    "started" until they stopped training. Unlike the scheduler's EWMA (which follows the
    latest reports, e.g. a job running alone at the end), the rate the run really had."""
    return average_rates_by(timings, lambda timing: timing.job_type)


def average_rates_by(
    timings: list[RunTiming], key: Callable[[RunTiming], K]
) -> dict[K, float]:
    """`average_rates` grouped by `key` (a job type, a job id, ...)."""
    steps: dict[K, float] = {}
    seconds: dict[K, float] = {}
    for timing in timings:
        if timing.startup_s is None:
            continue
        trained = timing.active_s - timing.dispatch_wait_s - timing.startup_s
        if trained > 0:
            group = key(timing)
            steps[group] = steps.get(group, 0.0) + timing.steps
            seconds[group] = seconds.get(group, 0.0) + trained
    return {group: steps[group] / seconds[group] for group in steps}


@dataclass(frozen=True, slots=True)
class SteadyRate:
    steps_per_s: float  # once warmed up
    warmup_s: float  # seconds per launch lost to the slow first steps after "started"


def steady_rates(timings: list[RunTiming]) -> dict[str, SteadyRate]:
    """Per job type, a least-squares line through its runs: seconds trained (from "started"
    until the run stopped training) = steps / steady rate + warm-up. Unlike `average_rates`,
    which spreads the slow first steps over all the time trained (so a job relaunched often
    looks slower than its family), this charges them per launch, as a start overhead. A type
    with fewer than two distinct run lengths, or whose fit gives a warm-up below zero, keeps
    its average rate and no warm-up."""
    points: dict[str, list[tuple[float, float]]] = {}
    for timing in timings:
        if timing.startup_s is None:
            continue
        trained = timing.active_s - timing.dispatch_wait_s - timing.startup_s
        if trained > 0 and timing.steps > 0:
            points.setdefault(timing.job_type, []).append((float(timing.steps), trained))
    result = {}
    for job_type, runs in points.items():
        average = sum(steps for steps, _ in runs) / sum(seconds for _, seconds in runs)
        result[job_type] = SteadyRate(average, 0.0)
        if len({steps for steps, _ in runs}) < 2:
            continue
        slope, intercept = statistics.linear_regression(
            [steps for steps, _ in runs], [seconds for _, seconds in runs]
        )
        if slope > 0 and intercept >= 0:
            result[job_type] = SteadyRate(1.0 / slope, intercept)
    return result


def start_overheads(timings: list[RunTiming]) -> dict[str, float]:
    """The median seconds from a round's start until a (re)launched job of each type said
    "started": the simulator's per-type start overhead (with `average_rates`, which puts
    the slow first steps in the rate). The median, so that one run slowed by a noisy
    neighbour does not set it."""
    by_type: dict[str, list[float]] = {}
    for timing in timings:
        if timing.startup_s is not None:
            by_type.setdefault(timing.job_type, []).append(
                timing.dispatch_wait_s + timing.startup_s
            )
    return {job_type: statistics.median(values) for job_type, values in by_type.items()}


def round_lengths(state_dir: Path) -> list[float]:
    """The seconds between consecutive round starts (the last round has no end here)."""
    journal = Journal(state_dir)
    try:
        starts = [start for _, start, _ in journal.rounds()]
    finally:
        journal.close()
    return [b - a for a, b in pairwise(starts)]
