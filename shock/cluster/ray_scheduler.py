"""The Ray backend's executor: the engine's round plans carried out as Ray actors.

It is the gRPC cluster's scheduler (`scheduler.py`: the journal, leases, preemption at the
round's end, resume from checkpoints, measured throughputs, batch-size changes) with Ray in
place of the worker agents:

- the cluster's servers are Ray nodes' worker-type resources (`ray_nodes.py`), read from
  Ray's node table; a node that joins or dies changes the cluster;
- a launch is a placement group of one bundle per GPU of the gang (`{"v100": 1}`, a share of
  it for a packed unit; pinned to the planned nodes; STRICT_PACK on one node, PACK across
  nodes) and one actor in it (`ray_jobs.JobLeaseActor`) running the job process;
- a job's events come from polling its actor; lease, preempt and batch-size commands are
  actor calls; a run that ignores a preemption is stopped, then its actor killed;
- an actor lost with its node ends its run as lost: the job resumes elsewhere from its last
  checkpoint (checkpoints live under the state directory, which every node must share).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from shock.cluster.journal import WorkerRow
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.ray_jobs import JobLeaseActor
from shock.cluster.ray_nodes import RayWorker, workers_of_nodes
from shock.cluster.scheduler import ClusterScheduler, Run, SchedulerSettings, WorkerSlot
from shock.core.executor import PlannedUnit
from shock.core.run import RunRequest

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
    """A run's actor and placement group, and what the scheduler is waiting for of it."""

    actor: Any
    group: PlacementGroup
    poll: Any = None  # the outstanding `events` call
    stop_at: float | None = None  # monotonic: ask it to stop (then kill) from then on
    kill_at: float | None = None
    forced: bool = False  # stopped by the scheduler, not by itself: no crash if it dies
    finished: bool = False


class RayScheduler(ClusterScheduler):
    """The Ray executor (see the module's docstring)."""

    backend_name = "ray"
    runs_gangs_as_ranks = False  # a gang runs as one actor (its placement group spans nodes)

    def __init__(
        self, request: RunRequest, settings: SchedulerSettings, ray_settings: RaySettings
    ) -> None:
        super().__init__(request, settings)
        self.ray_settings = ray_settings
        self._ray_workers: dict[str, RayWorker] = {}
        self._leases: dict[int, ActorLease] = {}
        self._next_node_check = 0.0
        self._actor_class = ray.remote(JobLeaseActor)
        now = time.time()
        # After a restart the previous driver's actors are gone with it: its open runs end
        # as lost (their jobs resume from their checkpoints).
        for run in list(self.runs.values()):
            if run.ended_at is None:
                self._close_run(run, now, "lost")
        for slot in self.workers.values():
            slot.registered = False  # alive only once Ray lists its node again

    # The cluster: Ray's node table.

    def _check_workers(self, now: float) -> None:
        self._collect_events()
        if time.monotonic() >= self._next_node_check:
            self._refresh_nodes(now)
            self._next_node_check = time.monotonic() + _NODE_CHECK_S
        self._enforce_stops(now)

    def _refresh_nodes(self, now: float) -> None:
        workers = {
            worker.worker_id: worker
            for worker in workers_of_nodes(ray.nodes(), self.ray_settings.gpu_types)
        }
        known = {row.worker_id for row in self.journal.workers()}
        for worker_id, worker in workers.items():
            self._ray_workers[worker_id] = worker
            slot = self.workers.get(worker_id)
            if slot is not None and slot.registered and slot.alive:
                continue
            if worker_id in known:
                self.journal.set_worker_alive(worker_id)
            else:
                row = WorkerRow(worker_id, worker.node_id, worker.gpu_type, worker.gpus, 0, None)
                self.journal.add_worker(row, now)
            sequence = len(known) if slot is None else slot.registered_seq
            self.workers[worker_id] = WorkerSlot(
                worker_id, worker.gpu_type, worker.gpus, sequence, now, registered=True,
                cpus=worker.cpus, memory_gb=worker.memory_gb,
            )  # fmt: skip
            known.add(worker_id)
            self._changed.notify_all()
        for slot in self.workers.values():
            if slot.alive and slot.worker_id not in workers:
                _log.warning("Ray node of %s is gone: its jobs resume elsewhere", slot.worker_id)
                slot.alive = False
                self.journal.set_worker_dead(slot.worker_id, now)
                for run in list(self.runs.values()):
                    if run.worker_id == slot.worker_id and run.ended_at is None:
                        self._close_run(run, now, "lost")

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
        lease = self._leases.get(run_id)
        if lease is None:
            return  # released while this batch was read (its node died meanwhile)
        lease.poll = None
        try:
            raw_events, finished = ray.get(ref)
        except RayError as error:
            self._actor_lost(run_id, error)
            return
        with self.journal.transaction():
            for raw in raw_events:
                event = pb.JobEvent.FromString(raw)
                if lease.forced and event.WhichOneof("event") == "exit":
                    self._as_stopped(event)
                self._apply_event(event)
        lease.finished = finished
        run = self.runs.get(run_id)
        if finished and run is not None and run.ended_at is None:
            # Gone without an exit line the scheduler could apply: as the worker agent's
            # reader does, a crash.
            job = self.jobs[run.job_id]
            reason = "killed" if lease.forced else "crashed"
            step = job.checkpoint_step if lease.forced else job.step
            self._apply_exit(job, run, pb.Exit(reason=reason, step=step), time.time())
        elif finished and run_id in self._leases:
            self._release(run_id)

    def _as_stopped(self, event: pb.JobEvent) -> None:
        """A run the scheduler stopped ends as killed, not crashed (not the job's failure),
        with its progress back at its last checkpoint."""
        job = self.jobs.get(event.job_id)
        if job is not None and event.exit.reason in ("crashed", ""):
            event.exit.reason = "killed"
            event.exit.step = job.checkpoint_step

    def _actor_lost(self, run_id: int, error: RayError) -> None:
        """Its actor died (with its node, or killed): the run ends as lost and the job
        resumes from its last checkpoint."""
        run = self.runs.get(run_id)
        self._refresh_nodes(time.time())  # a dead node's runs end with it
        if run is not None and run.ended_at is None:
            _log.warning("the actor of run %d died: %s", run_id, str(error).splitlines()[0])
            self._close_run(run, time.time(), "lost")
        self._release(run_id)

    # Commands: actor calls.

    def _command(self, worker_id: str, command: pb.Command) -> None:
        kind = command.WhichOneof("command")
        if kind == "launch":
            self._launch(worker_id, command.launch)
            return
        run_id = getattr(command, str(kind)).run_id
        lease = self._leases.get(run_id)
        if lease is None:
            return
        if kind == "lease":
            lease.actor.lease.remote(command.lease.seconds)
        elif kind == "preempt":
            run = self.runs.get(run_id)
            if run is not None and run.started_at is None:
                # Not training yet (still starting, or waiting for its GPUs): nothing to
                # checkpoint, so it is cancelled at once and its GPUs freed.
                lease.forced = True
                lease.actor.stop.remote(0.0)
                lease.kill_at = time.monotonic() + _STOP_GRACE_S
            else:
                lease.actor.preempt.remote()
                if lease.stop_at is None:
                    patience = max(self.round_length, _PREEMPT_PATIENCE_S)
                    lease.stop_at = time.monotonic() + patience
        elif kind == "batch_size":
            lease.actor.batch_size.remote(command.batch_size.batch_size)

    def _unit_of(self, job_id: int) -> PlannedUnit | None:
        return next((unit for unit in self._units if job_id in unit.job_ids), None)

    def _bundles(
        self, worker_id: str, launch: pb.Launch
    ) -> tuple[list[dict[str, float]], list[dict[str, str]]]:
        """One bundle per GPU of the gang on its planned node (a packed unit's members
        share each GPU), and the label that pins it there."""
        unit = self._unit_of(launch.job_id)
        if unit is not None:
            owners = [self._gpu_owner[gpu] for gpu in unit.gpus if gpu in self._gpu_owner]
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

    def _launch(self, worker_id: str, launch: pb.Launch) -> None:
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
            launch.SerializeToString(),
            list(self.ray_settings.job_command),
            worker.cuda,
            str(self.ray_settings.log_dir / f"job-{launch.job_id}-run-{launch.run_id}.log"),
            self.ray_settings.checkpoint_every_s,
        )
        self._leases[launch.run_id] = ActorLease(actor, group)

    # Ending runs.

    def _close_run(self, run: Run, now: float, reason: str, wait_for_lease: bool = True) -> None:
        # An actor's job process goes with the actor: a lost run can be relaunched at once.
        super()._close_run(run, now, reason, wait_for_lease=False)
        self._release(run.run_id)

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
        clock = time.monotonic()
        for run_id, lease in list(self._leases.items()):
            if lease.stop_at is not None and clock >= lease.stop_at and lease.kill_at is None:
                lease.forced = True
                lease.actor.stop.remote(2.0)
                lease.kill_at = clock + _STOP_GRACE_S
            elif lease.kill_at is not None and clock >= lease.kill_at:
                run = self.runs.get(run_id)
                if run is not None and run.ended_at is None:
                    job = self.jobs[run.job_id]
                    job.step = job.checkpoint_step  # what it did since is lost with it
                    self.journal.set_progress(job.job_id, job.step)
                    self.journal.set_run_step(run.run_id, job.step)
                    super()._close_run(run, now, "killed", wait_for_lease=False)
                self._release(run_id)

    def stop(self) -> None:
        """Every actor stops its job (a checkpoint), bounded; then every actor is killed."""
        with self._lock:
            self.done = True
            self._changed.notify_all()
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
