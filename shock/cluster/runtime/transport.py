"""The transport of workers that poll (the gRPC adapter's): commands wait in a queue for
the worker's next heartbeat, and liveness is the heartbeats themselves."""

from __future__ import annotations

import time

from shock.cluster.runtime.base import RuntimeBase, Transport
from shock.cluster.runtime.messages import Command

__all__ = ["PolledTransport", "Transport"]


class PolledTransport:
    """Workers that poll: a command waits on its worker's queue until the worker's next
    heartbeat (`Runtime.heartbeat`) takes it; a worker silent for `dead_after_s` is lost."""

    backend_name = "grpc"
    runs_gangs_as_ranks = True
    lost_runs_are_gone = False

    def __init__(self) -> None:
        self._runtime: RuntimeBase | None = None

    @property
    def runtime(self) -> RuntimeBase:
        assert self._runtime is not None, "attach() first"
        return self._runtime

    def attach(self, runtime: RuntimeBase) -> None:
        self._runtime = runtime

    def send(self, worker_id: str, command: Command) -> None:
        slot = self.runtime.workers.get(worker_id)
        if slot is not None:
            slot.commands.append(command)
            self.runtime.changed.notify_all()

    def poll(self, now: float) -> None:
        runtime = self.runtime
        for slot in runtime.workers.values():
            if slot.alive and now - slot.last_seen > runtime.settings.dead_after_s:
                runtime.worker_lost(slot, now, f"silent for {now - slot.last_seen:.0f} s")

    def run_closed(self, run_id: int) -> None:
        return  # the worker ends its own process when its lease runs out or it is told

    def stop(self) -> None:
        """Wait (bounded) until every live worker heard "shutdown" on a heartbeat."""
        runtime = self.runtime
        deadline = time.monotonic() + 3 * runtime.settings.heartbeat_s + 1.0
        while time.monotonic() < deadline:
            waiting = [w for w in runtime.workers.values()
                       if w.registered and w.alive and not w.told_shutdown]  # fmt: skip
            if not waiting:
                return
            runtime.changed.wait(timeout=0.1)
