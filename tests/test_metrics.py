"""Run metrics on hand-made schedules, and the results document."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from shock.core.results import (
    INLINE_SCHEMA_VERSION,
    UNFAIR_RHO,
    JobRecord,
    RunCounters,
    RunResult,
)
from shock.engine.metrics import (
    average_contention,
    compute_metrics,
    ftf_rhos,
    linear_percentile,
)
from shock.results.document import version_1_document

# Three jobs:
#   A: [0, 10), alone 5 s     B: [5, 15), alone 10 s     C: [20, 50), alone 10 s
# In the system: 1 job on [0, 5), 2 on [5, 10), 1 on [10, 15), 0 on [15, 20), 1 on [20, 50).
# N_A = (5*1 + 5*2) / 10 = 1.5, N_B = (5*2 + 5*1) / 10 = 1.5, N_C = 1.
RECORDS = (
    JobRecord(job_id=0, arrival_s=0.0, completion_s=10.0, isolated_runtime_s=5.0),
    JobRecord(job_id=1, arrival_s=5.0, completion_s=15.0, isolated_runtime_s=10.0),
    JobRecord(job_id=2, arrival_s=20.0, completion_s=50.0, isolated_runtime_s=10.0, scale_factor=2),
)
COUNTERS = RunCounters(
    busy_gpu_seconds=45.0,
    preemptions=3,
    lease_extensions=2,
    placements=8,
    rounds=7,
    allocations=4,
    solver_seconds=0.25,
)


def test_jct_property() -> None:
    assert [r.jct_s for r in RECORDS] == [10.0, 10.0, 30.0]


def test_average_contention_by_hand() -> None:
    assert average_contention(RECORDS).tolist() == pytest.approx([1.5, 1.5, 1.0])


def test_average_contention_back_to_back_jobs() -> None:
    records = [JobRecord(0, 0.0, 10.0, 10.0), JobRecord(1, 10.0, 20.0, 10.0)]
    assert average_contention(records).tolist() == pytest.approx([1.0, 1.0])


def test_average_contention_nested_jobs() -> None:
    # Long job [0, 40) with a short job [10, 20) inside it. In the system:
    # [0,10): 1, [10,20): 2, [20,40): 1 -> long: (10 + 20 + 20) / 40 = 1.25; short: 2.
    records = [JobRecord(0, 0.0, 40.0, 1.0), JobRecord(1, 10.0, 20.0, 1.0)]
    assert average_contention(records).tolist() == pytest.approx([1.25, 2.0])


def test_average_contention_counts_unfinished_jobs() -> None:
    records = [JobRecord(0, 0.0, 10.0, 10.0)]
    # A job still queued from t=5 until the run stopped at t=30.
    assert average_contention(records, unfinished=[(5.0, 30.0)]).tolist() == pytest.approx([1.5])


def test_average_contention_zero_lifetime_and_empty() -> None:
    records = [JobRecord(0, 5.0, 5.0, 1.0), JobRecord(1, 0.0, 10.0, 1.0)]
    contention = average_contention(records)
    assert contention[0] == 1.0
    assert contention[1] == pytest.approx(1.0)
    assert average_contention([]).shape == (0,)


def test_ftf_rho_formula() -> None:
    # rho = jct / (alone * max(1, N / G))
    one_gpu = ftf_rhos(RECORDS, total_gpus=1)
    assert one_gpu.tolist() == pytest.approx([10 / (5 * 1.5), 10 / (10 * 1.5), 30 / 10])
    two_gpus = ftf_rhos(RECORDS, total_gpus=2)  # N/G <= 1: no fair slowdown
    assert two_gpus.tolist() == pytest.approx([2.0, 1.0, 3.0])


def test_ftf_rho_infinite_without_isolated_runtime() -> None:
    rho = ftf_rhos([JobRecord(0, 0.0, 10.0, 0.0)], total_gpus=1)
    assert math.isinf(rho[0])


def test_compute_metrics_by_hand() -> None:
    metrics, rhos = compute_metrics(RECORDS, total_gpus=1, counters=COUNTERS, wall_s=1.5)
    jcts = [10.0, 10.0, 30.0]
    assert metrics.jobs == 3
    assert metrics.avg_jct_s == pytest.approx(50 / 3)
    # numpy's linear interpolation on sorted JCTs [10, 10, 30]
    assert metrics.p50_jct_s == pytest.approx(10.0)
    assert metrics.p90_jct_s == pytest.approx(10 + 0.8 * 20)
    assert metrics.p99_jct_s == pytest.approx(10 + 0.98 * 20)
    assert metrics.p90_jct_s == pytest.approx(float(np.percentile(jcts, 90)))
    assert metrics.makespan_s == 50.0
    assert metrics.utilization == pytest.approx(45.0 / (1 * 50.0))
    assert rhos.tolist() == pytest.approx([4 / 3, 2 / 3, 3.0])
    assert metrics.worst_ftf_rho == pytest.approx(3.0)
    assert metrics.unfair_fraction == pytest.approx(2 / 3)
    assert metrics.preemptions == 3
    assert metrics.lease_extension_share == pytest.approx(2 / 8)
    assert (metrics.rounds, metrics.allocations) == (7, 4)
    assert metrics.solver_seconds == 0.25
    assert metrics.wall_s == 1.5


def test_makespan_starts_at_first_arrival() -> None:
    records = [JobRecord(0, 100.0, 160.0, 60.0), JobRecord(1, 130.0, 200.0, 70.0)]
    metrics, _ = compute_metrics(records, total_gpus=4, counters=RunCounters(200.0), wall_s=0)
    assert metrics.makespan_s == 100.0
    assert metrics.utilization == pytest.approx(200.0 / (4 * 100.0))


def test_window_filters_by_job_id() -> None:
    metrics, rhos = compute_metrics(
        RECORDS, total_gpus=1, counters=COUNTERS, wall_s=0, window=(1, 3)
    )
    assert metrics.jobs == 2
    assert metrics.avg_jct_s == pytest.approx(20.0)
    assert metrics.p50_jct_s == pytest.approx(20.0)
    assert metrics.worst_ftf_rho == pytest.approx(3.0)
    assert metrics.unfair_fraction == pytest.approx(1 / 2)
    # Every job's rho, computed with all jobs (A's contention includes B).
    assert rhos.tolist() == pytest.approx([4 / 3, 2 / 3, 3.0])


def test_window_end_is_exclusive() -> None:
    metrics, _ = compute_metrics(RECORDS, total_gpus=1, counters=COUNTERS, wall_s=0, window=(0, 2))
    assert metrics.jobs == 2
    assert metrics.avg_jct_s == pytest.approx(10.0)
    assert metrics.worst_ftf_rho == pytest.approx(4 / 3)
    assert metrics.unfair_fraction == pytest.approx(1 / 2)


def test_empty_window() -> None:
    metrics, rhos = compute_metrics(
        RECORDS, total_gpus=1, counters=COUNTERS, wall_s=0, window=(10, 20)
    )
    assert metrics.jobs == 0
    assert metrics.avg_jct_s == 0.0
    assert metrics.worst_ftf_rho == 0.0
    assert metrics.unfair_fraction == 0.0
    assert len(rhos) == 3


def test_no_records() -> None:
    metrics, rhos = compute_metrics([], total_gpus=8, counters=RunCounters(), wall_s=0.1)
    assert metrics.jobs == 0
    assert metrics.makespan_s == 0.0
    assert metrics.utilization == 0.0
    assert metrics.lease_extension_share == 0.0
    assert rhos.shape == (0,)


@pytest.mark.parametrize(("completion", "unfair"), [(105.0, 0.0), (106.0, 1.0), (100.0, 0.0)])
def test_unfair_threshold_is_strict(completion: float, unfair: float) -> None:
    records = [JobRecord(0, 0.0, completion, 100.0)]
    metrics, rhos = compute_metrics(records, total_gpus=1, counters=RunCounters(), wall_s=0)
    assert rhos[0] == pytest.approx(completion / 100.0)
    assert metrics.unfair_fraction == unfair


def test_unfair_threshold_value() -> None:
    assert UNFAIR_RHO == 1.05
    rho = ftf_rhos([JobRecord(0, 0.0, 105.0, 100.0)], total_gpus=1)[0]
    assert rho == UNFAIR_RHO  # exactly at the threshold: not unfair


def test_unfinished_jobs_lower_rho() -> None:
    records = [JobRecord(0, 0.0, 10.0, 10.0)]
    metrics, rhos = compute_metrics(
        records, total_gpus=1, counters=RunCounters(), wall_s=0, unfinished=[(0.0, 10.0)]
    )
    assert rhos.tolist() == pytest.approx([0.5])  # N = 2 on one GPU
    assert metrics.unfair_fraction == 0.0


# --------------------------------------------------------------------------- results document


def _result(records=RECORDS, total_gpus: int = 1) -> RunResult:
    metrics, rhos = compute_metrics(records, total_gpus=total_gpus, counters=COUNTERS, wall_s=2.0)
    return RunResult(
        policy="fifo",
        backend="simulator",
        solver="highs",
        trace="t.trace",
        cluster="v100=1",
        preset="default",
        metrics=metrics,
        records=tuple(records),
        rhos=rhos,
        unfinished_jobs=1,
    )


def test_document_keys() -> None:
    document = _result().to_document()
    assert set(document) == {
        "schema_version",
        "policy",
        "backend",
        "solver",
        "trace",
        "cluster",
        "preset",
        "placement",
        "adaptation_rules",
        "metrics",
        "unfinished_jobs",
        "jobs",
    }
    assert document["schema_version"] == INLINE_SCHEMA_VERSION
    assert (document["policy"], document["backend"], document["solver"]) == (
        "fifo",
        "simulator",
        "highs",
    )
    assert (document["trace"], document["cluster"], document["preset"]) == (
        "t.trace",
        "v100=1",
        "default",
    )
    assert document["unfinished_jobs"] == 1


def test_document_metrics() -> None:
    result = _result()
    metrics = result.to_document()["metrics"]
    assert isinstance(metrics, dict)
    assert {
        "jobs",
        "avg_jct_s",
        "makespan_s",
        "p50_jct_s",
        "p90_jct_s",
        "p99_jct_s",
        "utilization",
        "worst_ftf_rho",
        "unfair_fraction",
        "preemptions",
        "wall_s",
    } <= set(metrics)
    assert metrics == asdict(result.metrics)
    assert metrics["jobs"] == 3
    assert metrics["makespan_s"] == 50.0
    assert metrics["preemptions"] == 3


def test_document_jobs() -> None:
    jobs = _result().to_document()["jobs"]
    assert isinstance(jobs, list)
    assert [set(job) for job in jobs] == [
        {"id", "arrival_s", "completion_s", "jct_s", "ftf_rho"}
    ] * 3
    assert [job["id"] for job in jobs] == [0, 1, 2]
    assert jobs[2] == {
        "id": 2,
        "arrival_s": 20.0,
        "completion_s": 50.0,
        "jct_s": 30.0,
        "ftf_rho": pytest.approx(3.0),
    }
    assert all(type(job["ftf_rho"]) is float for job in jobs)


def _strict_loads(text: str) -> object:
    def reject(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=reject)


def test_write_json(tmp_path: Path) -> None:
    result = _result()
    path = tmp_path / "nested" / "dir" / "out.json"
    result.write_json(path)
    loaded = _strict_loads(path.read_text())
    assert loaded["schema_version"] == 2  # type: ignore[index]
    # The same content as the inline document, whichever layout is on disk.
    assert version_1_document(path) == json.loads(json.dumps(result.to_document()))
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]  # no temporary left


def test_write_json_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("old")
    _result().write_json(path)
    assert _strict_loads(path.read_text())["metrics"]["jobs"] == 3  # type: ignore[index]


def test_write_json_is_standard_json_with_infinite_rho(tmp_path: Path) -> None:
    records = (JobRecord(0, 0.0, 10.0, 0.0),)
    path = tmp_path / "out.json"
    _result(records).write_json(path)
    _strict_loads(path.read_text())


def test_linear_percentile_is_numpys_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    samples = [
        np.array([42.0]),
        np.array([3.0, 1.0]),
        np.array([5.0, 5.0, 5.0, 7.0]),
        np.array([2.0, np.nan, 1.0]),
        *(rng.exponential(3600.0, int(n)) for n in rng.integers(1, 500, 300)),
        *(rng.integers(0, 4, int(n)) * 1800.0 for n in rng.integers(1, 60, 100)),
        *(rng.lognormal(8.0, 2.0, int(n)) for n in rng.integers(1, 500, 100)),
    ]
    for values in samples:
        ordered = np.sort(values)
        for q in (0, 12.5, 50, 90, 99, 99.9, 100):
            expected = float(np.percentile(values, q))
            got = linear_percentile(ordered, q)
            if math.isnan(expected):
                assert math.isnan(got)
            else:
                assert got.hex() == expected.hex(), (len(values), q)
