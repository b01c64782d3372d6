"""The engine: every backend's one loop. Its state snapshots and restores as one; what an
executor reports (measured rates, batch-size switches, late progress) reaches the mechanism;
every observer event fires."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cluster_procs import write_trace
from durable_simulation import Crash, DurableSimulation
from event_recorder import EventRecorder

from shock.core.events import RoundStarted
from shock.core.executor import (
    BatchSizeChange,
    ExecutorCapabilities,
    MeasuredRate,
    RoundPlan,
    RoundReport,
    StrayProgress,
)
from shock.core.hookspecs import hookimpl
from shock.core.model import Cluster
from shock.core.plugins import default_registry
from shock.core.run import RunRequest
from shock.engine.engine import Engine
from shock.engine.engine_state import restore
from shock.engine.runner import RunOptions, build_request
from shock.plugins.backends.simulator import SimulatedExecutor

TRACE = str(Path(__file__).parent.parent / "shock" / "data" / "traces" / "medium_test.trace")


def _request(policy: str = "max_min_fairness_perf", **options: Any) -> RunRequest:
    return build_request(
        RunOptions(policy=policy, trace=TRACE, cluster="v100=2,p100=2,k80=2", **options)
    )


@pytest.mark.parametrize(
    "policy",
    [
        "max_min_fairness_perf",
        "max_min_fairness",  # heterogeneity-agnostic: a random worker-type order each round
        "finish_time_fairness_perf",
        "fifo",
        "max_min_fairness_packed",  # pairs of jobs, with counters of their own
        "gandiva",
    ],
)
def test_a_run_resumed_from_its_saved_state_goes_on_as_if_never_stopped(policy: str) -> None:
    whole = Engine(_request(policy), DurableSimulation(), "simulator").run()
    crashed = DurableSimulation(crash_after=40)
    with pytest.raises(Crash):
        Engine(_request(policy), crashed, "simulator").run()
    state = crashed.saved[-1]
    assert state["rounds"] == 40  # saved as round 40 ended; round 41 never reported
    resumed_executor = DurableSimulation(resume=state)
    resumed = Engine(_request(policy), resumed_executor, "simulator").run()
    # The resumed run makes the uninterrupted run's decisions: every job completes when it
    # did there, in as many rounds and allocations.
    whole_done = {r.job_id: r.completion_s for r in whole.records}
    assert {r.job_id: r.completion_s for r in resumed.records} == pytest.approx(whole_done)
    assert resumed.metrics.rounds == whole.metrics.rounds
    assert resumed.metrics.allocations == whole.metrics.allocations
    assert resumed.metrics.preemptions == whole.metrics.preemptions
    assert resumed_executor.saved[0]["rounds"] == state["rounds"] + 1


@pytest.mark.parametrize("crash_after", [1, 2])
def test_a_restart_longer_than_a_round_goes_on_in_the_resumed_run(crash_after: int) -> None:
    # 900 s restarts in 360 s rounds: a run saved mid-restart resumes with what is left of it.
    options: dict[str, Any] = {"preemption_overhead_s": 900.0, "overhead_on_first_start": True}
    whole = Engine(_request("fifo", **options), DurableSimulation(), "simulator").run()
    crashed = DurableSimulation(crash_after=crash_after)
    with pytest.raises(Crash):
        Engine(_request("fifo", **options), crashed, "simulator").run()
    state = crashed.saved[-1]
    assert state["rounds_memory"]["restart_left"]  # some job is still restarting
    resumed = Engine(
        _request("fifo", **options), DurableSimulation(resume=state), "simulator"
    ).run()
    whole_done = {r.job_id: r.completion_s for r in whole.records}
    assert {r.job_id: r.completion_s for r in resumed.records} == pytest.approx(whole_done)


@pytest.mark.parametrize("policy", ["finish_time_fairness_perf", "shockwave", "fifo"])
def test_a_snapshot_restores_to_the_same_snapshot(policy: str) -> None:
    """Counters, clock, progress, records and the policy's memory all come back."""
    executor = DurableSimulation(crash_after=30)
    with pytest.raises(Crash):
        Engine(_request(policy), executor, "simulator").run()
    state = executor.saved[-1]
    assert state["jobs"] and state["policy"]["name"] == policy
    engine = Engine(_request(policy), DurableSimulation(), "simulator")
    mechanism = engine._prepare(engine.request.cluster)
    engine._restore(mechanism, state)
    engine.now = state["time_s"]
    again = json.loads(json.dumps(engine.snapshot()))
    assert again == state


def test_another_policys_or_a_broken_memory_is_set_aside(
    caplog: pytest.LogCaptureFixture,
) -> None:
    executor = DurableSimulation(crash_after=20)
    with pytest.raises(Crash):
        Engine(_request("finish_time_fairness_perf"), executor, "simulator").run()
    state = executor.saved[-1]
    engine = Engine(_request("fifo"), DurableSimulation(), "simulator")
    mechanism = engine._prepare(engine.request.cluster)
    fresh_fifo = engine.policy.for_run(0)
    _, policy = restore(state, mechanism, engine._by_id, engine.policy, fresh_fifo)
    assert policy is engine.policy and "starts afresh" in caplog.text
    broken = {**state, "policy": {"name": "fifo", "state": {"placed": 3}}}
    engine = Engine(_request("fifo"), DurableSimulation(), "simulator")
    mechanism = engine._prepare(engine.request.cluster)
    fresh = engine.policy.for_run(0)
    _, policy = restore(broken, mechanism, engine._by_id, engine.policy, fresh)
    assert policy is fresh
    # The run goes on with it, to the end.
    resumed = Engine(_request("fifo"), DurableSimulation(resume=broken), "simulator").run()
    assert resumed.unfinished_jobs == 0


class Scripted(SimulatedExecutor):
    """A measuring executor whose first report carries extra news."""

    capabilities = ExecutorCapabilities(simulates_jobs=False, measures_rates=True)

    def __init__(self, news: RoundReport) -> None:
        super().__init__()
        self.news: RoundReport | None = news
        self.engine: Engine | None = None
        self.seen: list[tuple[list[float], str, int]] = []

    def run_round(self, plan: RoundPlan) -> RoundReport:
        report = super().run_round(plan)
        if self.news is None:
            return report
        news, self.news = self.news, None
        return replace(
            report,
            rates=news.rates,
            batch_size_changes=news.batch_size_changes,
            stray=news.stray,
        )

    def save_state(self, state: dict[str, Any]) -> None:
        return None


def _one_job_request(job_type: str, steps: int, tmp_path: Path) -> RunRequest:
    trace = write_trace(tmp_path / "one.trace", [(job_type, steps)])
    return build_request(RunOptions(policy="fifo", trace=str(trace), cluster="v100=1"))


def test_measured_rates_and_batch_size_switches_reach_the_mechanism(tmp_path: Path) -> None:
    resnet_32, resnet_64 = "ResNet-18 (batch size 32)", "ResNet-18 (batch size 64)"
    request = _one_job_request(resnet_32, 100_000, tmp_path)
    news = RoundReport(
        0.0,
        (),
        rates=(MeasuredRate(resnet_32, 1, "v100", 40.0), MeasuredRate(resnet_64, 1, "v100", 22.0)),
        batch_size_changes=(BatchSizeChange(0, resnet_64, 40_000),),
    )
    seen: list[tuple[str, int, list[float]]] = []

    class Watch:
        @hookimpl
        def round_started(self, event: RoundStarted) -> None:
            state = engine.mechanism.active.get(0) if engine.mechanism else None
            if state is not None:
                seen.append((state.spec.job_type, state.total_steps, list(state.rates)))

    watch = Watch()
    request.registry.manager.register(watch)  # before the engine, which looks hooks up once
    try:
        engine = Engine(request, Scripted(news), "scripted")
        engine.run()
    finally:
        request.registry.manager.unregister(watch)
    prior_32 = request.table.throughput(resnet_32, 1, "v100")
    assert seen[0] == (resnet_32, 100_000, [prior_32])
    # After the first round: the job trains at batch size 64, at its measured rate.
    assert seen[1] == (resnet_64, 40_000, [22.0])


def test_late_progress_of_a_job_outside_the_round_is_credited(tmp_path: Path) -> None:
    request = _one_job_request("ResNet-18 (batch size 32)", 10**7, tmp_path)
    # Round 1 runs job 0 for a round; its report also says job 0 made all its steps
    # elsewhere (a run lost with its worker finished after all): it completes then.
    executor = Scripted(RoundReport(0.0, (), stray=(StrayProgress(0, 10**7, 5.0),)))
    result = Engine(request, executor, "scripted").run()
    assert result.metrics.rounds == 1 and result.unfinished_jobs == 0


def test_every_observer_event_fires() -> None:
    registry = default_registry()
    log = EventRecorder()
    registry.manager.register(log)
    try:
        request = build_request(
            RunOptions(trace=TRACE, cluster="v100=2,p100=2,k80=2"), registry=registry
        )
        result = Engine(request, SimulatedExecutor(), "simulator").run()
    finally:
        registry.manager.unregister(log)
    jobs = len(request.trace.jobs)
    assert log.kinds[0] == "RunStarted" and log.kinds[-1] == "RunFinished"
    assert log.kinds.count("JobArrived") == jobs == log.kinds.count("JobFinished")
    assert log.kinds.count("RoundStarted") == result.metrics.rounds
    assert log.kinds.count("RoundEnded") == result.metrics.rounds
    assert log.kinds.count("AllocationComputed") == result.metrics.allocations


class OrderRecorder(SimulatedExecutor):
    """Real jobs that carry out only the adaptation modes named; the orders it gets."""

    def __init__(self, native: frozenset[str]) -> None:
        super().__init__()
        self.capabilities = ExecutorCapabilities(simulates_jobs=False, native_adaptations=native)
        self.orders: list[tuple[int, int]] = []

    def run_round(self, plan: RoundPlan) -> RoundReport:
        self.orders.extend((o.job_id, o.batch_size) for o in plan.batch_size_orders)
        return super().run_round(plan)

    def save_state(self, state: dict[str, Any]) -> None:
        return None


def _dynamic_request(tmp_path: Path) -> RunRequest:
    """Five of Shockwave's dynamic jobs (accordion and gns)."""
    source = Path(TRACE).parent / "shockwave_220_multigpu_dynamic.trace"
    lines = [line for line in source.read_text().splitlines() if "\t1\t" in line][:5]
    trace = tmp_path / "dynamic.trace"
    trace.write_text("\n".join(lines) + "\n")
    return build_request(RunOptions(policy="fifo", trace=str(trace), cluster="v100=8"))


def test_the_engine_orders_batch_sizes_its_executors_jobs_do_not_adapt_themselves(
    tmp_path: Path,
) -> None:
    request = _dynamic_request(tmp_path)
    modes = {job.job_id: job.mode for job in request.trace.jobs}
    assert {"accordion", "gns"} <= set(modes.values())
    static_only = OrderRecorder(frozenset({"static"}))
    Engine(request, static_only, "orders").run()
    ordered = {job_id for job_id, _ in static_only.orders}
    assert ordered and {modes[job_id] for job_id in ordered} <= {"accordion", "gns"}
    # Each order is what the job's schedule says for an epoch, and not its own batch size.
    schedules = Engine(request, OrderRecorder(frozenset()), "orders")
    schedules._prepare(request.cluster)
    for job_id, size in static_only.orders:
        assert size in schedules.schedules[job_id].batch_sizes
    # Jobs that adapt by themselves get no orders.
    native = OrderRecorder(frozenset({"static", "accordion", "gns"}))
    Engine(_dynamic_request(tmp_path), native, "orders").run()
    assert native.orders == []


def test_a_resized_cluster_keeps_each_jobs_progress_and_counters() -> None:
    request = _request()
    engine = Engine(request, SimulatedExecutor(), "simulator")
    engine.executor.start(request, engine.jobs)
    mechanism = engine._prepare(request.cluster)
    engine._admit_arrived(mechanism, 0.0)
    now = 0.0
    for _ in range(3):
        assignments = mechanism.plan_round(now)
        plan = RoundPlan(1, now, now + 360.0, engine._plan_units(assignments, None))
        report = engine.executor.run_round(plan)
        engine._apply(report, assignments, plan)
        now = report.end_s
    engine.now = now
    before = engine.snapshot()
    smaller = Cluster({"v100": 2, "p100": 2}, {"v100": 8, "p100": 8})
    resized = engine._resize(smaller)
    after = engine.snapshot()
    assert resized is engine.mechanism and resized.worker_types == ("p100", "v100")
    assert [job["id"] for job in after["jobs"]] == [job["id"] for job in before["jobs"]]
    assert any(job["steps_done"] > 0 for job in before["jobs"])
    for was, now_is in zip(before["jobs"], after["jobs"], strict=True):
        assert now_is["steps_done"] == was["steps_done"]
        assert now_is["time_run_s"] == was["time_run_s"]
        assert now_is["counters"] == {w: was["counters"][w] for w in ("p100", "v100")}
    assert after["clock"]["worker_time"] == {
        w: before["clock"]["worker_time"][w] for w in ("p100", "v100")
    }
    assert after["stats"] == before["stats"]  # the old mechanism's counts carried over
