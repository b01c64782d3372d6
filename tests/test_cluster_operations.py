"""What an operator of the service sees, with the scheduler driven directly (no server, no
processes): the event log (one line per event), a job's history replayed from the journal
after a restart, why a queued job waits, users' shares over time, ρ fixed when a job ends,
refused tokens that say which case they are, and the checks of a submission."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from test_cluster_jobbook import _service, _submit
from test_cluster_state import RESNET_32, DrivenWorker, _plan, _start_round

from shock.cluster.auth import JOBS_SERVICE_PREFIX, token_refusal
from shock.cluster.defaults import with_default_port
from shock.cluster.fairness import average_fair_shares, average_jobs_in_system
from shock.cluster.names import placement_text
from shock.cluster.oplog import configure_logging, log_event
from shock.cluster.round_times import RoundTimes
from shock.cluster.runtime.errors import RequestError
from shock.cluster.runtime.job_messages import Submission
from shock.cluster.runtime.messages import Checkpoint, Exit, Launch, Progress, Started
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.runtime.state import RuntimeSettings
from shock.cluster.users import User, Users, hash_token
from shock.core.errors import InputError

SUBMIT = f"{JOBS_SERVICE_PREFIX}SubmitJob"
HEARTBEAT = "/shock.cluster.v1.Scheduler/Heartbeat"


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """Everything logged, as the service writes it with --log-format json."""
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    configure_logging("debug", "json", stream)
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def _events(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _running_job(scheduler: Runtime, owner: str = "alice", steps: int = 1000
                 ) -> tuple[DrivenWorker, int, Launch]:  # fmt: skip
    worker = DrivenWorker(scheduler)
    job_id = _submit(scheduler, owner, steps=steps)
    scheduler.start(scheduler.request, ())
    scheduler.intake()
    _start_round(scheduler, _plan(job_id))
    (launch,) = worker.launched()
    worker.report(launch.run_id, job_id, Started(step=0))
    return worker, job_id, launch


def test_every_event_is_one_log_line_with_its_facts(
    tmp_path: Path, log_lines: io.StringIO
) -> None:
    scheduler = _service(tmp_path / "state")
    worker, job_id, launch = _running_job(scheduler)
    worker.report(launch.run_id, job_id, Checkpoint(step=40, path="x"))
    worker.report(launch.run_id, job_id, Exit(reason="done", step=1000))
    second = _submit(scheduler, "bob")
    scheduler.cancel("bob", False, second)
    log_event("note", "a message\nwith a newline")

    lines = log_lines.getvalue().splitlines()
    events = _events(log_lines)  # every line is one whole JSON object
    names = [event["event"] for event in events]
    for once in ("worker-joined", "job-submitted", "job-launched", "run-started",
                 "job-checkpoint", "run-ended", "job-finished", "job-cancelled"):  # fmt: skip
        assert names.count(once) == (2 if once == "job-submitted" else 1), (once, names)
    launched = next(event for event in events if event["event"] == "job-launched")
    assert launched["job"] == job_id and launched["run"] == launch.run_id
    assert launched["user"] == "alice" and "worker-1 GPU 0" in str(launched["message"])
    cancelled = next(event for event in events if event["event"] == "job-cancelled")
    assert cancelled["message"] == f"job {second}: cancelled by bob"
    assert events[-1]["message"] == "a message\nwith a newline" and len(lines) == len(events)


def test_text_lines_are_never_wrapped_or_split(tmp_path: Path) -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("info", "text", stream)
        log_event("worker-joined", "worker-1 joined " + "x" * 200 + "\nsecond line")
        logging.getLogger("shock.debugging").debug("not shown at info")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    (line,) = stream.getvalue().splitlines()
    assert " INFO worker-joined worker-1 joined " in line and line.endswith("\\nsecond line")


@pytest.mark.parametrize(("level", "log_format", "field"),
                         [("loud", "text", "--log-level"), ("info", "xml", "--log-format")])
def test_an_unknown_log_level_or_format_is_refused_by_name(
    level: str, log_format: str, field: str
) -> None:
    with pytest.raises(InputError, match=field):
        configure_logging(level, log_format, io.StringIO())


def test_watch_replays_the_whole_history_with_its_times_after_a_restart(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    worker, job_id, launch = _running_job(scheduler)
    worker.report(launch.run_id, job_id, Checkpoint(step=300, path="x"))
    _start_round(scheduler, _plan())  # the next round gives its GPU to nobody: preempted
    worker.report(launch.run_id, job_id, Exit(reason="preempted", step=320))
    before = scheduler.journal.job_events(job_id)
    scheduler.journal.close()

    time.sleep(0.01)  # the restarted scheduler's clock is visibly later
    restarted = _service(tmp_path / "state")
    history = list(restarted.watch(job_id, lambda: True, history_only=True))
    texts = [update.event for update in history]
    assert texts[0].startswith("submitted by alice")
    assert any(text.startswith(f"launched as run {launch.run_id} on worker-1 GPU 0")
               for text in texts)  # fmt: skip
    assert f"run {launch.run_id} started on worker-1 GPU 0 at step 0" in texts
    assert "checkpoint at step 300" in texts
    assert any(text.startswith("preempted: round 1") for text in texts)
    assert f"run {launch.run_id} ended (preempted) at step 320; queued until it runs again" in texts
    # The times are when it happened, not when it was watched.
    assert [update.time_unix for update in history[: len(before)]] == [
        row.at for row in before
    ]
    assert history[-1].job.state == "queued" and history[-1].event.startswith("waiting")


def test_a_queued_job_says_why_it_waits(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    job_id = _submit(scheduler, "alice")
    (update,) = list(scheduler.watch(job_id, lambda: True, history_only=True))[-1:]
    assert update.event == "waiting: no worker is connected"
    _running_job(scheduler, "bob")  # bob's job holds the one GPU; alice's is not planned
    last = list(scheduler.watch(job_id, lambda: True, history_only=True))[-1]
    assert last.event == ("waiting for GPUs: round 1 gave it none (1 of 1 GPUs busy, "
                          "1 job(s) queued)")  # fmt: skip


def test_gpus_are_named_by_worker_the_same_everywhere() -> None:
    assert placement_text([("worker-1", (0, 1))]) == "worker-1 GPUs 0,1"
    assert placement_text([("worker-1", (0,)), ("worker-1", (1,)), ("worker-2", (0,))]) == (
        "worker-1 GPUs 0,1 + worker-2 GPU 0"
    )


def _weighted_service(state_dir: Path, weights: dict[str, float]) -> Runtime:
    scheduler = _service(state_dir)
    request = replace(scheduler.request, config=replace(
        scheduler.request.config, entity_weights=weights
    ))  # fmt: skip
    scheduler.journal.close()
    return Runtime(request, RuntimeSettings(state_dir=state_dir,
                                                       accepts_submissions=True))  # fmt: skip


def test_shares_now_and_over_time_beside_the_weighted_fair_shares(tmp_path: Path) -> None:
    scheduler = _weighted_service(tmp_path / "state", {"alice": 3.0, "bob": 1.0, "root": 1.0})
    _running_job(scheduler, "alice")
    _submit(scheduler, "bob")
    time.sleep(0.05)  # alice's run holds the GPU for a measurable time
    shares = {share.user: share for share in scheduler.user_shares(window_s=3600)}
    # alice (3) and bob (1) have work; root has none and is owed nothing.
    assert shares["alice"].fair_share == pytest.approx(0.75)
    assert shares["bob"].fair_share == pytest.approx(0.25) and shares["root"].fair_share == 0
    assert shares["alice"].gpus == 1 and shares["alice"].share == pytest.approx(1.0)
    # All GPU time so far was alice's; over the window, bob was owed part of it.
    assert shares["alice"].recent.gpu_seconds > 0 and shares["alice"].recent.share == 1.0
    assert shares["bob"].recent.gpu_seconds == 0 and shares["bob"].since_start.share == 0
    assert 0.75 <= shares["alice"].recent.fair_share < 1.0
    assert 0 < shares["bob"].recent.fair_share <= 0.25
    with pytest.raises(RequestError, match="window"):
        scheduler.user_shares(window_s=0)


def test_fair_shares_are_averaged_over_the_time_users_had_work() -> None:
    lifetimes = [("a", (0.0, 10.0)), ("b", (5.0, 10.0)), ("a", (2.0, 3.0))]
    # a alone for 5 s, then a (2) and b (1) together for 5 s; the idle 10 s do not count.
    fair = average_fair_shares({"a": 2.0, "b": 1.0}, lifetimes, 0.0, 20.0)
    assert fair == pytest.approx({"a": (5 + 5 * 2 / 3) / 10, "b": (5 / 3) / 10})
    assert average_jobs_in_system([(0.0, 10.0), (5.0, 10.0)], 0.0, 10.0) == 1.5


def test_rho_is_fixed_when_the_job_finishes(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    worker, job_id, launch = _running_job(scheduler, steps=100)
    worker.report(launch.run_id, job_id, Progress(step=50, steps_per_s=5.0))
    worker.report(launch.run_id, job_id, Exit(reason="done", step=100))
    (done,) = scheduler.list_jobs([job_id])
    assert done.state == "done" and done.rho > 0
    # Later measurements change the estimates; the finished job's ρ stays.
    for _ in range(5):
        scheduler.estimates.observe(RESNET_32, 1, "v100", 1000.0)
    time.sleep(0.01)
    (later,) = scheduler.list_jobs([job_id])
    assert later.rho == done.rho
    scheduler.journal.close()
    (restarted,) = _service(tmp_path / "state").list_jobs([job_id])
    assert restarted.rho == done.rho


def test_a_batch_size_outside_the_throughput_table_runs_with_estimated_rates(
    tmp_path: Path,
) -> None:
    # Checked like any built-in job type (the harness must run it), but not refused: the
    # policies plan with the estimator's rates until the job reports its own.
    scheduler = _service(tmp_path / "state")
    job_id = scheduler.submit("alice", Submission(
        job_type="ResNet-18 (batch size 33)", steps=10
    ))  # fmt: skip
    (status,) = scheduler.list_jobs([job_id])
    assert status.steps_per_s and all(rate > 0 for rate in status.steps_per_s.values())
    with pytest.raises(RequestError, match="ResNet-18"):
        scheduler.submit("alice", Submission(job_type="ResNet-19 (batch size 32)",
                                                      steps=10))  # fmt: skip


USERS = Users((User("alice", 2.0, hash_token("alice-token")),
               User("bob", 1.0, hash_token("bob-token\n"))))  # fmt: skip


@pytest.mark.parametrize(
    ("method", "token", "users", "expected"),
    [
        (SUBMIT, "alice-token", USERS, None),
        (SUBMIT, "", USERS, "no token given"),
        (SUBMIT, "nobodys-token", USERS, "unknown token: no user in the users file has it"),
        (SUBMIT, "cluster-token", USERS, "this is the cluster (worker) token"),
        (SUBMIT, "bob-token", USERS, "user bob's token_sha256 in the users file is the hash "
                                     "of this token followed by a newline"),
        (SUBMIT, "cluster-token", None, None),
        (SUBMIT, "nobodys-token", None, "unknown token: it is not this cluster's token"),
        (HEARTBEAT, "cluster-token", USERS, None),
        (HEARTBEAT, "alice-token", USERS, "this is a user's token: a worker presents"),
        (HEARTBEAT, "nobodys-token", USERS, "unknown token: it is not this cluster's token"),
    ],
)
def test_a_refused_token_is_told_which_case_it_is(
    method: str, token: str, users: Users | None, expected: str | None
) -> None:
    reason = token_refusal("cluster-token", users, method, token)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason
        assert token not in reason or not token  # never echoed back


def test_a_scheduler_address_without_a_port_gets_the_default_one() -> None:
    assert with_default_port("scheduler.lab") == "scheduler.lab:50051"
    assert with_default_port("scheduler.lab:6000") == "scheduler.lab:6000"
    assert with_default_port("[::1]") == "[::1]:50051"


def test_round_and_decision_times_leave_out_waits_with_nothing_to_run() -> None:
    times = RoundTimes()
    times.round_started(100.0)  # the first round: no decision measured before it
    times.round_reported(130.0)
    times.round_started(130.5)
    times.round_reported(160.5)
    times.waited(400.0)  # idle until a job arrived
    times.round_started(400.25)
    assert (times.rounds, times.round_seconds_total, times.last_round_s) == (2, 60.0, 30.0)
    assert (times.decisions, times.decision_seconds_total) == (2, 0.75)
    assert times.last_decision_s == 0.25
