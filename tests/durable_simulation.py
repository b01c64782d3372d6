"""FOR TESTS: the simulator made durable, to crash a run and resume it from its saved state."""

from __future__ import annotations

import json
from typing import Any

from shock.core.executor import ExecutorCapabilities, RoundPlan, RoundReport
from shock.core.model import Cluster, JobSpec
from shock.core.run import RunRequest
from shock.plugins.backends.simulator import SimulatedExecutor


class Crash(Exception):
    pass


class DurableSimulation(SimulatedExecutor):
    """The simulator, made durable: it keeps every saved state, can crash after a number of
    rounds, and can resume from a saved state (its clock at the state's time)."""

    capabilities = ExecutorCapabilities(simulates_jobs=True, durable=True)

    def __init__(self, crash_after: int | None = None, resume: dict[str, Any] | None = None):
        super().__init__()
        self.saved: list[dict[str, Any]] = []
        self.crash_after = crash_after
        self.resume = resume
        self.rounds_run = 0

    def start(self, request: RunRequest, jobs: tuple[JobSpec, ...]) -> Cluster:
        cluster = super().start(request, jobs)
        if self.resume is not None:
            self.now = float(self.resume["time_s"])
        return cluster

    def run_round(self, plan: RoundPlan) -> RoundReport:
        if self.crash_after is not None and self.rounds_run == self.crash_after:
            raise Crash
        self.rounds_run += 1
        return super().run_round(plan)

    def save_state(self, state: dict[str, Any]) -> None:
        self.saved.append(json.loads(json.dumps(state)))  # as a journal would keep it

    def load_state(self) -> dict[str, Any] | None:
        return self.resume
