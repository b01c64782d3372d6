"""Open executors: jobs submitted and cancelled while the engine runs (a service)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shock.core.executor import ExecutorCapabilities, Intake, OpenExecutor, RoundPlan, RoundReport
from shock.core.model import JobSpec
from shock.core.run import RunRequest
from shock.core.trace import Trace
from shock.engine.engine import Engine
from shock.engine.runner import RunOptions, build_request
from shock.plugins.backends.simulator import SimulatedExecutor

LONG = JobSpec(0, "ResNet-18 (batch size 32)", 40_000)
LATER = [
    JobSpec(1, "ResNet-50 (batch size 64)", 3_000, arrival_time=700.0),
    JobSpec(2, "LM (batch size 20)", 5_000, arrival_time=1_300.0),
    JobSpec(3, "Transformer (batch size 32)", 4_000, arrival_time=2_000.0, entity="bob"),
]


class OpenSimulation(SimulatedExecutor):
    """The simulator taking submissions: each job is handed over once the clock passed its
    arrival time; cancellations likewise; the run ends (intake None) once the clock passed
    `stop_at`, nothing is left to hand over and the engine had nothing to run."""

    capabilities = ExecutorCapabilities(simulates_jobs=True, accepts_submissions=True)

    def __init__(self, submissions: list[JobSpec], cancellations: list[tuple[float, int]],
                 stop_at: float) -> None:  # fmt: skip
        super().__init__()
        self.submissions = sorted(submissions, key=lambda j: j.arrival_time)
        self.cancellations = sorted(cancellations)
        self.stop_at = stop_at
        self.plans: list[RoundPlan] = []
        self.idle = False

    def run_round(self, plan: RoundPlan) -> RoundReport:
        self.plans.append(plan)
        self.idle = False
        return super().run_round(plan)

    def idle_until(self, time_s: float) -> None:
        self.idle = True
        super().idle_until(time_s)

    def intake(self) -> Intake | None:
        waiting = self.submissions or self.cancellations
        if self.idle and self.now >= self.stop_at and not waiting:
            return None
        arrived = tuple(j for j in self.submissions if j.arrival_time <= self.now)
        cancelled = tuple(job_id for at, job_id in self.cancellations if at <= self.now)
        self.submissions = self.submissions[len(arrived) :]
        self.cancellations = self.cancellations[len(cancelled) :]
        return Intake(arrived, cancelled)


def _request(jobs: tuple[JobSpec, ...], **options: Any) -> RunRequest:
    return build_request(
        RunOptions(policy="max_min_fairness_perf", cluster="v100=1,k80=1", **options),
        trace=Trace(jobs, source="test"),
    )


def test_the_contract_is_satisfied_by_the_open_test_executor() -> None:
    assert isinstance(OpenSimulation([], [], 0.0), OpenExecutor)


def test_jobs_submitted_while_the_cluster_is_busy_run_as_if_they_were_in_the_trace() -> None:
    traced = Engine(_request((LONG, *LATER)), SimulatedExecutor(), "simulator").run()
    executor = OpenSimulation(list(LATER), [], stop_at=0.0)
    submitted = Engine(_request((LONG,)), executor, "simulator").run()
    assert submitted.unfinished_jobs == 0 and len(traced.records) == 4
    assert [(r.job_id, r.arrival_s, r.completion_s) for r in submitted.records] == [
        (r.job_id, r.arrival_s, r.completion_s) for r in traced.records
    ]


def test_an_open_run_goes_on_without_jobs_until_the_executor_stops_it() -> None:
    executor = OpenSimulation([replace(LATER[0], arrival_time=5_000.0)], [], stop_at=9_000.0)
    result = Engine(_request(()), executor, "simulator").run()
    assert [r.job_id for r in result.records] == [1]
    assert result.records[0].arrival_s == 5_000.0
    assert executor.now >= 9_000.0


def test_a_cancelled_job_gets_no_more_gpus_and_no_record() -> None:
    cancel_at = 1_000.0
    executor = OpenSimulation(list(LATER), [(cancel_at, 0)], stop_at=0.0)
    result = Engine(_request((LONG,)), executor, "simulator").run()
    assert sorted(r.job_id for r in result.records) == [1, 2, 3]
    assert result.unfinished_jobs == 0
    planned_after = [
        plan for plan in executor.plans
        if plan.start_s >= cancel_at and any(0 in u.job_ids for u in plan.units)
    ]  # fmt: skip
    assert planned_after == []
    # Its GPU went to others: job 1 arrived before the cancellation and finishes sooner.
    busy = Engine(
        _request((LONG,)), OpenSimulation(list(LATER), [], stop_at=0.0), "simulator"
    ).run()
    finish = {r.job_id: r.completion_s for r in result.records}
    assert finish[2] < {r.job_id: r.completion_s for r in busy.records}[2]


def test_a_job_cancelled_before_it_was_admitted_never_runs() -> None:
    # Handed over with its cancellation, as a service does when both come in one round.
    executor = OpenSimulation(list(LATER), [(LATER[2].arrival_time, 3)], stop_at=0.0)
    result = Engine(_request((LONG,)), executor, "simulator").run()
    assert sorted(r.job_id for r in result.records) == [0, 1, 2]
    assert all(3 not in u.job_ids for plan in executor.plans for u in plan.units)


def test_a_submitted_job_of_a_type_no_other_job_had_gets_its_rates() -> None:
    new_type = JobSpec(1, "CycleGAN", 2_000, arrival_time=100.0)
    executor = OpenSimulation([new_type], [], stop_at=0.0)
    result = Engine(_request((LONG,)), executor, "simulator").run()
    assert sorted(r.job_id for r in result.records) == [0, 1]
