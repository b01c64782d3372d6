"""The scheduler as a service, driven directly (no server, no processes, no engine): what a
submission, a cancellation and a failing job do to its state, its journal and the engine's
intake, and what a restarted service keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cluster_state import RESNET_32, DrivenWorker, _plan, _start_round

from shock.cluster.runtime.errors import PermissionError_, PreconditionError, RequestError
from shock.cluster.runtime.job_messages import Submission
from shock.cluster.runtime.messages import Exit, Preempt, Started
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.runtime.state import RuntimeSettings
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request


def _service(state_dir: Path) -> Runtime:
    request = build_request(
        RunOptions(policy="fifo", cluster="v100=1", round_length_s=5.0), trace=Trace(())
    )
    settings = RuntimeSettings(state_dir=state_dir, accepts_submissions=True)
    return Runtime(request, settings)


def _submit(scheduler: Runtime, owner: str, steps: int = 1000) -> int:
    request = Submission(job_type=RESNET_32, steps=steps)
    return scheduler.submit(owner, request)


def _state(scheduler: Runtime, job_id: int) -> str:
    (status,) = scheduler.list_jobs([job_id])
    return status.state


def test_submitted_jobs_reach_the_engine_once_with_their_user(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    first, second = _submit(scheduler, "alice"), _submit(scheduler, "bob")
    assert (first, second) == (0, 1)
    intake = scheduler.intake()
    assert intake is not None
    assert [(job.job_id, job.entity) for job in intake.arrived] == [(0, "alice"), (1, "bob")]
    again = scheduler.intake()
    assert again is not None and again.arrived == () and again.cancelled == ()
    assert _state(scheduler, first) == "queued"


def test_a_cancelled_running_job_is_preempted_dropped_and_never_launched_again(
    tmp_path: Path,
) -> None:
    scheduler = _service(tmp_path / "state")
    worker = DrivenWorker(scheduler)
    job_id = _submit(scheduler, "alice")
    scheduler.start(scheduler.request, ())
    scheduler.intake()
    _start_round(scheduler, _plan(job_id))
    (launch,) = worker.launched()
    worker.report(launch.run_id, job_id, Started(step=0))
    assert _state(scheduler, job_id) == "running"

    with pytest.raises(PermissionError_, match="belongs to alice"):
        scheduler.cancel("bob", False, job_id)
    scheduler.cancel("alice", False, job_id)
    commands = scheduler.workers[worker.worker_id].commands
    assert [c for c in commands if isinstance(c, Preempt)] == [Preempt(launch.run_id)]
    intake = scheduler.intake()
    assert intake is not None and intake.cancelled == (job_id,)
    assert _state(scheduler, job_id) == "cancelled"
    with pytest.raises(PreconditionError, match="cancelled already"):
        scheduler.cancel("root", True, job_id)
    # Its run ends; a plan that still names it launches nothing.
    worker.report(launch.run_id, job_id, Exit(reason="preempted", step=40))
    _start_round(scheduler, _plan(job_id))
    assert worker.launched() == []


def test_a_job_that_keeps_failing_fails_alone_and_the_service_goes_on(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    worker = DrivenWorker(scheduler)
    job_id = _submit(scheduler, "alice")
    scheduler.start(scheduler.request, ())
    scheduler.intake()
    for _ in range(scheduler.settings.max_job_failures):
        _start_round(scheduler, _plan(job_id))
        (launch,) = worker.launched()
        worker.report(launch.run_id, job_id, Exit(reason="crashed", message="boom"))
    assert scheduler._failure is None
    (status,) = scheduler.list_jobs([job_id])
    assert status.state == "failed" and "boom" in status.message
    intake = scheduler.intake()
    assert intake is not None and intake.cancelled == (job_id,)


def test_a_restarted_service_keeps_its_jobs_but_hands_the_engine_only_live_ones(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    scheduler = _service(state_dir)
    kept, cancelled = _submit(scheduler, "alice"), _submit(scheduler, "bob")
    scheduler.cancel("bob", False, cancelled)
    scheduler.journal.close()  # as a killed process's lock goes with it
    restarted = _service(state_dir)
    assert restarted.accepts_submissions and restarted.capabilities.accepts_submissions
    assert [job.job_id for job in restarted.request.trace.jobs] == [kept]
    assert restarted.request.trace.jobs[0].entity == "alice"
    assert (_state(restarted, kept), _state(restarted, cancelled)) == ("queued", "cancelled")
    assert _submit(restarted, "carol") == 2  # ids are never reused


def test_a_trace_run_refuses_submissions_and_bad_submissions_are_refused(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    with pytest.raises(RequestError, match="no workload for model family"):
        scheduler.submit("alice", Submission(job_type="Foo (batch size 2)", steps=5))
    with pytest.raises(RequestError, match="--steps"):
        scheduler.submit("alice", Submission(job_type=RESNET_32, steps=0))
    with pytest.raises(RequestError, match="batch size"):
        scheduler.submit("alice", Submission(
            job_type="A3C", steps=5, adaptation="accordion"
        ))  # fmt: skip
    request = build_request(RunOptions(policy="fifo", cluster="v100=1"), trace=Trace(()))
    fixed = Runtime(request, RuntimeSettings(state_dir=tmp_path / "fixed"))
    with pytest.raises(PreconditionError, match="fixed trace"):
        _submit(fixed, "alice")


def test_a_jobs_status_carries_the_rates_the_scheduler_plans_with(tmp_path: Path) -> None:
    # Known to the table: its rate; a type the table lacks: Gavel's estimator, not 1 step/s.
    scheduler = _service(tmp_path / "state")
    known = _submit(scheduler, "alice")
    unknown = scheduler.submit(
        "bob", Submission(job_type="ResNet-18 (batch size 48)", steps=100)
    )
    statuses = {s.job_id: s for s in scheduler.list_jobs()}
    table = scheduler.request.table
    # No worker registered yet: every GPU type of the table.
    rates = dict(statuses[known].steps_per_s)
    assert rates == {w: table.throughput(RESNET_32, 1, w) for w in ("k80", "p100", "v100")}
    estimated = statuses[unknown].steps_per_s["v100"]
    assert estimated > 1.0 and estimated != scheduler.estimates.default_steps_per_s


def test_an_elastic_submission_is_an_elastic_job_that_counts_a_pollux_jobs_samples(
    tmp_path: Path,
) -> None:
    scheduler = _service(tmp_path / "state")
    bert = scheduler.submit("alice", Submission(
        job_type="bert (batch size 16)", steps=300, elastic=True
    ))  # fmt: skip
    resnet = scheduler.submit("alice", Submission(job_type=RESNET_32, steps=50, elastic=True))
    intake = scheduler.intake()
    assert intake is not None
    specs = {spec.job_id: spec for spec in intake.arrived}
    # A Pollux application's work is in samples, as in Pollux's traces; it trains its steps.
    assert specs[bert].elastic and specs[bert].total_steps == 300 * 16
    assert specs[resnet].elastic and specs[resnet].total_steps == 50
    assert scheduler.jobs[bert].target_steps == 300
    (status,) = scheduler.list_jobs([bert])
    assert status.target_steps == 300
    # Kept across a restart (the journal holds the whole spec).
    scheduler.journal.close()
    restarted = _service(tmp_path / "state")
    assert restarted.jobs[bert].spec.elastic and restarted.jobs[bert].target_steps == 300
    with pytest.raises(RequestError, match="not a command"):
        restarted.submit("alice", Submission(command=("python", "train.py"), elastic=True))
    with pytest.raises(RequestError, match="drop --adaptation gns"):
        restarted.submit("alice", Submission(
            job_type=RESNET_32, steps=5, adaptation="gns", elastic=True
        ))  # fmt: skip


def test_a_submission_keeps_its_elastic_flag_on_the_wire() -> None:
    pytest.importorskip("google.protobuf", reason="the cluster extra carries protobuf")
    from shock.cluster.grpc_wire import submission_from_pb, submission_to_pb

    for elastic in (True, False):
        submission = Submission(job_type="bert (batch size 16)", steps=3, gpus=1, elastic=elastic)
        assert submission_from_pb(submission_to_pb(submission)) == submission
