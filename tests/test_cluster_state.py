"""The scheduler's state, driven directly (no server, no processes): a batch-size change
re-keys the job's throughput, and a restarted scheduler resumes the fairness counters."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from cluster_procs import write_trace

from shock.cluster.journal import Journal
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.scheduler import ClusterScheduler, SchedulerSettings
from shock.core.runner import RunOptions, build_request

RESNET_32 = "ResNet-18 (batch size 32)"
RESNET_64 = "ResNet-18 (batch size 64)"


class DrivenWorker:
    """Plays one worker against a scheduler: registration and job events with sequence
    numbers; rounds are started and ended by the test."""

    def __init__(self, scheduler: ClusterScheduler, worker_id: str = "") -> None:
        self.scheduler = scheduler
        reply = scheduler.register(pb.RegisterRequest(
            worker_id=worker_id, gpu_type="v100", devices=[pb.Device(index=0, name="cpu")]
        ))  # fmt: skip
        self.worker_id = reply.worker_id
        acked = scheduler.workers[self.worker_id].acked_seq
        self._seq = itertools.count(acked + 1)

    def report(self, run_id: int, job_id: int, **event: object) -> None:
        message = pb.JobEvent(seq=next(self._seq), run_id=run_id, job_id=job_id, **event)
        self.scheduler.report_events(
            pb.ReportEventsRequest(worker_id=self.worker_id, events=[message])
        )

    def launched(self) -> list[pb.Launch]:
        slot = self.scheduler.workers[self.worker_id]
        commands, slot.commands = slot.commands, []
        return [c.launch for c in commands if c.WhichOneof("command") == "launch"]


def _scheduler(
    tmp_path: Path, jobs: list[tuple[str, int]], policy: str = "max_min_fairness"
) -> ClusterScheduler:
    trace = write_trace(tmp_path / "jobs.trace", jobs)
    request = build_request(
        RunOptions(policy=policy, trace=str(trace), cluster="v100=1", round_length_s=5.0)
    )
    return ClusterScheduler(request, SchedulerSettings(state_dir=tmp_path / "state"))


def _start_round(scheduler: ClusterScheduler) -> None:
    now = time.time()
    with scheduler._lock:
        scheduler._start_round(now)
        scheduler._dispatch(now)


def _end_round(scheduler: ClusterScheduler) -> None:
    with scheduler._lock:
        scheduler._end_round(time.time())


def test_a_batch_size_change_rekeys_the_jobs_throughput(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, [(RESNET_32, 1000)])
    worker = DrivenWorker(scheduler)
    _start_round(scheduler)
    (launch,) = worker.launched()
    assert launch.job_type == RESNET_32
    worker.report(launch.run_id, 0, started=pb.Started(step=0, batch_size=32))
    worker.report(launch.run_id, 0, progress=pb.Progress(
        step=100, steps_per_s=40.0, batch_size=32, target_steps=1000
    ))  # fmt: skip
    assert scheduler.mechanism is not None
    state = scheduler.mechanism.active[0]
    assert state.rates == [40.0]
    # The batch size doubled at step 100: 900 steps of 32 samples left = 450 of 64. Until a
    # report at the new size says otherwise, the job runs at the prior table's rate for it.
    worker.report(launch.run_id, 0, progress=pb.Progress(
        step=101, steps_per_s=0.0, batch_size=64, target_steps=551
    ))  # fmt: skip
    prior_64 = scheduler.request.table.throughput(RESNET_64, 1, "v100")
    assert prior_64 > 0
    assert (state.spec.job_type, state.total_steps, state.rates) == (RESNET_64, 551, [prior_64])
    worker.report(launch.run_id, 0, progress=pb.Progress(
        step=120, steps_per_s=22.0, batch_size=64, target_steps=551
    ))  # fmt: skip
    assert state.rates == [22.0]
    estimates = scheduler.estimates
    assert estimates.estimate(RESNET_32, 1, "v100") == 40.0  # the old key keeps its own rate
    assert estimates.estimate(RESNET_64, 1, "v100") == 22.0
    journaled = {(row.job_type, row.steps_per_s) for row in scheduler.journal.throughputs()}
    assert journaled == {(RESNET_32, 40.0), (RESNET_64, 22.0)}
    (row,) = scheduler.journal.jobs()
    assert (row.job_type, row.target_steps) == (RESNET_64, 551)
    # The job completes at the rescaled target, not the trace's 1000 steps.
    worker.report(launch.run_id, 0, exit=pb.Exit(reason="done", step=551, target_steps=551))
    assert scheduler.jobs[0].completed_at is not None
    _end_round(scheduler)
    scheduler.journal.close()

    # A restarted scheduler admits the job at its new type (its relaunch still names the
    # trace's type: the harness resumes the new batch size from its checkpoint).
    restarted = _scheduler(tmp_path, [(RESNET_32, 1000)])
    assert (restarted.jobs[0].job_type, restarted.jobs[0].target_steps) == (RESNET_64, 551)
    restarted.journal.close()


def _counters(scheduler: ClusterScheduler) -> dict[int, tuple[list[float], ...]]:
    assert scheduler.mechanism is not None
    return {
        job_id: (state.time_so_far, state.deficit, state.allocation or [])
        for job_id, state in sorted(scheduler.mechanism.active.items())
    }


def test_a_restarted_scheduler_resumes_the_fairness_counters(tmp_path: Path) -> None:
    jobs = [(job_type, 10_000) for job_type in ("LM (batch size 20)", RESNET_32, RESNET_64)]
    first = _scheduler(tmp_path, jobs)
    worker = DrivenWorker(first)
    step = 0
    for _ in range(4):  # one GPU, three jobs: each round runs one of them
        _start_round(first)
        for launch in worker.launched():
            worker.report(launch.run_id, launch.job_id, started=pb.Started(step=0))
            time.sleep(0.02)  # some time trained, so the counters move
            step += 10
            worker.report(launch.run_id, launch.job_id, exit=pb.Exit(reason="preempted", step=step))
        _end_round(first)
    before = _counters(first)
    half_round = first.round_length / 2
    # Not the values a fresh admission gives: jobs have received time and owe some.
    assert any(times != [half_round] or deficit != [0.0] for times, deficit, _ in before.values())
    clock = (first.mechanism.last_reset_s, list(first.mechanism.worker_time))  # type: ignore[union-attr]
    first.journal.close()

    second = _scheduler(tmp_path, jobs)
    DrivenWorker(second, worker.worker_id)
    with second._lock:
        second._rebuild_mechanism()
        for job in second.jobs.values():
            job.admitted = True
            job.credited = float(job.step)
            second._admit(second.mechanism, job)  # type: ignore[arg-type]
    assert _counters(second) == before
    assert (second.mechanism.last_reset_s, second.mechanism.worker_time) == clock  # type: ignore[union-attr]
    second.journal.close()


def _run_rounds(scheduler: ClusterScheduler, worker: DrivenWorker, rounds: int) -> None:
    """One GPU: each round runs one job, which trains a little and is preempted."""
    for _ in range(rounds):
        _start_round(scheduler)
        for launch in worker.launched():
            worker.report(launch.run_id, launch.job_id, started=pb.Started(step=0))
            time.sleep(0.02)
            step = scheduler.jobs[launch.job_id].step + 50
            worker.report(launch.run_id, launch.job_id, exit=pb.Exit(reason="preempted", step=step))
        _end_round(scheduler)


@pytest.mark.parametrize("policy", ["shockwave", "finish_time_fairness_perf"])
def test_a_restarted_scheduler_gives_the_policy_its_memory_back(
    tmp_path: Path, policy: str
) -> None:
    jobs = [(job_type, 100_000) for job_type in ("LM (batch size 20)", RESNET_32, RESNET_64)]
    first = _scheduler(tmp_path, jobs, policy)
    worker = DrivenWorker(first)
    _run_rounds(first, worker, 4)
    kept = first.policy.snapshot()
    fresh = first.request.policy.for_run(first.request.config.seed).snapshot()
    assert kept is not None and json.dumps(kept) != json.dumps(fresh)
    first.journal.close()

    second = _scheduler(tmp_path, jobs, policy)
    assert json.dumps(second.policy.snapshot()) == json.dumps(kept)
    second.journal.close()


def test_another_policys_or_a_broken_memory_is_set_aside(tmp_path: Path) -> None:
    jobs = [(RESNET_32, 100_000), (RESNET_64, 100_000)]
    first = _scheduler(tmp_path, jobs, "finish_time_fairness_perf")
    _run_rounds(first, DrivenWorker(first), 2)
    first.journal.close()
    # Restarted with another policy: it starts afresh.
    other = _scheduler(tmp_path, jobs, "fifo")
    assert other.policy.snapshot()["placed"] == {}  # type: ignore[index]
    other.journal.close()
    # A snapshot that does not fit (an edited journal): afresh too, no traceback.
    journal = Journal(tmp_path / "state")
    journal.set_meta("policy_state", json.dumps({"policy": "fifo", "state": {"placed": 3}}))
    journal.close()
    again = _scheduler(tmp_path, jobs, "fifo")
    assert again.policy.snapshot()["placed"] == {}  # type: ignore[index]
    again.journal.close()


def test_a_job_type_named_without_a_batch_size_keeps_its_type(tmp_path: Path) -> None:
    """A3C's harness trains at batch size 4, which its Gavel type does not name."""
    scheduler = _scheduler(tmp_path, [("A3C", 1000)])
    worker = DrivenWorker(scheduler)
    _start_round(scheduler)
    (launch,) = worker.launched()
    worker.report(launch.run_id, 0, progress=pb.Progress(
        step=10, steps_per_s=5.0, batch_size=4, target_steps=1000
    ))  # fmt: skip
    assert scheduler.jobs[0].job_type == "A3C"
    assert scheduler.estimates.estimate("A3C", 1, "v100") == 5.0
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
