"""How long a service's rounds and the policy's decisions take, for `/metrics`.

The decision time is the wall-clock time from one round's report (or the end of a wait with
nothing to run) until the engine hands the scheduler the next round's plan: the policy (and
its solver) decides in between.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RoundTimes:
    rounds: int = 0
    round_seconds_total: float = 0.0
    last_round_s: float = 0.0
    decisions: int = 0
    decision_seconds_total: float = 0.0
    last_decision_s: float = 0.0
    _reported_at: float | None = None
    _started_at: float | None = None

    def round_started(self, at: float) -> None:
        if self._reported_at is not None:
            self.last_decision_s = max(0.0, at - self._reported_at)
            self.decisions += 1
            self.decision_seconds_total += self.last_decision_s
        self._started_at = at

    def waited(self, until: float) -> None:
        """The engine had nothing to run until `until`: that wait is no decision time."""
        if self._reported_at is not None:
            self._reported_at = max(self._reported_at, until)

    def round_reported(self, at: float) -> None:
        if self._started_at is not None:
            self.last_round_s = max(0.0, at - self._started_at)
            self.rounds += 1
            self.round_seconds_total += self.last_round_s
        self._reported_at, self._started_at = at, None
