"""Allocations computed ahead in a worker process: a run makes the same results with them as
without, they are used only where their input matches the real one, and a run goes on without
them when the policy cannot be predicted or the worker dies."""

from __future__ import annotations

import os
import pickle
import socket
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from results_documents import comparable

from shock.core import allocation_ahead
from shock.core.allocation_ahead import AllocationAhead
from shock.core.allocation_check import allocate_checked
from shock.core.allocation_prediction import (
    ArrivalTable,
    NextStep,
    PredictedJobs,
    gone_by_round,
    predict_next,
)
from shock.core.engine import Engine
from shock.core.nonblocking_socket import NonBlockingSocket
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.results import RunResult
from shock.core.run import RunRequest
from shock.core.runner import RunOptions, build_request
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.plugins.backends.simulator import SimulatedExecutor
from shock.plugins.policies.max_min_fairness import MaxMinFairness
from shock.traces.generator import WorkloadConfig, generate_jobs

needs_two_cpus = pytest.mark.skipif(
    not allocation_ahead.wanted(), reason="allocations ahead need a second CPU"
)


def _trace(jobs: int, multi_gpu: bool = True) -> Trace:
    config = WorkloadConfig(num_jobs=jobs, jobs_per_hour=6.0, seed=11, multi_gpu=multi_gpu)
    return Trace(tuple(generate_jobs(config, default_throughputs())), "generated", "gavel")


def _request(trace: Trace, ahead: bool, **options: Any) -> RunRequest:
    request = build_request(RunOptions(**options), trace=trace)
    return replace(request, config=replace(request.config, allocate_ahead=ahead))


def _run(request: RunRequest) -> tuple[RunResult, Engine]:
    engine = Engine(request, SimulatedExecutor(), "simulator")
    return engine.run(), engine


def _wait_until_ready(ahead: AllocationAhead) -> None:
    for _ in range(60_000):  # until the worker says it is ready (it takes about a second)
        if ahead.predicting or not ahead.active:  # (not active: it could not start)
            return
        assert ahead.active and ahead._process is not None
        assert ahead._process.poll() is None
        time.sleep(0.01)
    raise AssertionError("the worker never said it was ready")


def _same_run_with_and_without(policy: Policy) -> Engine:
    """Run `policy` on a short trace with and without the look-ahead; assert the results are
    the same, and return the engine of the run with it."""
    trace = _trace(60)
    requests = [
        replace(_request(trace, ahead, cluster="8:8:8"), policy=policy) for ahead in (True, False)
    ]
    (with_ahead, engine), (without, _) = (_run(request) for request in requests)
    assert comparable(with_ahead) == comparable(without)
    return engine


@pytest.fixture
def ahead_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker starts at a run's first allocation (runs in tests are short), and the run
    waits until it is ready: how many allocations it answers then does not depend on how
    fast the machine starts a process."""
    monkeypatch.setattr(allocation_ahead, "START_AFTER_ALLOCATIONS", 1)
    monkeypatch.setattr(allocation_ahead, "START_WITH_JOBS_LEFT", 1)
    monkeypatch.delenv(allocation_ahead.ENVIRONMENT_SWITCH, raising=False)
    start = AllocationAhead._start

    def start_and_wait(self: AllocationAhead) -> None:
        start(self)
        _wait_until_ready(self)

    monkeypatch.setattr(AllocationAhead, "_start", start_and_wait)


class ReadsJobViews(MaxMinFairness):
    """Max-min fairness that also looks at the jobs' views (so it cannot be predicted)."""

    def allocate(self, problem: PolicyInput, solver: Any) -> Allocation:
        assert all(job.steps_done >= 0 for job in problem.jobs)
        return super().allocate(problem, solver)


RUNS = {
    "gavel preset, gangs": {"policy": "max_min_fairness_perf", "preset": "gavel"},
    "every change re-allocates": {"policy": "max_min_fairness_perf"},
    "heterogeneity-agnostic": {"policy": "max_min_fairness", "preset": "gavel"},
    "restart overhead": {"policy": "max_min_fairness_perf", "preemption_overhead_s": 30.0},
}


@needs_two_cpus
@pytest.mark.usefixtures("ahead_at_once")
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_run_is_the_same_with_allocations_ahead(name: str) -> None:
    trace = _trace(150)
    options = {"cluster": "8:8:8", **RUNS[name]}
    with_ahead, engine = _run(_request(trace, True, **options))
    without, plain = _run(_request(trace, False, **options))
    assert comparable(with_ahead) == comparable(without)
    assert plain.ahead is None
    assert engine.ahead is not None
    stats = engine.ahead.stats
    # Most allocations came from the worker (not the first: nothing was predicted before it).
    assert stats.used > with_ahead.metrics.allocations / 2
    assert stats.used + stats.missed <= with_ahead.metrics.allocations
    # And most of those the worker had computed before it was asked: it predicted them from
    # the allocation before.
    assert stats.guessed > stats.used / 2
    assert engine.ahead._process is None  # stopped with the run


@needs_two_cpus
@pytest.mark.usefixtures("ahead_at_once")
def test_a_policy_that_reads_job_views_is_not_predicted(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker unpickles the policy: it must find this module.
    here = str(Path(__file__).parent)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    )
    policy = ReadsJobViews(heterogeneity_aware=True)
    policy.stateless = True  # wrongly, or it would never be tried
    engine = _same_run_with_and_without(policy)
    assert engine.ahead is not None
    assert not engine.ahead.active
    assert engine.ahead._ready  # it started, and gave up at the first answer (a view read)
    assert (engine.ahead.stats.submitted, engine.ahead.stats.used) == (1, 0)


class UnknownToTheWorker(MaxMinFairness):
    """Max-min fairness from a module the worker cannot import (this test's)."""


@needs_two_cpus
@pytest.mark.usefixtures("ahead_at_once")
def test_a_policy_the_worker_cannot_load_leaves_the_run_as_it_is(
    capfd: pytest.CaptureFixture[str],
) -> None:
    policy = UnknownToTheWorker(heterogeneity_aware=True)
    policy.stateless = True
    engine = _same_run_with_and_without(policy)
    assert engine.ahead is not None
    assert not engine.ahead.active and not engine.ahead._ready
    assert engine.ahead.stats.submitted == 0
    assert capfd.readouterr().err == ""  # the worker left quietly


@needs_two_cpus
@pytest.mark.usefixtures("ahead_at_once")
def test_a_run_goes_on_when_the_worker_dies() -> None:
    trace = _trace(150)
    killed: list[int] = []
    take = AllocationAhead.take

    def take_then_kill(self: AllocationAhead, problem: PolicyInput) -> Allocation | None:
        allocation = take(self, problem)
        if self.stats.used == 5 and self._process is not None and not killed:
            self._process.kill()
            self._process.wait()
            killed.append(self._process.pid)
        return allocation

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AllocationAhead, "take", take_then_kill)
        with_ahead, engine = _run(_request(trace, True, cluster="8:8:8"))
    without, _ = _run(_request(trace, False, cluster="8:8:8"))
    assert killed
    assert comparable(with_ahead) == comparable(without)
    assert engine.ahead is not None
    assert not engine.ahead.active
    assert engine.ahead.stats.used == 5


def _input(jobs: PredictedJobs, table: Any) -> PolicyInput:
    """The real input the mechanism would build for these jobs."""
    return PolicyInput.of_job_columns(
        lambda: (),
        tuple(jobs.job_ids.tolist()),
        jobs.scale_factors.copy(),
        jobs.priority_weights.copy(),
        now=jobs.now,
        worker_types=jobs.worker_types,
        capacity=jobs.capacity.copy(),
        throughputs=jobs.throughputs.copy(),
        table=table,
        prices=None,
        round_length_s=jobs.round_length_s,
        entity_weights=None,
    )


class NoArrivals:
    def next_time(self) -> float:
        return float("inf")

    def jobs_left(self) -> int:
        return 4

    def until(self, time_s: float) -> list[Any]:
        return []

    def following(self, time_s: float, count: int) -> tuple[list[Any], float]:
        return [], float("inf")


@needs_two_cpus
def test_an_answer_is_used_only_when_the_fields_read_match() -> None:
    request = _request(_trace(10), True, cluster="8:8:8")
    policy = request.policy
    rng = np.random.default_rng(0)
    jobs = PredictedJobs(
        np.array([3, 5, 8, 13]),
        np.array([1.0, 2.0, 1.0, 4.0]),
        np.ones(4),
        rng.uniform(0.5, 3.0, (4, 3)),
        now=720.0,
        worker_types=("k80", "p100", "v100"),
        capacity=np.array([4.0, 4.0, 4.0]),
        prices=None,
        round_length_s=360.0,
        entity_weights=None,
    )
    expected = allocate_checked(policy, _input(jobs, request.table), request.solver)
    ahead = AllocationAhead(
        policy, request.solver, request.table, NoArrivals(), start_after=1, start_with_jobs_left=1
    )
    try:
        assert ahead.take(_input(jobs, request.table)) is None  # nothing predicted yet
        _wait_until_ready(ahead)
        answers: list[Allocation | None] = []
        for real in (
            jobs,
            replace(jobs, now=1080.0),  # max-min fairness does not read the time
            replace(jobs, capacity=np.array([4.0, 4.0, 2.0])),
            replace(jobs, throughputs=jobs.throughputs * 1.5),
            replace(jobs, scale_factors=jobs.scale_factors.astype(np.int64)),
        ):
            ahead.submit(jobs)
            answers.append(ahead.take(_input(real, request.table)))
    finally:
        ahead.close()
    used, time_not_read, *changed = answers
    assert used is not None and time_not_read is not None
    for allocation in (used, time_not_read):
        assert allocation.keys == expected.keys
        assert np.array_equal(allocation.fractions, expected.fractions)
        assert allocation.objective == expected.objective
    assert changed == [None, None, None]
    assert ahead.stats.used == 2
    assert ahead._process is None


def test_the_environment_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(allocation_ahead.ENVIRONMENT_SWITCH, "0")
    assert not allocation_ahead.wanted()
    _, engine = _run(_request(_trace(5), True, cluster="8:8:8"))
    assert engine.ahead is None


def test_a_sweep_of_parallel_cells_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from shock.sweep.runner import _no_allocations_ahead

    monkeypatch.delenv(allocation_ahead.ENVIRONMENT_SWITCH, raising=False)
    _no_allocations_ahead()
    assert os.environ[allocation_ahead.ENVIRONMENT_SWITCH] == "0"


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 1e6),
            st.floats(0.0, 1e4),
            st.one_of(st.just(0.0), st.floats(1e-3, 1e4)),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_rounds_until_jobs_are_gone(jobs: list[tuple[float, float, float]]) -> None:
    left, this_round, per_round = (np.array(column) for column in zip(*jobs, strict=True))
    gone = gone_by_round(left, this_round, per_round)
    for k, (steps, now, later) in enumerate(jobs):
        if steps <= now:
            assert gone[k] == 1.0
        elif later == 0.0:
            assert gone[k] == np.inf
        else:
            # Done within gone - 1 rounds after this one, not within one fewer.
            rounds = gone[k] - 1
            assert rounds >= 1
            assert steps <= now + rounds * later * (1 + 1e-12)
            assert steps > now + (rounds - 1) * later * (1 - 1e-12)


def _asked(ids: list[int], now: float) -> PredictedJobs:
    count = len(ids)
    return PredictedJobs(
        np.array(ids),
        np.ones(count),
        np.ones(count),
        np.full((count, 3), 2.0),
        now=now,
        worker_types=("k80", "p100", "v100"),
        capacity=np.array([4.0, 4.0, 4.0]),
        prices=None,
        round_length_s=100.0,
        entity_weights=None,
    )


def _arrivals(times: list[float], ids: list[int]) -> ArrivalTable:
    count = len(times)
    return ArrivalTable(
        np.array(times),
        np.array(ids),
        np.ones(count, dtype=np.int64),
        np.ones(count),
        np.full(count, 1e6),
        np.full((count, 3), 3.0),
    )


def test_the_worker_predicts_the_allocation_after_the_one_it_computed() -> None:
    start = 1000.0
    asked = _asked([1, 2, 3], start)
    # Job 1 runs a whole GPU (200 steps a round), job 2 half of one, job 3 not at all.
    fractions = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]])
    # Job 1 has a round and a half left: gone by round 2 (its first round, then half).
    steps_left = np.array([300.0, 1e5, 50.0])
    # Arrivals: job 0 at round 3 (ids need not follow arrival order), job 9 at round 10.
    arrivals = _arrivals([start - 50.0, start + 250.0, start + 1000.0], [7, 0, 9])
    step = NextStep(steps_left, 6, True, 100.0, 1)
    predicted = predict_next(asked, fractions, step, arrivals)
    assert predicted is not None
    # The next allocation may come 6 rounds on (a job left before): job 1 is gone, job 0
    # has arrived (with its own rates), job 9 not yet; ordered by id.
    assert predicted.now == start + 600.0
    assert predicted.job_ids.tolist() == [0, 2, 3]
    assert predicted.throughputs.tolist() == [[3.0] * 3, [2.0] * 3, [2.0] * 3]
    assert predicted.worker_types == asked.worker_types
    # Re-allocating every round: the very next round.
    every_round = predict_next(asked, fractions, replace(step, waits_for_change=False), arrivals)
    assert every_round is not None
    assert every_round.now == start + 600.0 and every_round.job_ids.tolist() == [0, 2, 3]
    step_one = replace(step, first_round=1, waits_for_change=False)
    next_round = predict_next(asked, fractions, step_one, arrivals)
    assert next_round is not None
    assert next_round.now == start + 100.0 and next_round.job_ids.tolist() == [1, 2, 3]
    # Waiting for a change: nothing leaves before job 1 does (round 2) and nothing arrives.
    waiting = predict_next(asked, fractions, replace(step, first_round=1), _arrivals([], []))
    assert waiting is not None
    assert waiting.now == start + 200.0 and waiting.job_ids.tolist() == [2, 3]
    # Nobody ever leaves and nobody arrives: no allocation is due.
    idle = np.zeros((3, 3))
    assert predict_next(asked, idle, replace(step, first_round=1), _arrivals([], [])) is None


def test_requests_and_answers_cross_to_the_worker_unchanged() -> None:
    """They are pickled with their arrays as raw bytes: same values, dtypes and shapes, and
    writable arrays on the other side."""
    jobs = replace(
        _asked([4, 9], 50.0),
        scale_factors=np.array([1, 2], dtype=np.int64),
        prices=np.array([0.5, 1.0, 3.0]),
        entity_weights={"lab": 2.0},
    )
    step = NextStep(np.array([10.0, 20.0]), 6, True, 100.0, 3)
    read = frozenset({"job_ids", "throughputs"})
    answer = allocation_ahead.Answer(7, np.full((2, 3), 0.25), 1.5, fields_read=read, guessed=True)
    sent_jobs, sent_step, sent_answer = pickle.loads(pickle.dumps((jobs, step, answer)))
    for original, sent in ((jobs, sent_jobs), (step, sent_step), (answer, sent_answer)):
        for name in type(original).__slots__:
            value, copied = getattr(original, name), getattr(sent, name)
            if isinstance(value, np.ndarray):
                assert copied.dtype == value.dtype and copied.shape == value.shape
                assert np.array_equal(copied, value) and copied.flags.writeable
            else:
                assert copied == value
    empty = allocation_ahead.Answer(8, None)
    assert pickle.loads(pickle.dumps(empty)) == empty


def test_the_run_does_not_wait_for_ever_on_a_worker_that_waits_to_send() -> None:
    """Both sides send a message larger than the socket's buffers: the worker its answer
    (it does not read until that is sent), the run its request. The run reads while it
    cannot send, so both get through."""
    request = _request(_trace(10), True, cluster="8:8:8")
    ahead = AllocationAhead(request.policy, request.solver, default_throughputs(), NoArrivals())
    ours, theirs = socket.socketpair()
    ahead._connection = Connection(os.dup(ours.fileno()))
    ahead._socket = NonBlockingSocket(ours.fileno())
    ours.close()
    worker_side = Connection(theirs.detach())
    big_answer = allocation_ahead.Answer(1, np.zeros((1 << 19, 3)))  # 12 MB
    received: list[bytes] = []

    def worker() -> None:
        worker_side.send_bytes(pickle.dumps(big_answer, pickle.HIGHEST_PROTOCOL))
        received.append(worker_side.recv_bytes())

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    try:
        ahead._send_message(bytes(12 << 20))
        thread.join(timeout=600)  # (a bound for a broken run; it takes well under a second)
        assert not thread.is_alive()
        assert len(received[0]) == 12 << 20
        assert ahead._newest is not None and ahead._newest.fractions.shape == (1 << 19, 3)
    finally:
        ahead.close()
        worker_side.close()


@needs_two_cpus
def test_the_worker_is_ready_even_when_its_message_was_read_with_answers() -> None:
    """A miss reads whatever the worker sent, to keep the connection clear; the worker's
    "ready" may be among it, and still counts."""
    request = _request(_trace(10), True, cluster="8:8:8")
    ahead = AllocationAhead(request.policy, request.solver, default_throughputs(), NoArrivals())
    ahead._start()
    try:
        side = ahead._socket
        assert side is not None
        for _ in range(60_000):  # until "ready" is there (it takes about a second)
            if side.waiting():
                break
            time.sleep(0.01)
        assert not ahead._ready
        assert ahead.take(_input(_asked([1, 2], 0.0), default_throughputs())) is None
        assert ahead._ready and ahead.predicting
    finally:
        ahead.close()
