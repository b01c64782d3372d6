"""The Ray adapter: the runtime's commands carried out by Ray actors, their events fed back.

The runtime (`runtime/`: the journal, leases, preemption at the round's end, resume from
checkpoints, measured throughputs, batch-size changes) is the gRPC cluster's; this transport
puts Ray in place of the worker agents:

- the cluster's servers are Ray nodes' worker-type resources (`ray_nodes.py`), read from
  Ray's node table; a node that joins or dies changes the cluster;
- a launch is a placement group of one bundle per GPU of the gang (`{"v100": 1}`, a share of
  it for a packed unit; pinned to the planned nodes; STRICT_PACK on one node, PACK across
  nodes) and one actor in it (`ray_jobs.JobLeaseActor`) running the job process;
- a job's events come from polling its actor; lease, preempt and batch-size commands are
  actor calls; a run that ignores a preemption is stopped, then its actor killed;
- an actor lost with its node ends its run as lost: the job resumes elsewhere from its last
  checkpoint (checkpoints live under the state directory, which every node must share).

Commands and events cross to the actors as the runtime's own dataclasses: the driver needs
neither grpcio nor protobuf nor torch (the actors' job processes need torch to train).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import RayError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from shock.cluster.journal import WorkerRow
from shock.cluster.ray_jobs import JobLeaseActor
from shock.cluster.ray_nodes import RayWorker, workers_of_nodes
from shock.cluster.runtime.messages import (
    Command,
    Exit,
    ExtendLease,
    JobEvent,
    Launch,
    Preempt,
    SetBatchSize,
)
from shock.cluster.runtime.state import WorkerSlot

if TYPE_CHECKING:
    from shock.cluster.runtime.base import RuntimeBase

_log = logging.getLogger(__name__)

# How long an actor's `events` call waits for an event before it answers empty.
_POLL_WAIT_S = 1.0
# Seconds between reads of Ray's node table (new and dead nodes).
_NODE_CHECK_S = 0.5
# A run still alive this long after being told to preempt (at least; a round if longer)
# is stopped, then killed with its actor.
_PREEMPT_PATIENCE_S = 30.0
_STOP_GRACE_S = 10.0
_NODE_LABEL = "ray.io/node-id"


@dataclass(frozen=True, slots=True)
class RaySettings:
    job_command: tuple[str, ...]
    log_dir: Path
    checkpoint_every_s: float | None = None
    gpu_types: frozenset[str] | None = None  # None: every custom resource of whole units


@dataclass(slots=True)
class ActorLease:
    """A run's actor and placement group, and what the transport is waiting for of it."""

    actor: Any
    group: PlacementGroup
    poll: Any = None  # the outstanding `events` call
    stop_at: float | None = None  # monotonic: ask it to stop (then kill) from then on
    kill_at: float | None = None
    forced: bool = False  # stopped by the runtime, not by itself: no crash if it dies
    finished: bool = False


class RayTransport:
    """The Ray adapter (see the module's docstring)."""

    backend_name = "ray"
    runs_gangs_as_ranks = False  # a gang runs as one actor (its placement group spans nodes)
    lost_runs_are_gone = True  # an actor's job process goes with the actor

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings
        self._runtime: RuntimeBase | None = None
        self._ray_workers: dict[str, RayWorker] = {}
        self._leases: dict[int, ActorLease] = {}
        self._next_node_check = 0.0
        self._actor_class = ray.remote(JobLeaseActor)

    @property
    def runtime(self) -> RuntimeBase:
        assert self._runtime is not None, "attach() first"
        return self._runtime

    def attach(self, runtime: RuntimeBase) -> None:
        self._runtime = runtime
        now = time.time()
        # After a restart the previous driver's actors are gone with it: its open runs end
        # as lost (their jobs resume from their checkpoints).
        for run in list(runtime.runs.values()):
            if run.ended_at is None:
                runtime.close_run(run, now, "lost")
        for slot in runtime.workers.values():
            slot.registered = False  # alive only once Ray lists its node again

    # The cluster: Ray's node table.

    def poll(self, now: float) -> None:
        self._collect_events()
        if time.monotonic() >= self._next_node_check:
            self._refresh_nodes(now)
            self._next_node_check = time.monotonic() + _NODE_CHECK_S
        self._enforce_stops(now)

    def _refresh_nodes(self, now: float) -> None:
        runtime = self.runtime
        workers = {
            worker.worker_id: worker
            for worker in workers_of_nodes(ray.nodes(), self.settings.gpu_types)
        }
        known = {row.worker_id for row in runtime.journal.workers()}
        for worker_id, worker in workers.items():
            self._ray_workers[worker_id] = worker
            slot = runtime.workers.get(worker_id)
            if slot is not None and slot.registered and slot.alive:
                continue
            if worker_id in known:
                runtime.journal.set_worker_alive(worker_id)
            else:
                row = WorkerRow(worker_id, worker.node_id, worker.gpu_type, worker.gpus, 0, None)
                runtime.journal.add_worker(row, now)
            sequence = len(known) if slot is None else slot.registered_seq
            runtime.workers[worker_id] = WorkerSlot(
                worker_id, worker.gpu_type, worker.gpus, sequence, now, registered=True,
                cpus=worker.cpus, memory_gb=worker.memory_gb,
            )  # fmt: skip
            known.add(worker_id)
            runtime.changed.notify_all()
        for slot in list(runtime.workers.values()):
            if slot.alive and slot.worker_id not in workers:
                runtime.worker_lost(slot, now, "has no Ray node any more")

    # Job events: polled from the actors.

    def _collect_events(self) -> None:
        polls = {lease.poll: run_id for run_id, lease in self._leases.items() if lease.poll}
        if polls:
            ready, _ = ray.wait(list(polls), num_returns=len(polls), timeout=0)
            for ref in ready:
                self._take_events(polls[ref], ref)
        for lease in self._leases.values():
            if lease.poll is None and not lease.finished:
                lease.poll = lease.actor.events.remote(_POLL_WAIT_S)

    def _take_events(self, run_id: int, ref: Any) -> None:
        runtime = self.runtime
        lease = self._leases.get(run_id)
        if lease is None:
            return  # released while this batch was read (its node died meanwhile)
        lease.poll = None
        try:
            events, finished = ray.get(ref)
        except RayError as error:
            self._actor_lost(run_id, error)
            return
        with runtime.journal.transaction():
            for event in events:
                if lease.forced and isinstance(event.payload, Exit):
                    event = self._as_stopped(event)
                runtime.apply_event(event)
        lease.finished = finished
        run = runtime.runs.get(run_id)
        if finished and run is not None and run.ended_at is None:
            # Gone without an exit line the runtime could apply: as the worker agent's
            # reader does, a crash.
            job = runtime.jobs[run.job_id]
            reason = "killed" if lease.forced else "crashed"
            step = job.checkpoint_step if lease.forced else job.step
            runtime.apply_exit(job, run, Exit(reason=reason, step=step), time.time())
        elif finished and run_id in self._leases:
            self._release(run_id)

    def _as_stopped(self, event: JobEvent) -> JobEvent:
        """A run the runtime stopped ends as killed, not crashed (not the job's failure),
        with its progress back at its last checkpoint."""
        job = self.runtime.jobs.get(event.job_id)
        exit = event.payload
        if job is None or not isinstance(exit, Exit) or exit.reason not in ("crashed", ""):
            return event
        return replace(event, payload=replace(exit, reason="killed", step=job.checkpoint_step))

    def _actor_lost(self, run_id: int, error: RayError) -> None:
        """Its actor died (with its node, or killed): the run ends as lost and the job
        resumes from its last checkpoint."""
        runtime = self.runtime
        run = runtime.runs.get(run_id)
        self._refresh_nodes(time.time())  # a dead node's runs end with it
        if run is not None and run.ended_at is None:
            _log.warning("the actor of run %d died: %s", run_id, str(error).splitlines()[0])
            runtime.close_run(run, time.time(), "lost")
        self._release(run_id)

    # Commands: actor calls.

    def send(self, worker_id: str, command: Command) -> None:
        if isinstance(command, Launch):
            self._launch(worker_id, command)
            return
        lease = self._leases.get(command.run_id) if hasattr(command, "run_id") else None
        if lease is None:
            return  # a log request (Ray keeps no agent logs to fetch), or a run gone
        if isinstance(command, ExtendLease):
            lease.actor.lease.remote(command.seconds)
        elif isinstance(command, Preempt):
            run = self.runtime.runs.get(command.run_id)
            if run is not None and run.started_at is None:
                # Not training yet (still starting, or waiting for its GPUs): nothing to
                # checkpoint, so it is cancelled at once and its GPUs freed.
                lease.forced = True
                lease.actor.stop.remote(0.0)
                lease.kill_at = time.monotonic() + _STOP_GRACE_S
            else:
                lease.actor.preempt.remote()
                if lease.stop_at is None:
                    patience = max(self.runtime.round_length, _PREEMPT_PATIENCE_S)
                    lease.stop_at = time.monotonic() + patience
        elif isinstance(command, SetBatchSize):
            lease.actor.batch_size.remote(command.batch_size)

    def _bundles(
        self, worker_id: str, launch: Launch
    ) -> tuple[list[dict[str, float]], list[dict[str, str]]]:
        """One bundle per GPU of the gang on its planned node (a packed unit's members
        share each GPU), and the label that pins it there."""
        unit = self.runtime.planned_unit(launch.job_id)
        if unit is not None:
            owners = [o for gpu in unit.gpus if (o := self.runtime.gpu_owner(gpu)) is not None]
            share = 1.0 / max(1, len(unit.job_ids))
        else:
            owners = [(worker_id, gpu) for gpu in launch.gpus]
            share = 1.0
        bundles, labels = [], []
        for owner_id, _ in owners:
            worker = self._ray_workers[owner_id]
            bundle = {worker.gpu_type: share}
            if worker.cuda:
                bundle["GPU"] = share
            bundles.append(bundle)
            labels.append({_NODE_LABEL: worker.node_id})
        return bundles, labels

    def _launch(self, worker_id: str, launch: Launch) -> None:
        bundles, labels = self._bundles(worker_id, launch)
        nodes = {label[_NODE_LABEL] for label in labels}
        group = placement_group(
            bundles,
            strategy="STRICT_PACK" if len(nodes) == 1 else "PACK",
            name=f"shock-job-{launch.job_id}-run-{launch.run_id}",
            bundle_label_selector=labels,
        )
        first = bundles[0]
        worker = self._ray_workers[worker_id]
        actor = self._actor_class.options(
            num_cpus=0,
            num_gpus=first.get("GPU", 0),
            resources={worker.gpu_type: first[worker.gpu_type]},
            max_concurrency=4,  # lease and preempt calls while `events` waits
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=0
            ),
        ).remote(
            launch,
            list(self.settings.job_command),
            worker.cuda,
            str(self.settings.log_dir / f"job-{launch.job_id}-run-{launch.run_id}.log"),
            self.settings.checkpoint_every_s,
        )
        self._leases[launch.run_id] = ActorLease(actor, group)

    # Ending runs.

    def run_closed(self, run_id: int) -> None:
        self._release(run_id)

    def _release(self, run_id: int) -> None:
        """Kill the run's actor (its job process already exited, or is lost) and free its
        placement group's GPUs."""
        lease = self._leases.pop(run_id, None)
        if lease is None:
            return
        with contextlib.suppress(RayError):
            ray.kill(lease.actor, no_restart=True)
        with contextlib.suppress(RayError):
            remove_placement_group(lease.group)

    def _enforce_stops(self, now: float) -> None:
        """A run told to stop that has not: end its job process, then kill its actor."""
        runtime = self.runtime
        clock = time.monotonic()
        for run_id, lease in list(self._leases.items()):
            if lease.stop_at is not None and clock >= lease.stop_at and lease.kill_at is None:
                lease.forced = True
                lease.actor.stop.remote(2.0)
                lease.kill_at = clock + _STOP_GRACE_S
            elif lease.kill_at is not None and clock >= lease.kill_at:
                run = runtime.runs.get(run_id)
                if run is not None and run.ended_at is None:
                    job = runtime.jobs[run.job_id]
                    job.step = job.checkpoint_step  # what it did since is lost with it
                    runtime.journal.set_progress(job.job_id, job.step)
                    runtime.journal.set_run_step(run.run_id, job.step)
                    runtime.close_run(run, now, "killed", wait_for_lease=False)
                self._release(run_id)

    def stop(self) -> None:
        """Every actor stops its job (a checkpoint), bounded; then every actor is killed."""
        stops = []
        for lease in self._leases.values():
            try:
                stops.append(lease.actor.stop.remote(_STOP_GRACE_S))
            except RayError:
                continue
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=_STOP_GRACE_S + 5.0)
        for run_id in list(self._leases):
            self._release(run_id)
