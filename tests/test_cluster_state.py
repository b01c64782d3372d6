"""The gRPC executor's state, driven directly (no server, no processes, no engine): what a
round's report carries (measured steps, smoothed rates, batch-size switches), and what a
restarted scheduler gets back from its journal."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path

from cluster_procs import write_trace

from shock.cluster.journal import Journal
from shock.cluster.runtime.messages import (
    EventPayload,
    Exit,
    JobEvent,
    Launch,
    Progress,
    SetBatchSize,
    Started,
    WorkerHello,
)
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.runtime.state import RuntimeSettings
from shock.core.executor import (
    BatchSizeChange,
    BatchSizeOrder,
    MeasuredRate,
    PlannedUnit,
    RoundPlan,
    RoundReport,
)
from shock.core.resource_placement import GrantPart, ResourceGrant
from shock.engine.runner import RunOptions, build_request

RESNET_32 = "ResNet-18 (batch size 32)"
RESNET_64 = "ResNet-18 (batch size 64)"


class DrivenWorker:
    """Plays one worker against a scheduler: registration and job events with sequence
    numbers; rounds are started and ended by the test."""

    def __init__(self, scheduler: Runtime, worker_id: str = "", **offers: float) -> None:
        self.scheduler = scheduler
        welcome = scheduler.register(WorkerHello(
            worker_id=worker_id, hostname="", gpu_type="v100", gpus=1, **offers,
        ))  # fmt: skip
        self.worker_id = welcome.worker_id
        acked = scheduler.workers[self.worker_id].acked_seq
        self._seq = itertools.count(acked + 1)

    def report(self, run_id: int, job_id: int, payload: EventPayload) -> None:
        message = JobEvent(payload, next(self._seq), run_id, job_id)
        self.scheduler.report_events(self.worker_id, [message])

    def launched(self) -> list[Launch]:
        slot = self.scheduler.workers[self.worker_id]
        commands, slot.commands = slot.commands, []
        return [c for c in commands if isinstance(c, Launch)]


def _scheduler(
    tmp_path: Path, jobs: list[tuple[str, int]], policy: str = "max_min_fairness"
) -> Runtime:
    trace = write_trace(tmp_path / "jobs.trace", jobs)
    request = build_request(
        RunOptions(policy=policy, trace=str(trace), cluster="v100=1", round_length_s=5.0)
    )
    return Runtime(request, RuntimeSettings(state_dir=tmp_path / "state"))


def _plan(*job_ids: int, job_type: str = RESNET_32) -> RoundPlan:
    """One round on the one-GPU cluster: the first job listed runs on GPU 0."""
    units = tuple(
        PlannedUnit((job_id,), (job_type,), "v100", (0,), (40.0,), (1000,), 0.0, False)
        for job_id in job_ids[:1]
    )
    return RoundPlan(1, 0.0, 5.0, units)


def _start_round(scheduler: Runtime, plan: RoundPlan) -> None:
    now = time.time()
    with scheduler.lock:
        scheduler._begin_round(plan, now)
        scheduler._dispatch(now)


def _report(scheduler: Runtime) -> RoundReport:
    with scheduler.lock:
        return scheduler._report(time.time())


def test_a_batch_size_change_rekeys_the_jobs_throughput(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, [(RESNET_32, 1000)])
    worker = DrivenWorker(scheduler)
    scheduler.start(scheduler.request, scheduler.request.trace.jobs)
    _start_round(scheduler, _plan(0))
    (launch,) = worker.launched()
    assert launch.job_type == RESNET_32
    worker.report(launch.run_id, 0, Started(step=0, batch_size=32))
    worker.report(launch.run_id, 0, Progress(
        step=100, steps_per_s=40.0, batch_size=32, target_steps=1000
    ))  # fmt: skip
    # The batch size doubled at step 100: 900 steps of 32 samples left = 450 of 64.
    worker.report(launch.run_id, 0, Progress(
        step=101, steps_per_s=0.0, batch_size=64, target_steps=551
    ))  # fmt: skip
    worker.report(launch.run_id, 0, Progress(
        step=120, steps_per_s=22.0, batch_size=64, target_steps=551
    ))  # fmt: skip
    report = _report(scheduler)
    # The engine hears both types' smoothed rates and the switch, with the round.
    assert report.rates == (
        MeasuredRate(RESNET_32, 1, "v100", 40.0), MeasuredRate(RESNET_64, 1, "v100", 22.0)
    )  # fmt: skip
    assert report.batch_size_changes == (BatchSizeChange(0, RESNET_64, 551),)
    assert report.units[0].steps == (120.0,)
    estimates = scheduler.estimates
    assert estimates.estimate(RESNET_32, 1, "v100") == 40.0  # the old key keeps its own rate
    assert estimates.estimate(RESNET_64, 1, "v100") == 22.0
    journaled = {(row.job_type, row.steps_per_s) for row in scheduler.journal.throughputs()}
    assert journaled == {(RESNET_32, 40.0), (RESNET_64, 22.0)}
    (row,) = scheduler.journal.jobs()
    assert (row.job_type, row.target_steps) == (RESNET_64, 551)
    # Reported once: the next round's report has neither again.
    _start_round(scheduler, _plan(0))
    again = _report(scheduler)
    assert (again.rates, again.batch_size_changes) == ((), ())
    # The job completes at the rescaled target, not the trace's 1000 steps.
    _start_round(scheduler, _plan(0))
    worker.report(launch.run_id, 0, Exit(reason="done", step=551, target_steps=551))
    assert scheduler.jobs[0].completed_at is not None
    final = _report(scheduler)
    assert final.units[0].steps == (551 - 120,)
    scheduler.journal.close()

    # A restarted scheduler knows the job at its new type (its relaunch still names the
    # trace's type: the harness resumes the new batch size from its checkpoint).
    restarted = _scheduler(tmp_path, [(RESNET_32, 1000)])
    assert (restarted.jobs[0].job_type, restarted.jobs[0].target_steps) == (RESNET_64, 551)
    restarted.journal.close()


def test_the_engine_state_and_credited_progress_survive_a_restart(tmp_path: Path) -> None:
    jobs = [(RESNET_32, 10_000), (RESNET_64, 10_000)]
    first = _scheduler(tmp_path, jobs)
    worker = DrivenWorker(first)
    first.start(first.request, first.request.trace.jobs)
    _start_round(first, _plan(1))
    (launch,) = worker.launched()
    worker.report(launch.run_id, 1, Started(step=0))
    worker.report(launch.run_id, 1, Exit(reason="preempted", step=70))
    report = _report(first)
    assert report.units[0].steps == (70.0,)
    state = {"version": 1, "rounds": 1, "anything": [1, 2.5, None]}
    first.save_state(state)
    first.journal.close()

    second = _scheduler(tmp_path, jobs)
    assert second.load_state() == state
    # What was reported before stays reported: no step is credited twice.
    assert (second.jobs[0].credited, second.jobs[1].credited) == (0.0, 70.0)
    second.journal.close()
    # A state that does not parse is set aside with a warning; the run starts afresh.
    journal = Journal(tmp_path / "state")
    journal.set_meta("engine_state", "{not json")
    journal.close()
    third = _scheduler(tmp_path, jobs)
    assert third.load_state() is None
    third.journal.close()


def test_the_engines_batch_size_orders_reach_running_jobs(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, [(RESNET_32, 1000)])
    worker = DrivenWorker(scheduler)
    scheduler.start(scheduler.request, scheduler.request.trace.jobs)
    _start_round(scheduler, _plan(0))
    (launch,) = worker.launched()
    worker.report(launch.run_id, 0, Started(step=0, batch_size=32))
    _report(scheduler)
    _start_round(scheduler, replace(_plan(0), batch_size_orders=(BatchSizeOrder(0, 64),)))
    slot = scheduler.workers[worker.worker_id]
    orders = [c for c in slot.commands if isinstance(c, SetBatchSize)]
    assert orders == [SetBatchSize(launch.run_id, 64)]
    scheduler.journal.close()


def test_a_launch_carries_the_planned_units_grant(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, [(RESNET_32, 1000)])
    worker = DrivenWorker(scheduler)
    scheduler.start(scheduler.request, scheduler.request.trace.jobs)
    grant = ResourceGrant((GrantPart(0, (0,), 2.0, 3.5),), speed=1.0)
    (unit,) = _plan(0).units
    _start_round(scheduler, replace(_plan(0), units=(unit._replace(grant=grant),)))
    (launch,) = worker.launched()
    assert (launch.cpus, launch.memory_gb) == (2.0, 3.5)
    scheduler.journal.close()


def test_the_cluster_has_the_cpus_and_memory_workers_offer(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, [(RESNET_32, 1000)])
    DrivenWorker(scheduler, cpus=6.0, memory_gb=40.0)
    (server,) = scheduler.start(scheduler.request, scheduler.request.trace.jobs).servers()
    assert (server.worker_type, server.num_gpus, server.cpus, server.memory_gb) == (
        "v100", 1, 6.0, 40.0
    )
    scheduler.journal.close()
    # A worker that does not say (an older agent): GPUs only, the placements' defaults.
    (tmp_path / "unsaid").mkdir()
    unsaid = _scheduler(tmp_path / "unsaid", [(RESNET_32, 1000)])
    DrivenWorker(unsaid)
    cluster = unsaid.start(unsaid.request, unsaid.request.trace.jobs)
    assert not cluster.has_server_resources
    unsaid.journal.close()


def test_a_job_type_named_without_a_batch_size_keeps_its_type(tmp_path: Path) -> None:
    """A3C's harness trains at batch size 4, which its Gavel type does not name."""
    scheduler = _scheduler(tmp_path, [("A3C", 1000)])
    worker = DrivenWorker(scheduler)
    scheduler.start(scheduler.request, scheduler.request.trace.jobs)
    _start_round(scheduler, _plan(0, job_type="A3C"))
    (launch,) = worker.launched()
    worker.report(launch.run_id, 0, Progress(
        step=10, steps_per_s=5.0, batch_size=4, target_steps=1000
    ))  # fmt: skip
    assert scheduler.jobs[0].job_type == "A3C"
    assert scheduler.estimates.estimate("A3C", 1, "v100") == 5.0
    assert _report(scheduler).batch_size_changes == ()
    scheduler.journal.close()


def test_a_journal_from_before_the_job_type_columns_still_opens(tmp_path: Path) -> None:
    import json
    import sqlite3

    from shock.cluster.journal import Journal

    old = sqlite3.connect(tmp_path / "journal.sqlite")
    old.execute(
        "CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, spec TEXT NOT NULL, "
        "step INTEGER NOT NULL DEFAULT 0, checkpoint_step INTEGER NOT NULL DEFAULT 0, "
        "checkpoint_path TEXT, batch_size INTEGER, completed_at REAL, completed_by_run INTEGER)"
    )
    spec = {"job_id": 0, "job_type": "A3C", "total_steps": 5}
    old.execute("INSERT INTO jobs (job_id, spec) VALUES (0, ?)", (json.dumps(spec),))
    old.commit()
    old.close()
    journal = Journal(tmp_path)
    (row,) = journal.jobs()
    assert (row.spec.job_type, row.job_type, row.target_steps) == ("A3C", None, None)
    journal.close()
