"""A rich progress bar as an observer plugin (registered by the CLI when it runs).

It shows jobs done out of the run's total and the simulated (or cluster) time, on stderr, and
only for a run that lasts: it appears once the run has taken `SHOW_AFTER_S` seconds, so a
quick simulation prints nothing but its results.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from shock.core.events import JobArrived, JobFinished, RoundEnded, RunFinished, RunStarted
from shock.core.hookspecs import hookimpl

SHOW_AFTER_S = 2.0
# The simulated time shown moves at most this often (a simulation has rounds by the thousand).
_UPDATE_EVERY_S = 0.1


def interactive(*streams: TextIO) -> bool:
    """Whether every stream is a terminal (a bar is noise in a pipe or a log file)."""
    return all(getattr(stream, "isatty", lambda: False)() for stream in streams)


def wants_progress(quiet: bool, json_to_stdout: bool = False) -> bool:
    """A bar only for a person watching: not with --quiet, not when the output goes to a
    pipe or file, not when stdout carries the results document."""
    return not quiet and not json_to_stdout and interactive(sys.stdout, sys.stderr)


class ProgressObserver:
    """Shows jobs completed and simulated time; never changes a decision."""

    def __init__(self, console: Console, show_after_s: float = SHOW_AFTER_S) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs · time {task.fields[sim_hours]:,.2f} h"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None
        self._show_after_s = show_after_s
        self._started_at = 0.0
        self._shown = False
        self._sim_time = 0.0
        self._updated_at = 0.0
        self._window: tuple[int, int] | None = None  # only these jobs count towards the total

    @property
    def shown(self) -> bool:
        return self._shown

    @hookimpl
    def run_started(self, event: RunStarted) -> None:
        self._window = event.window
        self._started_at = time.monotonic()
        self._task = self._progress.add_task(
            f"{event.policy} on {event.backend}", total=event.total_jobs, sim_hours=0.0
        )

    @hookimpl
    def job_arrived(self, event: JobArrived) -> None:
        self._sim_time = event.time
        self._maybe_show()

    @hookimpl
    def job_finished(self, event: JobFinished) -> None:
        window = self._window
        counted = window is None or window[0] <= event.job_id < window[1]
        if self._task is not None and counted:
            self._progress.advance(self._task)
        self._sim_time = event.time
        self._maybe_show()

    @hookimpl
    def round_ended(self, event: RoundEnded) -> None:
        self._sim_time = event.time
        self._maybe_show()

    @hookimpl
    def run_finished(self, event: RunFinished) -> None:
        if self._shown:
            self._progress.stop()

    def _maybe_show(self) -> None:
        """Start the live bar once the run has lasted; then keep its time current (rich
        redraws it on its own thread, so this is cheap)."""
        if self._task is None:
            return
        if not self._shown:
            if time.monotonic() - self._started_at < self._show_after_s:
                return
            self._shown = True
            self._progress.start()
        now = time.monotonic()
        if now - self._updated_at >= _UPDATE_EVERY_S:
            self._updated_at = now
            self._progress.update(self._task, sim_hours=self._sim_time / 3600)


# Plain progress lines: one each time this share more of the jobs has finished.
LINE_EVERY = 0.1


def wants_progress_lines(quiet: bool, json_to_stdout: bool = False) -> bool:
    """Plain lines on stderr where there is no bar: a log file, a pipe, a batch job."""
    return not quiet and not wants_progress(quiet, json_to_stdout)


class ProgressLines:
    """Progress for a log: a line on the stream per 10% of the jobs done, once the run has
    lasted `show_after_s` (a quick run prints nothing); never changes a decision."""

    def __init__(self, stream: TextIO, show_after_s: float = SHOW_AFTER_S) -> None:
        self._stream = stream
        self._show_after_s = show_after_s
        self._started_at = 0.0
        self._label = "run"
        self._total = 0
        self._done = 0
        self._next_share = LINE_EVERY
        self._window: tuple[int, int] | None = None
        self.lines = 0

    @hookimpl
    def run_started(self, event: RunStarted) -> None:
        self._started_at = time.monotonic()
        self._label = f"{event.policy} on {event.backend}"
        self._total = event.total_jobs
        self._window = event.window

    @hookimpl
    def job_finished(self, event: JobFinished) -> None:
        window = self._window
        if window is not None and not window[0] <= event.job_id < window[1]:
            return
        self._done += 1
        if self._total <= 0 or self._done / self._total < self._next_share - 1e-9:
            return
        share = self._done / self._total
        # Every step passed, so the next line comes at the next 10% however jobs bunch up.
        while self._next_share <= share + 1e-9:
            self._next_share += LINE_EVERY
        elapsed = time.monotonic() - self._started_at
        if elapsed < self._show_after_s:
            return
        self._stream.write(
            f"{self._label}: {self._done}/{self._total} jobs done ({share:.0%}), simulated "
            f"{event.time / 3600:,.2f} h, {elapsed:,.0f} s elapsed\n"
        )
        self._stream.flush()
        self.lines += 1
