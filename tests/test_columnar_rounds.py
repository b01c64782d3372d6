"""A round planned as columns (the simulator's path for rounds of jobs alone) makes the run a
round of planned units makes: the same records, metrics and timeline, to the last digit."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from results_documents import comparable

from shock.core.errors import ShockError
from shock.core.executor import ColumnarExecutor, ColumnProgress, RoundColumns
from shock.core.results import RunResult
from shock.core.run import RunRequest
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.engine import Engine
from shock.engine.runner import RunOptions, build_request
from shock.plugins.backends.simulator import SimulatedExecutor
from shock.traces.generator import WorkloadConfig, generate_jobs
from shock.traces.synergy_generator import SynergyWorkload, generate_synergy_jobs


class CountingColumns(SimulatedExecutor):
    """The simulator, counting the rounds it was given as columns."""

    def __init__(self) -> None:
        super().__init__()
        self.column_rounds = 0

    def run_round_columns(self, plan: RoundColumns) -> ColumnProgress:
        self.column_rounds += 1
        return super().run_round_columns(plan)


class GrantsSeen(CountingColumns):
    """Counts the grants its columnar rounds carry."""

    def __init__(self) -> None:
        super().__init__()
        self.grants_seen = 0

    def run_round_columns(self, plan: RoundColumns) -> ColumnProgress:
        assert len(plan.grants) == len(plan.job_ids)
        self.grants_seen += sum(grant is not None for grant in plan.grants)
        return super().run_round_columns(plan)


class UnitsOnly:
    """The simulator, not declaring columnar rounds: the engine plans every round as units."""

    def __init__(self) -> None:
        self._inner = SimulatedExecutor()
        self.capabilities = replace(self._inner.capabilities, columnar_rounds=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class ClaimsColumns(UnitsOnly):
    """Declares columnar rounds without taking them."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = replace(self.capabilities, columnar_rounds=True)

    def __getattr__(self, name: str) -> Any:
        if name == "run_round_columns":
            raise AttributeError(name)
        return super().__getattr__(name)


def _trace(jobs: int, multi_gpu: bool, rate: float = 6.0, duration: float | None = None) -> Trace:
    config = WorkloadConfig(
        num_jobs=jobs,
        jobs_per_hour=rate,
        seed=3,
        multi_gpu=multi_gpu,
        fixed_duration_s=duration,
    )
    return Trace(tuple(generate_jobs(config, default_throughputs())), "generated", "gavel")


def _request(trace: Trace, **options: Any) -> RunRequest:
    lost_time_received = options.pop("lost_time_received", True)
    request = build_request(RunOptions(**options), trace=trace)
    mechanism = replace(request.config.mechanism, overhead_counts_as_received=lost_time_received)
    return replace(request, config=replace(request.config, mechanism=mechanism))


def _run(trace: Trace, executor: Any, options: dict[str, Any]) -> tuple[RunResult, Engine]:
    engine = Engine(_request(trace, **options), executor, "simulator")
    return engine.run(), engine


def _same_state(one: Engine, other: Engine) -> None:
    """The mechanisms' time counters and totals, bit for bit."""
    first, second = one.mechanism, other.mechanism
    assert first is not None and second is not None
    assert first.worker_time == second.worker_time
    first.counters.flush()
    second.counters.flush()
    assert np.array_equal(first.counters.block, second.counters.block)
    assert one.busy_gpu_seconds == other.busy_gpu_seconds


RUNS = {
    "gavel preset, gangs": (
        True,
        {"policy": "max_min_fairness_perf", "preset": "gavel", "cluster": "8:8:8"},
    ),
    "restart overhead, consolidated gangs": (
        True,
        {
            "policy": "max_min_fairness_perf",
            "cluster": "8:8:8",
            "preemption_overhead_s": 20.0,
            "overhead_on_first_start": True,
            "window": (20, 80),
        },
    ),
    "restart overhead, not counted as received": (
        True,
        {
            "policy": "max_min_fairness_perf",
            "preset": "gavel",
            "cluster": "8:8:8",
            "preemption_overhead_s": 30.0,
            "lost_time_received": False,
        },
    ),
    "finish-time fairness": (False, {"policy": "finish_time_fairness_perf", "cluster": "4:4:4"}),
    "fifo, agnostic": (False, {"policy": "fifo", "cluster": "4:4:4"}),
    "heterogeneity-agnostic (random type order)": (
        True,
        {"policy": "max_min_fairness", "cluster": "8:8:8"},
    ),
}


def test_many_short_jobs_sum_their_time_in_plan_order() -> None:
    # Jobs that end inside their rounds hold their GPUs for uneven times: the per-type totals
    # are then sums whose last digits depend on the order of addition.
    trace = _trace(300, multi_gpu=False, rate=400.0, duration=1000.0)
    options = {"policy": "max_min_fairness_perf", "preset": "gavel", "cluster": "24:24:24"}
    columns = CountingColumns()
    by_columns, engine = _run(trace, columns, dict(options))
    by_units, units_engine = _run(trace, UnitsOnly(), dict(options))
    assert columns.column_rounds == by_columns.metrics.rounds
    assert comparable(by_columns) == comparable(by_units)
    _same_state(engine, units_engine)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_columns_and_units_make_the_same_run(name: str) -> None:
    multi_gpu, options = RUNS[name]
    trace = _trace(120, multi_gpu)
    columns = CountingColumns()
    by_columns, engine = _run(trace, columns, dict(options))
    by_units, units_engine = _run(trace, UnitsOnly(), dict(options))
    assert isinstance(columns, ColumnarExecutor)
    # Every round ran as columns (none of these runs has pairs, grants or adaptation).
    assert columns.column_rounds == by_columns.metrics.rounds > 100
    assert comparable(by_columns) == comparable(by_units)
    _same_state(engine, units_engine)


def test_rounds_with_pairs_are_planned_as_units() -> None:
    trace = _trace(60, multi_gpu=False)
    options = {"policy": "max_min_fairness_packed", "cluster": "4:4:4"}
    columns = CountingColumns()
    by_columns, engine = _run(trace, columns, options)
    by_units, units_engine = _run(trace, UnitsOnly(), options)
    assert columns.column_rounds < by_columns.metrics.rounds
    assert comparable(by_columns) == comparable(by_units)
    _same_state(engine, units_engine)


def test_an_executor_declaring_columns_it_cannot_take_is_refused() -> None:
    request = _request(_trace(5, multi_gpu=False), policy="fifo", cluster="1:1:1")
    with pytest.raises(ShockError, match="declares columnar rounds"):
        Engine(request, ClaimsColumns(), "odd")


@pytest.mark.parametrize("placement", ["proportional", "tune"])
def test_synergy_rounds_with_grants_go_as_columns(placement: str) -> None:
    # CPU and memory grants scale each job's rate; the columns carry the grants too.
    workload = SynergyWorkload(200, jobs_per_hour=60.0, multi_gpu=True, seed=5)
    trace = Trace(tuple(generate_synergy_jobs(workload)), "synergy", "synergy")
    options = {
        "policy": "fifo",
        "preset": "synergy",
        "cluster": "synergy-128",
        "placement": placement,
    }
    columns = GrantsSeen()
    by_columns, engine = _run(trace, columns, dict(options))
    by_units, units_engine = _run(trace, UnitsOnly(), dict(options))
    assert columns.column_rounds == by_columns.metrics.rounds > 50
    assert columns.grants_seen > 0
    assert comparable(by_columns) == comparable(by_units)
    _same_state(engine, units_engine)
