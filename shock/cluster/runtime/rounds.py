"""A round as the runtime carries it out: leases extended or runs preempted, jobs launched on
their planned GPUs as those free up, and the round's report of measured progress.

`_launch_job` is the one place a job starts: a planned placement of N members becomes N
runs (one process per GPU for a gang) resuming from the job's checkpoint. A job relaunched at
another GPU count goes through it with its new placement.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence

from shock.cluster.launch import launch_grant
from shock.cluster.names import placement_text
from shock.cluster.runtime.base import RuntimeBase
from shock.cluster.runtime.messages import ExtendLease, Launch, Preempt
from shock.cluster.runtime.state import (
    HARNESS_ADAPTATIONS,
    Placement,
    Run,
    TrackedJob,
    launch_steps,
    samples_per_step,
)
from shock.core.executor import (
    MeasuredRate,
    PlannedUnit,
    RoundPlan,
    RoundReport,
    StrayProgress,
    UnitProgress,
)

# Where a gang's rank 0 listens for its peers: a port drawn from this range, below the
# usual ephemeral ports. A port taken by something else fails the gang's start: it is
# relaunched from its checkpoint on another draw.
RENDEZVOUS_PORTS = range(20000, 30000)


class Rounds(RuntimeBase):
    def allocation(self) -> tuple[int, dict[int, Placement]]:
        """The current round and where its plan puts each job: (worker, its GPUs) for each
        worker the job's gang spans."""
        with self.lock:
            return self._round_index, dict(self._plan)

    def _round_over(self, now: float) -> bool:
        if now >= self._round_end or self._live_signature() != self._cluster_signature:
            return True  # also early when a worker joined or died: plan for the new cluster
        # Early end, as in the simulator: every job of the round has finished its work (or
        # was cancelled).
        return all(self.jobs[job_id].over for job_id in self._plan)

    def _begin_round(self, plan: RoundPlan, now: float) -> None:
        self._units = plan.units
        self._round_index = plan.index
        self._round_start = now
        self._round_end = now + (plan.end_s - plan.start_s)
        self._plan = {}
        self._round_runs = {}
        for unit in plan.units:
            owners = [self._gpu_owner.get(g) for g in unit.gpus]
            if any(owner is None for owner in owners):
                continue  # planned on a cluster that has changed since: it does not run
            placement = self._placement([owner for owner in owners if owner is not None])
            for job_id in unit.job_ids:
                self._plan[job_id] = placement
        self.journal.add_round(plan.index, now, [
            self._round_entry(unit.job_ids, target)
            for unit in plan.units
            for target in (self._plan.get(unit.job_ids[0]),)
            if target is not None
        ])  # fmt: skip
        lease_until = self._round_end + self.grace_s
        placements = self._live_placements()
        for run in list(self.runs.values()):
            if run.ended_at is not None:
                continue
            target = self._plan.get(run.job_id)
            if target == placements.get(run.job_id) and not run.preempting:
                run.lease_until = lease_until
                self.journal.set_run_lease(run.run_id, lease_until)
                if run.rank == 0:
                    self._round_runs.setdefault(run.job_id, []).append(run.run_id)
                self._command(run.worker_id, ExtendLease(run.run_id, lease_until - now))
            elif not run.preempting:
                run.preempting = True
                self._command(run.worker_id, Preempt(run.run_id))
                if run.rank == 0:
                    moved = "moves it" if run.job_id in self._plan else "gives its GPUs to others"
                    self._record(run.job_id, f"preempted: round {plan.index} {moved}",
                                 "job-preempted", logging.INFO, run=run.run_id)  # fmt: skip
        # Batch sizes the engine's adaptation model wants of jobs that run on.
        for order in plan.batch_size_orders:
            job = self.jobs.get(order.job_id)
            if job is not None and job.run_id is not None:
                run = self.runs[job.run_id]
                if not run.preempting and run.world_size == 1:  # a gang trains static
                    self._order_batch_size(run, order.batch_size)

    def _dispatch(self, now: float) -> None:
        """Launch every planned job that is not running, once its GPUs are free."""
        unit_of = {job_id: unit for unit in self._units for job_id in unit.job_ids}
        live_jobs = {run.job_id for run in self.runs.values() if run.ended_at is None}
        for job_id, placement in self._plan.items():
            job = self.jobs[job_id]
            slots = [self.workers.get(worker_id) for worker_id, _ in placement]
            if (
                job.over
                or job.run_id is not None
                or job_id in live_jobs  # a gang's other ranks are still stopping
                or now < job.not_before
                or any(slot is None or not slot.alive for slot in slots)
                or now >= self._round_end
            ):
                continue
            busy = any(
                run.ended_at is None
                and run.worker_id == worker_id
                and set(run.gpus) & set(gpus)
                and self._plan.get(run.job_id) != placement
                for worker_id, gpus in placement
                for run in self.runs.values()
            )
            if busy:
                continue
            self._launch_job(job, placement, unit_of.get(job_id), now)

    def _launch_job(
        self, job: TrackedJob, placement: Placement, unit: PlannedUnit | None, now: float
    ) -> None:
        """One run per member of the placement: a gang's ranks meet at rank 0's worker."""
        job_id, spec = job.job_id, job.spec
        lease_until = self._round_end + self.grace_s
        directory = self.checkpoint_root / f"job-{job_id}"
        directory.mkdir(parents=True, exist_ok=True)
        # Modes the harness does not carry out run static; the engine orders their sizes.
        adaptation = spec.mode if spec.mode in HARNESS_ADAPTATIONS else "static"
        world_size = len(placement)
        master_addr, master_port = "", 0
        if world_size > 1:
            adaptation = "static"  # a gang's batch size stays the job's
            lead = self.workers[placement[0][0]]
            master_addr = lead.rendezvous_host or lead.hostname
            master_port = random.choice(RENDEZVOUS_PORTS)
        lead_run_id = 0
        local_ranks: dict[str, int] = {}
        for rank, (worker_id, gpus) in enumerate(placement):
            run_id = self.journal.add_run(job_id, worker_id, gpus, now, lease_until, job.step)
            lead_run_id = lead_run_id or run_id
            self.runs[run_id] = Run(
                run_id, job_id, worker_id, gpus, now, lease_until,
                rank=rank, world_size=world_size, lead_run_id=lead_run_id,
            )  # fmt: skip
            local_rank = local_ranks.get(worker_id, 0)
            local_ranks[worker_id] = local_rank + 1
            grant = launch_grant(unit, unit.gpus[rank] if unit and world_size > 1 else None)
            command = job.command
            launch = Launch(
                run_id=run_id, job_id=job_id, job_type=spec.job_type,
                target_steps=launch_steps(spec) if command is None else command.steps,
                checkpoint_dir=str(directory), gpus=gpus,
                lease_s=lease_until - now, seed=self.request.config.seed + job_id,
                adaptation=(
                    adaptation if command is None
                    else spec.mode if world_size == 1 else "static"
                ),
                cpus=grant.get("cpus", 0.0), memory_gb=grant.get("memory_gb", 0.0),
                command=() if command is None else command.argv,
                workdir="" if command is None else command.workdir,
                env=() if command is None else tuple(command.env),
                rank=rank, world_size=world_size, local_rank=local_rank,
                master_addr=master_addr, master_port=master_port,
            )  # fmt: skip
            self._command(worker_id, launch)
        job.run_id = lead_run_id
        self._round_runs.setdefault(job_id, []).append(lead_run_id)
        self._record(job_id, f"launched as run {lead_run_id} on {placement_text(placement)} "
                     f"from step {job.step} (round {self._round_index})", "job-launched",
                     logging.INFO, run=lead_run_id, user=spec.entity or "")  # fmt: skip

    @staticmethod
    def _round_entry(job_ids: Sequence[int], placement: Placement) -> dict[str, object]:
        """A unit's journal entry: its lead's worker and GPUs, and a gang's every rank."""
        entry: dict[str, object] = {
            "jobs": list(job_ids), "worker": placement[0][0], "gpus": list(placement[0][1])
        }
        if len(placement) > 1:
            entry["ranks"] = [[worker_id, list(gpus)] for worker_id, gpus in placement]
        return entry

    def _placement(self, owners: Sequence[tuple[str, int]]) -> Placement:
        """Where a unit's GPUs (their owners, in the unit's order) run its job."""
        if self.transport.runs_gangs_as_ranks and len(owners) > 1:
            return tuple((worker_id, (local,)) for worker_id, local in owners)
        worker_id = owners[0][0]
        return ((worker_id, tuple(local for owner, local in owners if owner == worker_id)),)

    def _live_placements(self) -> dict[int, Placement]:
        """Where each job runs now: its live runs, in rank order, when its gang is whole."""
        live: dict[int, list[Run]] = {}
        for run in self.runs.values():
            if run.ended_at is None:
                live.setdefault(run.job_id, []).append(run)
        return {
            job_id: tuple((run.worker_id, run.gpus) for run in sorted(runs, key=lambda r: r.rank))
            for job_id, runs in live.items()
            if len(runs) == runs[0].world_size
        }

    def _credit_target(self, job: TrackedJob) -> float:
        """The job's progress in the engine's units: steps, or samples for a job that
        counts its work in samples (its share of the steps it trains for)."""
        total = job.target_steps
        if samples_per_step(job.spec) > 1:
            if job.completed_at is not None:
                return float(job.spec.total_steps)
            done = job.spec.total_steps * min(job.step, total) / total
            return float(min(done, job.spec.total_steps - 1))
        if job.completed_at is not None:
            return float(total)
        return float(min(job.step, total - 1))

    def _report(self, now: float) -> RoundReport:
        """Each planned unit's measured steps and run time; progress of jobs outside the
        round (late exits, lost runs); rates and batch sizes reported since the last one."""
        units = []
        planned: set[int] = set()
        for unit in self._units:
            exec_s = max(self._exec_seconds(job_id, now) for job_id in unit.job_ids)
            steps = []
            stopped = []
            for job_id in unit.job_ids:
                steps.append(self._take_progress(self.jobs[job_id]))
                stopped.append(self._stopped_s(self.jobs[job_id], now))
                planned.add(job_id)
            units.append(UnitProgress(tuple(steps), tuple(stopped), exec_s))
        stray = [
            StrayProgress(job.job_id, self._take_progress(job), self._stopped_s(job, now))
            for job in self.jobs.values()
            if job.job_id not in planned and self._credit_target(job) != job.credited
        ]
        worker_types = {w.gpu_type for w in self.workers.values()}
        rates = tuple(
            MeasuredRate(job_type, scale, worker_type, value)
            for (job_type, scale, worker_type), value in self._new_rates.items()
            if worker_type in worker_types
        )
        report = RoundReport(
            now - self.t0, tuple(units), tuple(stray), rates,
            tuple(self._new_batch_sizes.values()),
        )  # fmt: skip
        self._new_rates = {}
        self._new_batch_sizes = {}
        self._units = ()
        return report

    def _take_progress(self, job: TrackedJob) -> float:
        target = self._credit_target(job)
        steps = target - job.credited
        job.credited = target
        return steps

    def _stopped_s(self, job: TrackedJob, now: float) -> float:
        return (job.completed_at if job.completed_at is not None else now) - self.t0

    def _exec_seconds(self, job_id: int, now: float) -> float:
        """The seconds the job held its GPUs this round: from the round's start (its first
        run of the round; a (re)start's switch-over, process start and restore are its
        own overhead, as the simulator charges them) until its runs ended."""
        total = 0.0
        for index, run_id in enumerate(self._round_runs.get(job_id, [])):
            run = self.runs[run_id]
            begin = self._round_start if index == 0 else max(run.launched_at, self._round_start)
            end = min(run.ended_at if run.ended_at is not None else now, now)
            total += max(0.0, end - begin)
        return min(total, now - self._round_start)


    # What a transport may ask about the round.

    def planned_unit(self, job_id: int) -> PlannedUnit | None:
        """The unit of this round's plan the job belongs to, if any."""
        return next((unit for unit in self._units if job_id in unit.job_ids), None)

    def gpu_owner(self, gpu: int) -> tuple[str, int] | None:
        """The worker and its local index of one of the cluster's global GPUs."""
        return self._gpu_owner.get(gpu)
