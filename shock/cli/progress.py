"""A rich progress bar as an observer plugin (registered by the CLI when it runs)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from shock.core.events import JobFinished, RoundEnded, RunFinished, RunStarted
from shock.core.hookspecs import hookimpl


class ProgressObserver:
    """Shows jobs completed and simulated time; never changes a decision."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs · sim time {task.fields[sim_hours]:,.1f} h"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None
        self._rounds = 0

    @hookimpl
    def run_started(self, event: RunStarted) -> None:
        self._progress.start()
        self._task = self._progress.add_task(
            f"{event.policy} on {event.backend}", total=event.total_jobs, sim_hours=0.0
        )

    @hookimpl
    def job_finished(self, event: JobFinished) -> None:
        if self._task is not None:
            self._progress.advance(self._task)

    @hookimpl
    def round_ended(self, event: RoundEnded) -> None:
        self._rounds += 1
        if self._task is not None and self._rounds % 50 == 0:
            self._progress.update(self._task, sim_hours=event.time / 3600)

    @hookimpl
    def run_finished(self, event: RunFinished) -> None:
        self._progress.stop()
