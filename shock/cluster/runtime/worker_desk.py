"""The workers' side of the runtime: registration, heartbeats, event reports, lease renewals,
workers lost; and the cluster the live workers make for the engine."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence

from shock.cluster.journal import WorkerRow
from shock.cluster.oplog import log_event
from shock.cluster.runtime.base import RuntimeBase
from shock.cluster.runtime.errors import PreconditionError, RequestError
from shock.cluster.runtime.messages import (
    JobEvent,
    LiveRun,
    Orders,
    Preempt,
    Welcome,
    WorkerHello,
)
from shock.cluster.runtime.state import WorkerSlot
from shock.core.model import Cluster, Server

_WORKER_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class WorkerDesk(RuntimeBase):
    def register(self, hello: WorkerHello) -> Welcome:
        if not _WORKER_TYPE.fullmatch(hello.gpu_type):
            raise RequestError(f"gpu_type must be a name such as v100, got {hello.gpu_type!r}")
        if hello.gpus < 1:
            raise RequestError("a worker must declare at least one device")
        with self.lock:
            now = time.time()
            slot = self.workers.get(hello.worker_id) if hello.worker_id else None
            if slot is None and hello.worker_id:
                known = {w.worker_id: w for w in self.journal.workers()}
                row = known.get(hello.worker_id)
                if row is not None:  # declared dead before; it is back
                    slot = WorkerSlot(row.worker_id, row.gpu_type, row.gpus, len(known), now,
                                      acked_seq=row.acked_seq)  # fmt: skip
            for other in self.workers.values():
                if (
                    other is not slot
                    and other.alive
                    and other.gpu_type == hello.gpu_type
                    and other.gpus != hello.gpus
                ):
                    reason = (f"workers of type {hello.gpu_type} have {other.gpus} GPUs each; "
                              f"this one declares {hello.gpus}")  # fmt: skip
                    log_event("worker-refused", f"refused worker on {hello.hostname}: {reason}",
                              logging.WARNING, host=hello.hostname, reason=reason)  # fmt: skip
                    raise PreconditionError(reason)
            if slot is None:
                worker_id = f"worker-{len(self.journal.workers()) + 1}"
                slot = WorkerSlot(worker_id, hello.gpu_type, hello.gpus, len(self.workers), now)
                self.journal.add_worker(
                    WorkerRow(worker_id, hello.hostname, hello.gpu_type, slot.gpus, 0, None),
                    now,
                )
            self.workers[slot.worker_id] = slot
            slot.registered = True
            slot.alive = True
            slot.cpus = max(hello.cpus, 0.0)
            slot.memory_gb = max(hello.memory_gb, 0.0)
            slot.hostname = hello.hostname
            slot.rendezvous_host = hello.rendezvous_host or hello.hostname
            slot.last_seen = now
            slot.commands = []
            self.journal.set_worker_alive(slot.worker_id)
            log_event("worker-joined", f"{slot.worker_id} joined from {hello.hostname}: "
                      f"{slot.gpus} {slot.gpu_type} GPUs", worker=slot.worker_id,
                      host=hello.hostname, gpu_type=slot.gpu_type, gpus=slot.gpus)  # fmt: skip
            self._reconcile(slot, hello.live_runs, now)
            self.changed.notify_all()
            return Welcome(slot.worker_id, self.settings.heartbeat_s, self.incarnation)

    def _reconcile(self, slot: WorkerSlot, live: Sequence[LiveRun], now: float) -> None:
        """Keep the runs the worker still has that we expect; stop the ones we do not; end
        the ones it no longer has."""
        reported = {run.run_id for run in live}
        for run_id in reported:
            run = self.runs.get(run_id)
            if run is None or run.ended_at is not None or run.worker_id != slot.worker_id:
                slot.commands.append(Preempt(run_id))
        for run in list(self.runs.values()):
            if run.worker_id == slot.worker_id and run.run_id not in reported:
                # The worker says it is not running: safe to relaunch at once.
                self.close_run(run, now, "lost", wait_for_lease=False)

    def heartbeat(self, worker_id: str, live_runs: Sequence[LiveRun], wait_s: float) -> Orders:
        """A polling worker is alive; it gets its queued commands, waiting up to `wait_s`
        (at most a heartbeat period) for one."""
        with self.lock:
            slot = self.workers.get(worker_id)
            if slot is None or not slot.registered or not slot.alive:
                return Orders(reregister=True)
            slot.last_seen = time.time()
            self._close_unlaunched(slot, {run.run_id for run in live_runs})
            wait_s = min(max(wait_s, 0.0), self.settings.heartbeat_s)
            if not slot.commands and not self.done:
                self.changed.wait_for(lambda: bool(slot.commands) or self.done, timeout=wait_s)
            commands, slot.commands = slot.commands, []
            slot.last_seen = time.time()
            if self.done:
                slot.told_shutdown = True
                self.changed.notify_all()
            return Orders(tuple(commands), shutdown=self.done)

    def _close_unlaunched(self, slot: WorkerSlot, live: set[int]) -> None:
        """A run the worker never started (its launch command was lost with a reply) and
        still does not list long after its launch is closed, so its job can go on."""
        now = time.time()
        patience = max(self.settings.dead_after_s, 3 * self.settings.heartbeat_s)
        for run in list(self.runs.values()):
            if (
                run.worker_id == slot.worker_id
                and run.ended_at is None
                and run.started_at is None
                and run.run_id not in live
                and now - run.launched_at > patience
            ):
                self.close_run(run, now, "lost", wait_for_lease=False)

    def report_events(self, worker_id: str, events: Sequence[JobEvent]) -> int:
        """Apply a worker's events once each (by sequence number); the highest applied."""
        with self.lock:
            slot = self.workers.get(worker_id)
            if slot is None:
                known = {w.worker_id: w.acked_seq for w in self.journal.workers()}
                if worker_id not in known:
                    raise PreconditionError(f"unknown worker {worker_id!r}: register first")
                slot = WorkerSlot(worker_id, "", 0, -1, time.time(),
                                  alive=False, acked_seq=known[worker_id])  # fmt: skip
            acked = slot.acked_seq
            with self.journal.transaction():
                for event in sorted(events, key=lambda e: e.seq):
                    if event.seq <= acked:
                        continue  # already applied: a resend
                    self.apply_event(event)
                    acked = event.seq
                self.journal.set_acked_seq(slot.worker_id, acked)
            slot.acked_seq = acked
            self.changed.notify_all()
            return acked

    def renew_lease(self, run_id: int) -> float | None:
        """Seconds the run's lease now lasts, or None: it may not go on."""
        with self.lock:
            run = self.runs.get(run_id)
            now = time.time()
            if (
                run is None
                or run.ended_at is not None
                or run.preempting
                or self._plan.get(run.job_id) != self._live_placements().get(run.job_id)
            ):
                return None
            run.lease_until = max(run.lease_until, self._round_end + self.grace_s)
            self.journal.set_run_lease(run.run_id, run.lease_until)
            return run.lease_until - now

    def worker_lost(self, slot: WorkerSlot, now: float, why: str) -> None:
        """The worker is gone (silent too long, its node died): its runs end as lost."""
        slot.alive = False
        self.journal.set_worker_dead(slot.worker_id, now)
        log_event("worker-lost", f"{slot.worker_id} ({slot.hostname}) {why}: lost; its jobs "
                  "resume elsewhere", logging.WARNING, worker=slot.worker_id,
                  host=slot.hostname)  # fmt: skip
        for run in list(self.runs.values()):
            if run.worker_id == slot.worker_id and run.ended_at is None:
                self.close_run(run, now, "lost")

    def _take_cluster(self) -> Cluster:
        """The cluster of the live workers, one server per worker; global GPU ids follow
        `Cluster.servers()` (by type, then registration order)."""
        alive = sorted(
            (w for w in self.workers.values() if w.registered and w.alive),
            key=lambda w: (w.gpu_type, w.registered_seq, w.worker_id),
        )
        gpus_per_type: dict[str, int] = {}
        per_server: dict[str, int] = {}
        for slot in alive:
            gpus_per_type[slot.gpu_type] = gpus_per_type.get(slot.gpu_type, 0) + slot.gpus
            per_server[slot.gpu_type] = slot.gpus
        self._gpu_owner = {}
        next_gpu = 0
        for slot in alive:
            for local in range(slot.gpus):
                self._gpu_owner[next_gpu] = (slot.worker_id, local)
                next_gpu += 1
        self._cluster_signature = self._live_signature()
        if not alive or any(s.cpus <= 0 or s.memory_gb <= 0 for s in alive):
            return Cluster(gpus_per_type, per_server)
        # Every worker said what it offers: resource-aware placements grant from that.
        servers = tuple(
            Server(index, slot.gpu_type, slot.gpus, slot.cpus, slot.memory_gb)
            for index, slot in enumerate(alive)
        )
        return Cluster(gpus_per_type, per_server, explicit_servers=servers)
