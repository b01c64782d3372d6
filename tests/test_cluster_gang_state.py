"""The gRPC executor's gangs, driven directly (no server, no processes): a unit on GPUs of two
workers launches one rank on each with the same rendezvous, rank 0's events are the job's,
and a rank's end stops the rest of its gang before the job is relaunched."""

from __future__ import annotations

import itertools
from pathlib import Path

from test_cluster_state import RESNET_32, _scheduler, _start_round

from shock.cluster.runtime.messages import (
    Checkpoint,
    Command,
    EventPayload,
    Exit,
    JobEvent,
    Launch,
    Preempt,
    Progress,
    Started,
    WorkerHello,
)
from shock.cluster.runtime.rounds import RENDEZVOUS_PORTS
from shock.cluster.runtime.runtime import Runtime
from shock.core.executor import PlannedUnit, RoundPlan


class GangWorker:
    """One 1-GPU worker that says where its jobs are reached."""

    def __init__(self, scheduler: Runtime, host: str) -> None:
        self.scheduler = scheduler
        welcome = scheduler.register(WorkerHello(
            worker_id="", hostname=f"{host}.name", gpu_type="v100", gpus=1,
            rendezvous_host=host,
        ))  # fmt: skip
        self.worker_id = welcome.worker_id
        self._seq = itertools.count(1)

    def report(self, run_id: int, payload: EventPayload) -> None:
        message = JobEvent(payload, next(self._seq), run_id, 0)
        self.scheduler.report_events(self.worker_id, [message])

    def commands(self) -> list[Command]:
        slot = self.scheduler.workers[self.worker_id]
        commands, slot.commands = slot.commands, []
        return commands


def _gang_plan() -> RoundPlan:
    unit = PlannedUnit((0,), (RESNET_32,), "v100", (0, 1), (40.0,), (1000,), 0.0, False)
    return RoundPlan(1, 0.0, 5.0, (unit,))


def _launches(worker: GangWorker) -> list[Launch]:
    return [c for c in worker.commands() if isinstance(c, Launch)]


def test_a_unit_across_two_workers_runs_as_a_gang_of_two_ranks(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, [(RESNET_32, 1000)])
    first, second = GangWorker(scheduler, "10.0.0.1"), GangWorker(scheduler, "10.0.0.2")
    scheduler.start(scheduler.request, scheduler.request.trace.jobs)
    _start_round(scheduler, _gang_plan())
    (lead,), (other,) = _launches(first), _launches(second)
    assert (lead.rank, other.rank) == (0, 1)
    assert lead.world_size == other.world_size == 2
    assert lead.local_rank == other.local_rank == 0  # one rank on each worker
    assert lead.master_addr == other.master_addr == "10.0.0.1"  # rank 0's worker
    assert lead.master_port == other.master_port and lead.master_port in RENDEZVOUS_PORTS
    assert lead.run_id != other.run_id and list(lead.gpus) == list(other.gpus) == [0]
    # Rank 0's events are the job's; rank 1 only starts and ends.
    first.report(lead.run_id, Started(step=0))
    second.report(other.run_id, Started(step=0))
    first.report(lead.run_id, Progress(step=40, steps_per_s=8.0, batch_size=32))
    second.report(other.run_id, Progress(step=999, steps_per_s=1.0))
    first.report(lead.run_id, Checkpoint(step=40, path="ckpt-40.pt"))
    job = scheduler.jobs[0]
    assert (job.step, job.checkpoint_step) == (40, 40)
    assert scheduler.estimates.estimate(RESNET_32, 1, "v100") == 8.0  # the lead's rate
    # A rank that crashes stops its gang: rank 0 is told to stop, and nothing is
    # relaunched while it runs.
    second.report(other.run_id, Exit(reason="crashed", step=41))
    (stop,) = first.commands()
    assert stop == Preempt(lead.run_id)
    _start_round(scheduler, _gang_plan())
    assert _launches(first) == [] and _launches(second) == []
    first.report(lead.run_id, Exit(reason="error", step=41))
    assert (job.failures, job.step) == (1, 40)  # one failure of the gang, back to its checkpoint
    with scheduler.lock:
        scheduler._dispatch(scheduler._round_start)
    (lead_again,), (other_again,) = _launches(first), _launches(second)
    assert (lead_again.rank, other_again.rank) == (0, 1)
    assert lead_again.master_port == other_again.master_port
    ranks = scheduler.journal.runs()
    assert [(run.worker_id, run.end_reason) for run in ranks] == [
        (first.worker_id, "error"), (second.worker_id, "crashed"),
        (first.worker_id, None), (second.worker_id, None),
    ]  # fmt: skip
    scheduler.journal.close()
