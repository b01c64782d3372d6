"""A job whose batch-size change leaves it no steps (`--adaptation-rules artifact-simulator`):
Shockwave's simulator does not see it complete; the job is given five more rounds in which it
does nothing (failed micro-tasks), each asking for a new allocation, and leaves at the start
of the fifth."""

from __future__ import annotations

import math

import pytest
from test_mechanism import make_mechanism

from shock.core.events import RoundStarted
from shock.core.hookspecs import hookimpl
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.throughputs import load_throughputs
from shock.core.trace import Trace
from shock.engine.epochs import steps_per_epoch
from shock.engine.runner import RunOptions, build_request, bundled_trace_path

WISR = str(bundled_trace_path().parent.parent / "shockwave_wisr_throughputs.json")
ROUND = 120.0
SMALL, LARGE = "ResNet-50 (batch size 16)", "ResNet-50 (batch size 128)"


class JobRounds:
    """The start time of every round that planned job 0."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    @hookimpl
    def round_started(self, event: RoundStarted) -> None:
        if any(0 in ids for ids, _, _ in event.assignments):
            self.starts.append(event.time)


def test_a_job_left_without_steps_runs_five_empty_rounds_then_leaves() -> None:
    # ResNet-50 from batch size 16 (Accordion): 128 is asked for once a round boundary finds
    # it past 9 epochs and carried out a round later. The job ends one step after that round,
    # so the change counts its begun (last) epoch as done: no steps are left.
    per_round = int(load_throughputs(WISR).throughput(SMALL, 1, "v100") * ROUND)
    asked = math.floor(9 * steps_per_epoch("ResNet-50", 16) / per_round) + 1
    changed_after = asked + 1  # rounds run before the change
    job = JobSpec(0, SMALL, changed_after * per_round + 1, mode="accordion")
    registry = default_registry()
    rounds = JobRounds()
    registry.manager.register(rounds)
    options = RunOptions(
        preset="shockwave",
        cluster="1:0:0",
        throughputs=WISR,
        preemption_overhead_s=0.0,
        adaptation_rules="artifact-simulator",
    )
    request = build_request(options, registry, trace=Trace((job,), "one job"))
    result = registry.get("backend", "simulator").run(request)
    assert len(rounds.starts) == changed_after + 5
    # Empty rounds take no time: the job leaves at the start of its fifth, when its last
    # round with steps ended.
    (record,) = result.records
    assert record.completion_s == pytest.approx(rounds.starts[-1])
    assert record.completion_s == pytest.approx(rounds.starts[changed_after])
    # More steps are done than the new total: the empty rounds do no (negative) steps and
    # take no time, so the GPU was busy exactly until then.
    assert result.metrics.utilization == pytest.approx(1.0)


def test_each_empty_round_asks_for_an_allocation_and_the_fifth_completes_the_job() -> None:
    mechanism = make_mechanism("1:0:0", policy="max_min_fairness")
    job = mechanism.admit(JobSpec(0, SMALL, 1000))
    mechanism.plan_round(0.0)
    mechanism.change_job_type(job, LARGE, 100, 100.0)
    job.empty_rounds_left = 5
    for empty_round in range(1, 6):
        assignments = mechanism.plan_round(empty_round * ROUND)
        assert [a.unit for a in assignments] == [job]
        assert not mechanism.need_allocation
        finished = mechanism.credit(assignments[0], 0, 0.0)
        assert finished == ([job] if empty_round == 5 else [])
        assert mechanism.need_allocation
    assert 0 not in mechanism.active

