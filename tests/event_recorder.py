"""An observer plugin for tests: every event it sees, in order, and each round's plan."""

from __future__ import annotations

from shock.core.events import RoundStarted
from shock.core.hookspecs import hookimpl

Assignments = tuple[tuple[tuple[int, ...], str, tuple[int, ...]], ...]


class EventRecorder:
    def __init__(self) -> None:
        self.kinds: list[str] = []  # event class names, in order
        self.rounds: list[Assignments] = []  # each round's (job ids, worker type, GPUs)

    def _add(self, event: object) -> None:
        self.kinds.append(type(event).__name__)

    @hookimpl
    def run_started(self, event: object) -> None:
        self._add(event)

    @hookimpl
    def job_arrived(self, event: object) -> None:
        self._add(event)

    @hookimpl
    def allocation_computed(self, event: object) -> None:
        self._add(event)

    @hookimpl
    def round_started(self, event: RoundStarted) -> None:
        self.rounds.append(tuple(sorted(event.assignments)))
        self._add(event)

    @hookimpl
    def round_ended(self, event: object) -> None:
        self._add(event)

    @hookimpl
    def job_finished(self, event: object) -> None:
        self._add(event)

    @hookimpl
    def run_finished(self, event: object) -> None:
        self._add(event)
