"""Runs whose policy sees estimated throughputs: job types the table lacks, the table hidden
(Gavel's estimator experiment), and estimates replaced by what jobs report as they run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.throughputs import ThroughputTable, default_throughputs
from shock.engine.engine import Engine
from shock.engine.measured_throughputs import ThroughputEstimates
from shock.engine.runner import RunOptions, build_request, bundled_trace_path, run
from shock.engine.throughput_estimator import EstimatorOptions
from shock.plugins.backends.simulator import OracleSimulatedExecutor

CLUSTER = "v100=2,p100=2,k80=2"


def _line(job_type: str, steps: int, arrival: int) -> str:
    fields = [job_type, "python3 train.py", "mine", "--steps", "0", str(steps), "1", "1", "-1"]
    return "\t".join([*fields, str(arrival)])


def _trace(tmp_path: Path) -> Path:
    lines = [
        _line("MyModel (batch size 7)", 3000, 0),
        _line("ResNet-18 (batch size 32)", 4000, 0),
        _line("MyModel (batch size 7)", 2000, 100),
        _line("OtherNet (batch size 3)", 1500, 200),
        _line("LM (batch size 20)", 3000, 300),
    ]
    path = tmp_path / "mine.trace"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_unknown_job_types_stop_a_run_without_estimation(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="has no throughput for 'MyModel") as error:
        run(RunOptions(trace=str(_trace(tmp_path)), cluster=CLUSTER))
    assert "--estimate-throughputs unknown" in str(error.value)
    assert "mine.trace:1" in str(error.value)


def test_unknown_job_types_run_with_estimation_on(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    # What one brief run of MyModel measured: alone on a V100 only.
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"v100": {"('MyModel (batch size 7)', 1)": {"null": 12.5}}}))
    options = RunOptions(
        trace=trace, cluster=CLUSTER, estimate_throughputs="unknown", profile=str(profile)
    )
    request = build_request(options)
    table = request.table
    assert table.throughput("MyModel (batch size 7)", 1, "v100") == 12.5  # measured: kept
    assert table.throughput("MyModel (batch size 7)", 1, "k80") > 0  # estimated
    assert table.throughput("OtherNet (batch size 3)", 1, "p100") > 0  # nothing measured
    known = default_throughputs()
    assert table.throughput("LM (batch size 20)", 1, "k80") == known.throughput(
        "LM (batch size 20)", 1, "k80"
    )
    result = run(options)
    assert result.metrics.jobs == 5


@pytest.mark.parametrize("preset", ["default", "gavel"])
def test_the_table_hidden_with_everything_measured_runs_as_the_oracle(preset: str) -> None:
    # Gavel's own check: all job types are references and fully profiled, so the estimates
    # are the table and the run is the oracle's (with space sharing; Gavel's preset also
    # slows gangs spread over servers down, 3 of the jobs are 2-GPU gangs).
    base = RunOptions(
        policy="max_min_fairness_packed",
        cluster=CLUSTER,
        trace=str(bundled_trace_path("small_test.trace")),
        preset=preset,
    )
    oracle = run(base)
    estimated = run(replace(base, estimate_throughputs="all"))
    assert estimated.metrics.avg_jct_s == pytest.approx(oracle.metrics.avg_jct_s, rel=1e-9)
    assert estimated.metrics.makespan_s == pytest.approx(oracle.metrics.makespan_s, rel=1e-9)


def test_estimates_are_replaced_by_the_rates_jobs_report() -> None:
    """The table hidden and nothing measured up front: every job type starts at the most
    typical reference job's rates; after the run, every rate the policy sees for a type (or
    a pair of types sharing a GPU) that ran on a worker type is the measured (oracle) one."""
    options = RunOptions(
        policy="max_min_fairness_packed",
        cluster="v100=4,p100=4,k80=4",
        window=(0, 20),
        estimate_throughputs="all",
        estimator=EstimatorOptions(profiling_fraction=0.0, profile_isolated=False),
    )
    request = build_request(options)
    oracle = request.oracle
    assert oracle is not None
    keys = {(j.job_type, j.scale_factor) for j in request.trace.jobs}
    starts = {tuple(request.table.isolated[key].values()) for key in keys}
    assert len(starts) < len(keys)  # many types share one guess before they run
    executor = OracleSimulatedExecutor(oracle)
    engine = Engine(request, executor, "simulator")
    engine.run()
    mechanism = engine.mechanism
    assert mechanism is not None
    ran = {(job_type, scale, worker) for job_type, scale, worker in engine.rates.measured}
    assert len(ran) >= 10
    for job_type, scale, worker in ran:
        assert mechanism.table.throughput(job_type, scale, worker) == oracle.throughput(
            job_type, scale, worker
        )
    # Jobs shared GPUs too: those pairs' rates are the measured ones.
    assert engine.pair_rates
    for (first, second, worker), rates in engine.pair_rates.items():
        assert mechanism.table.pair_throughput(first, second, worker) == rates
        assert rates == oracle.pair_throughput(first, second, worker)


def test_refinement_converges_to_the_reported_rate() -> None:
    # A job estimated at 30 steps/s reports about 12 each round (noisy): the moving average
    # is within 2% of 12 after 15 reports.
    estimates = ThroughputEstimates(prior=None, smoothing=0.3, default_steps_per_s=30.0)
    noise = [0.3, -0.2, 0.1, -0.3, 0.2, 0.0, -0.1, 0.25, -0.15, 0.05, 0.1, -0.05, 0.0, 0.02, -0.02]
    for value in noise:
        estimates.observe("MyModel (batch size 7)", 1, "v100", 12.0 + value)
    assert estimates.estimate("MyModel (batch size 7)", 1, "v100") == pytest.approx(12.0, rel=0.02)


def test_bad_estimation_options_are_input_errors() -> None:
    with pytest.raises(InputError, match="--estimate-throughputs"):
        build_request(RunOptions(estimate_throughputs="sometimes"), default_registry())


def test_a_measuring_run_starts_unknown_types_from_the_estimator(tmp_path: Path) -> None:
    """A backend that measures rates (as a real cluster does) gets a job type the table lacks:
    it starts from Gavel's estimator (the most typical reference job's rates, not a flat
    1 step/s), and once it ran on a GPU type its rates elsewhere are the nearest reference
    job's scaled to that measurement."""
    table = default_throughputs()
    new = "MyModel (batch size 7)"
    lm = "LM (batch size 20)"
    oracle = ThroughputTable(
        isolated={**table.isolated, (new, 1): {w: 1.7 * table.throughput(lm, 1, w)
                                               for w in ("k80", "p100", "v100")}},
        pairs=table.pairs,
    )  # fmt: skip
    trace = _trace(tmp_path)
    request = build_request(RunOptions(cluster="v100=1,p100=1,k80=1", trace=str(trace),
                                       estimate_throughputs="unknown"))  # fmt: skip
    request = replace(request, table=table, oracle=oracle)
    engine = Engine(request, OracleSimulatedExecutor(oracle), "simulator")
    before = {w: engine.rates.estimate(new, 1, w) for w in ("k80", "p100", "v100")}
    assert all(rate > 1.0 for rate in before.values())
    engine.run()
    mechanism = engine.mechanism
    assert mechanism is not None
    measured = engine.rates.measured_of(new, 1)
    assert measured  # it ran somewhere
    for worker_type, rate in measured.items():
        assert rate == oracle.throughput(new, 1, worker_type)
    fallback = engine.rates.fallback
    assert fallback is not None
    expected = fallback((new, 1), measured)
    assert expected is not None
    for worker_type in ("k80", "p100", "v100"):
        assert mechanism.table.throughput(new, 1, worker_type) == pytest.approx(
            expected[worker_type]
        )
