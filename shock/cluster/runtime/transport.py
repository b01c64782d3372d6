"""How the runtime reaches its workers: a small protocol each adapter implements.

The runtime decides and keeps the books; a transport carries its commands to workers and
feeds what they report back into it (`Runtime.worker_joined`, `apply_events`,
`worker_lost`, ...). The gRPC adapter's workers poll (`PolledTransport`: commands wait in a
queue for the worker's next heartbeat, liveness is the heartbeats themselves); the Ray
adapter calls actors (`shock/cluster/ray_transport.py`). Every method is called under the
runtime's lock.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from shock.cluster.runtime.messages import Command

if TYPE_CHECKING:
    from shock.cluster.runtime.runtime import Runtime


class Transport(Protocol):
    # The results' backend name.
    backend_name: str
    # A job on several GPUs runs as one process per GPU (a gang of ranks); False: as one
    # process holding all its GPUs.
    runs_gangs_as_ranks: bool
    # A lost run's process is gone with it (no lease to wait out before a relaunch).
    lost_runs_are_gone: bool

    def attach(self, runtime: Runtime) -> None:
        """Bind to the runtime once its journal is loaded (before the engine starts)."""

    def send(self, worker_id: str, command: Command) -> None:
        """Carry one command to a worker."""

    def poll(self, now: float) -> None:
        """Each pass of the runtime's wait: take in reports, notice workers come and go."""

    def run_closed(self, run_id: int) -> None:
        """A run ended in the runtime's books: free whatever the transport holds for it."""

    def stop(self) -> None:
        """The run is over: stop the workers' jobs (bounded)."""


class PolledTransport:
    """Workers that poll: a command waits on its worker's queue until the worker's next
    heartbeat (`Runtime.heartbeat`) takes it; a worker silent for `dead_after_s` is lost."""

    backend_name = "grpc"
    runs_gangs_as_ranks = True
    lost_runs_are_gone = False

    def __init__(self) -> None:
        self._runtime: Runtime | None = None

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None, "attach() first"
        return self._runtime

    def attach(self, runtime: Runtime) -> None:
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
