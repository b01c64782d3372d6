"""The same trace through the simulator and through the gRPC cluster plans the same rounds
and fires the same observer events: one engine decides on both, only the executor differs.

The cluster runs the stand-in job (tests/fake_job.py), which makes a fixed number of steps
per second, and the run's throughput table says exactly that rate, so both backends plan with
the same numbers. The first two rounds depend on nothing a wall clock can move (all jobs are
owed the same at first and are taken in id order; then the two that waited are owed a whole
round more), so they must agree. From the third round on every job has had one round, and
which of two equally owed pairs goes first is up to a few milliseconds of real round time.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from cluster_procs import write_trace
from event_recorder import EventRecorder
from fake_job import step_seconds

from shock.core.plugins import default_registry
from shock.core.run import ClusterRuntime
from shock.engine.runner import RunOptions, run

pytest.importorskip("grpc")

JOB_TYPE = "ResNet-18 (batch size 32)"
FAKE_JOB = Path(__file__).parent / "fake_job.py"


def _recorded(options: RunOptions) -> tuple[EventRecorder, object]:
    registry = default_registry()
    recorder = EventRecorder()
    registry.manager.register(recorder)
    try:
        result = run(options, registry)
    finally:
        registry.manager.unregister(recorder)
    return recorder, result


def test_the_simulator_and_the_grpc_cluster_plan_the_same_rounds(tmp_path: Path) -> None:
    # Four jobs on two GPUs: LAS runs two of them each round, taking turns.
    trace = write_trace(tmp_path / "four.trace", [(JOB_TYPE, 60)] * 4)
    rate = 1.0 / step_seconds(JOB_TYPE)
    table = tmp_path / "throughputs.json"
    table.write_text(json.dumps({"v100": {f"('{JOB_TYPE}', 1)": {"null": rate}}}))
    options = RunOptions(
        policy="max_min_fairness",
        trace=str(trace),
        cluster="v100=2",
        throughputs=str(table),
        round_length_s=1.0,
        window=(0, 2),  # measure jobs 0 and 1, and stop once they finish
        cluster_runtime=ClusterRuntime(
            job_command=(sys.executable, str(FAKE_JOB)),
            state_dir=str(tmp_path / "state"),
            heartbeat_s=0.2,
        ),
    )
    simulated, simulated_result = _recorded(options)
    real, real_result = _recorded(replace(options, backend="grpc"))

    # Each job runs 1.0 * rate = 20 steps a round in the simulator: none of the 60-step jobs
    # completes in the first two rounds, on either backend (real jobs lose start-up time).
    assert simulated.rounds[:2] == real.rounds[:2]
    assert [ids for ids, _, _ in simulated.rounds[0]] == [(0,), (1,)]
    assert [ids for ids, _, _ in simulated.rounds[1]] == [(2,), (3,)]
    for recorder in (simulated, real):
        assert recorder.kinds[0] == "RunStarted" and recorder.kinds[-1] == "RunFinished"
        assert recorder.kinds.count("JobArrived") == 4
        assert recorder.kinds.count("RoundStarted") == recorder.kinds.count("RoundEnded")
        assert "AllocationComputed" in recorder.kinds
    # The window's jobs are measured, and the run stops once they finished, on both
    # backends. In the simulator jobs 2 and 3 (a round behind) are then unfinished; real jobs
    # lose start-up time at every launch, so there they may have made it too.
    assert sorted(r.job_id for r in simulated_result.records) == [0, 1]  # type: ignore[attr-defined]
    for result in (simulated_result, real_result):
        finished = {r.job_id for r in result.records}  # type: ignore[attr-defined]
        assert {0, 1} <= finished
        assert result.metrics.jobs == 2  # type: ignore[attr-defined]
