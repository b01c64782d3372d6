"""Tiresias (2D-LAS, 2D-Gittins): queue transitions, preemption, the starvation knob and
Gittins indices worked out by hand; feasibility; options; snapshots; whole runs."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from durable_simulation import Crash, DurableSimulation
from feasibility import check_feasible
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.run import RunRequest
from shock.core.solver import SolverSpec
from shock.engine.engine import Engine
from shock.engine.runner import RunOptions, build_request, run
from shock.plugins.policies.gittins_index import ServiceDistribution, read_samples
from shock.plugins.policies.tiresias import Tiresias, TiresiasGittins

SOLVER = SolverSpec()
NAMES = ["tiresias", "tiresias_gittins"]


def policy(name: str, **options: str) -> Tiresias:
    found: Policy = default_registry().get("policy", name)
    configured = found.with_options(options) if options else found
    fresh = configured.for_run(0)
    assert isinstance(fresh, Tiresias)
    return fresh


@dataclass(frozen=True)
class Spec:
    job_id: int
    gpus: int
    arrival: float
    seconds: int  # run time alone at 1 step/s


def simulate(
    chosen_policy: Policy, specs: list[Spec], capacity: int, round_s: float, rounds: int
) -> list[tuple[float, set[int]]]:
    """Rounds of `round_s` on one worker type at 1 step/s: (round start, jobs that ran)."""
    jobs = {
        s.job_id: PolicyJob(s.job_id, "gnmt", s.gpus, 1.0, s.arrival, s.seconds, 0.0) for s in specs
    }
    history = []
    for index in range(rounds):
        now = index * round_s
        active = tuple(j for j in jobs.values() if j.arrival_time <= now)
        if not active:
            continue
        problem = PolicyInput(
            now, active, ("v100",), np.array([float(capacity)]), np.ones((len(active), 1))
        )
        allocation = chosen_policy.allocate(problem, SOLVER)
        check_feasible(problem, allocation)
        ran = {j.job_id for row, j in enumerate(active) if allocation.fractions[row].sum() > 0}
        history.append((now, ran))
        for job_id in ran:
            job = jobs[job_id]
            step = min(round_s, job.total_steps - job.steps_done)
            job = replace(job, steps_done=job.steps_done + step, time_run_s=job.time_run_s + step)
            if job.steps_done >= job.total_steps:
                del jobs[job_id]
            else:
                jobs[job_id] = job
    return history


def test_three_jobs_on_four_gpus_cross_the_threshold_as_worked_out() -> None:
    # Two queues cut at 200 GPU-seconds; 50 s rounds. Jobs 0 and 1 (2 GPUs each) take the 4
    # GPUs; job 2 (4 GPUs) waits. At t = 100 both have attained 2 x 100 = 200 GPU-s and drop
    # to Q1, so job 2 (still in Q0) preempts them. At t = 150 it has attained 4 x 50 = 200
    # and drops too; in Q1 jobs 0 and 1 entered at t = 100, before job 2 (t = 150), so they
    # preempt it.
    tiresias = policy("tiresias", queue_thresholds="200")
    specs = [Spec(0, 2, 0.0, 1000), Spec(1, 2, 0.0, 1000), Spec(2, 4, 0.0, 1000)]
    history = dict(simulate(tiresias, specs, capacity=4, round_s=50.0, rounds=5))
    assert history[0.0] == {0, 1}
    assert history[50.0] == {0, 1}
    assert history[100.0] == {2}  # jobs 0 and 1 demoted and preempted
    assert history[150.0] == {0, 1}  # job 2 demoted below them and preempted
    assert history[200.0] == {0, 1}
    assert [tiresias.queue(j) for j in (0, 1, 2)] == [1, 1, 1]


def test_queues_follow_gpu_seconds_not_seconds() -> None:
    # After 50 s a 4-GPU job has 200 GPU-seconds: past a 150 threshold that a 1-GPU job with
    # the same time is not.
    tiresias = policy("tiresias", queue_thresholds="150")
    specs = [Spec(0, 4, 0.0, 1000), Spec(1, 1, 0.0, 1000)]
    simulate(tiresias, specs, capacity=5, round_s=50.0, rounds=2)  # observed at t = 50
    assert (tiresias.queue(0), tiresias.queue(1)) == (1, 0)


def test_starvation_knob_promotes_a_waiting_job() -> None:
    # One GPU, Q0 below 100 GPU-s. Job 0 runs 0..100 s and drops to Q1; from t = 100 a new
    # 50 s job arrives every 50 s and keeps Q0 busy. With K = 2, job 0 has waited 2 x 100 s
    # at t = 300 and returns to Q0, ahead of the job arriving then (it arrived earlier).
    specs = [Spec(0, 1, 0.0, 10_000)] + [Spec(i, 1, 50.0 * (i + 1), 50) for i in range(1, 12)]

    def runs_of_job_0(chosen: Tiresias) -> list[float]:
        history = simulate(chosen, specs, capacity=1, round_s=50.0, rounds=12)
        return [now for now, ran in history if 0 in ran]

    assert runs_of_job_0(policy("tiresias", queue_thresholds="100")) == [0.0, 50.0]
    knob = policy("tiresias", queue_thresholds="100", starvation_factor="2")
    # Promoted at 300 (ahead of job 5, which arrived then), back in Q1 after 100 s more.
    assert runs_of_job_0(knob) == [0.0, 50.0, 300.0, 350.0]
    assert runs_of_job_0(policy("tiresias_gittins", queue_thresholds="100")) == [0.0, 50.0]


def test_gittins_index_of_a_small_distribution_by_hand() -> None:
    # Samples 1, 2, 4. At a = 0: Δ = 1 gives P = 1/3, E = (1 + 1 + 1)/3 = 1, G = 1/3;
    # Δ = 2 gives 2/3 over (1 + 2 + 2)/3, G = 2/5; Δ = 4 gives 1 over 7/3, G = 3/7 (the sup).
    dist = ServiceDistribution([4.0, 1.0, 2.0])
    assert dist.index(0.0, 1.0) == pytest.approx(1 / 3)
    assert dist.index(0.0, 2.0) == pytest.approx(2 / 5)
    assert dist.index(0.0, 1.5) == pytest.approx((1 / 3) / ((1 + 1.5 + 1.5) / 3))
    assert dist.index(0.0, None) == pytest.approx(3 / 7)
    # At a = 1 the job is one of {2, 4}: Δ = 1 gives (1/2) / 1, Δ = 3 gives 1 / 2.
    assert dist.index(1.0, 1.0) == pytest.approx(1 / 2)
    assert dist.index(1.0, None) == pytest.approx(1 / 2)
    # At a = 3 only the 4 is left: it ends within Δ = 1 for sure.
    assert dist.index(3.0, None) == pytest.approx(1.0)
    assert dist.index(4.0, None) == 0.0  # outlived every sample


def test_gittins_supremum_with_ties_in_the_samples() -> None:
    # Samples 1, 1, 3 at a = 0: Δ = 1 gives (2/3) / 1; Δ = 3 gives 1 / (5/3) = 3/5.
    assert ServiceDistribution([1.0, 1.0, 3.0]).index(0.0, None) == pytest.approx(2 / 3)


def test_gittins_orders_a_queue_where_las_and_fifo_would_not(tmp_path: Path) -> None:
    # Service samples 100, 200, 400 GPU-s; Δ = 100. A new job: P = 1/3, E = 100, G = 1/300.
    # A job with 100 GPU-s: one of {200, 400}, P = 1/2, E = 100, G = 1/200: it goes first,
    # although it arrived later and has attained more.
    samples = tmp_path / "service.txt"
    samples.write_text("# GPU-seconds\n100\n200\n\n400\n")
    jobs = (
        PolicyJob(0, "gnmt", 1, 1.0, 0.0, 1000, 0.0),
        PolicyJob(1, "gnmt", 1, 1.0, 10.0, 1000, 100.0, time_run_s=100.0),
    )
    problem = PolicyInput(200.0, jobs, ("v100",), np.array([1.0]), np.ones((2, 1)))
    gittins = policy(
        "tiresias_gittins", queue_thresholds="", gittins_quantum="100",
        service_samples=str(samples),
    )  # fmt: skip
    assert isinstance(gittins, TiresiasGittins)
    assert gittins.gittins_index(jobs[0]) == pytest.approx(1 / 300)
    assert gittins.gittins_index(jobs[1]) == pytest.approx(1 / 200)
    assert gittins.allocate(problem, SOLVER).fractions[:, 0].tolist() == [0.0, 1.0]
    fifo_in_queue = policy("tiresias", queue_thresholds="")
    assert fifo_in_queue.allocate(problem, SOLVER).fractions[:, 0].tolist() == [1.0, 0.0]


def test_gittins_history_is_the_total_service_of_the_jobs_seen() -> None:
    # At 2 steps/s: 100 steps x 1 GPU = 50 GPU-s; 400 steps x 2 GPUs = 400 GPU-s.
    jobs = (
        PolicyJob(0, "gnmt", 1, 1.0, 0.0, 100, 0.0),
        PolicyJob(1, "gnmt", 2, 1.0, 0.0, 400, 0.0),
    )
    problem = PolicyInput(0.0, jobs, ("v100",), np.array([4.0]), np.full((2, 1), 2.0))
    gittins = policy("tiresias_gittins")
    assert isinstance(gittins, TiresiasGittins)
    gittins.allocate(problem, SOLVER)
    assert gittins.distribution().samples.tolist() == [50.0, 400.0]
    # A later allocation without job 0 keeps it in the history.
    gittins.allocate(
        PolicyInput(10.0, jobs[1:], ("v100",), np.array([4.0]), np.full((1, 1), 2.0)), SOLVER
    )
    assert gittins.distribution().samples.tolist() == [50.0, 400.0]


def test_service_samples_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("10\nlots\n")
    with pytest.raises(InputError, match=r"bad.txt:2"):
        read_samples(str(bad))
    with pytest.raises(InputError, match="service samples"):
        policy("tiresias_gittins", service_samples=str(tmp_path / "missing.txt"))
    negative = tmp_path / "negative.txt"
    negative.write_text("-3\n")
    with pytest.raises(InputError, match=r"negative.txt:1.*> 0"):
        read_samples(str(negative))


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("tiresias", {"queue_thresholds": "7200,3250"}, "must increase"),
        ("tiresias", {"queue_thresholds": "a,b"}, "comma-separated"),
        ("tiresias", {"queue_thresholds": "0"}, "> 0"),
        ("tiresias", {"starvation_factor": "-1"}, "starvation_factor"),
        ("tiresias", {"gittins_quantum": "5"}, "no option 'gittins_quantum'"),
        ("tiresias_gittins", {"gittins_quantum": "-5"}, "gittins_quantum"),
        ("tiresias_gittins", {"starvation_factor": "x"}, "expected float"),
    ],
)
def test_bad_options_are_refused_clearly(name: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        policy(name, **options)


@st.composite
def problems(draw: st.DrawFn) -> PolicyInput:
    types = ("k80", "v100")[: draw(st.integers(1, 2))]
    jobs = []
    for job_id in range(draw(st.integers(0, 12))):
        total = draw(st.integers(1, 50_000))
        jobs.append(
            PolicyJob(
                job_id, "gnmt", draw(st.sampled_from([1, 2, 4, 8])), 1.0,
                float(draw(st.integers(0, 1000))), total,
                float(draw(st.integers(0, total - 1))),
                time_run_s=float(draw(st.integers(0, 20_000))),
            )
        )  # fmt: skip
    rates = np.array(
        [[draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) for _ in types] for _ in jobs]
    ).reshape(len(jobs), len(types))
    capacity = np.array([float(draw(st.sampled_from([4, 8, 16]))) for _ in types])
    return PolicyInput(20_000.0, tuple(jobs), types, capacity, rates)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(problems())
def test_allocations_are_feasible_and_leave_no_fitting_job_idle(name: str, p: PolicyInput) -> None:
    allocation = policy(name).allocate(p, SOLVER)
    check_feasible(p, allocation)
    assert set(np.unique(allocation.fractions)) <= {0.0, 1.0}
    assert np.all(p.throughputs[allocation.fractions == 1.0] > 0)
    free = p.capacity - p.scale_factors @ allocation.fractions
    for row, job in enumerate(p.jobs):
        if allocation.fractions[row].sum() == 0:
            assert all(
                free[w] < job.scale_factor or p.throughputs[row, w] <= 0
                for w in range(len(p.worker_types))
            )


@pytest.mark.parametrize("name", NAMES)
def test_a_restored_policy_goes_on_as_the_original(name: str) -> None:
    specs = [Spec(i, [1, 2, 4][i % 3], 40.0 * i, 300 + 170 * i) for i in range(9)]
    options = {"queue_thresholds": "200,900", "starvation_factor": "1.5"}
    original = policy(name, **options)
    whole = simulate(original, specs, capacity=4, round_s=60.0, rounds=40)
    # The same run, cut after 15 rounds: the rest driven by a restored copy.
    first = policy(name, **options)
    simulate(first, specs, capacity=4, round_s=60.0, rounds=15)
    snapshot = json.loads(json.dumps(first.snapshot()))
    restored = policy(name, **options)
    restored.restore(snapshot)
    assert json.dumps(restored.snapshot()) == json.dumps(first.snapshot())

    class Resumed(Policy):
        name = "resumed"
        description = "the first policy for 15 rounds, then the restored one"
        reallocate_every_round = True

        def __init__(self) -> None:
            self.calls = 0

        def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
            self.calls += 1
            chosen = replay if self.calls <= 15 else restored
            return chosen.allocate(problem, solver)

    replay = policy(name, **options)
    assert simulate(Resumed(), specs, capacity=4, round_s=60.0, rounds=40) == whole
    # Without the snapshot the rest of the run differs (the queues and waiting are lost).
    fresh_rest = policy(name, **options)

    class Forgetful(Resumed):
        def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
            self.calls += 1
            chosen = forgetful_first if self.calls <= 15 else fresh_rest
            return chosen.allocate(problem, solver)

    forgetful_first = policy(name, **options)
    assert simulate(Forgetful(), specs, capacity=4, round_s=60.0, rounds=40) != whole


@pytest.mark.parametrize("name", NAMES)
def test_a_whole_run_on_the_bundled_trace_completes(name: str) -> None:
    result = run(RunOptions(policy=name, preset="default"))
    assert result.unfinished_jobs == 0
    assert result.metrics.jobs == 96
    assert all(np.isfinite(r.completion_s) for r in result.records)
    assert result.metrics.preemptions > 0  # it is preemptive


def test_tiresias_beats_fifo_on_average_jct_on_the_bundled_trace() -> None:
    tiresias = run(RunOptions(policy="tiresias", preset="default"))
    fifo = run(RunOptions(policy="fifo", preset="default"))
    assert tiresias.metrics.avg_jct_s < fifo.metrics.avg_jct_s


@pytest.mark.parametrize("name", NAMES)
def test_the_engines_saved_state_carries_the_policys_queues(name: str) -> None:
    def request() -> RunRequest:
        return build_request(
            RunOptions(
                policy=name,
                policy_options=("queue_thresholds=2000,20000", "starvation_factor=4"),
                cluster="v100=4",
            )
        )

    crashed = DurableSimulation(crash_after=60)
    with pytest.raises(Crash):
        Engine(request(), crashed, "simulator").run()
    state = crashed.saved[-1]
    memory = state["policy"]["state"]["jobs"]
    assert state["policy"]["name"] == name
    assert {queue for queue, *_ in memory.values()} >= {0, 1}  # jobs have moved down
    # Restored into a new engine, the state (the policy's memory included) comes back whole.
    engine = Engine(request(), DurableSimulation(), "simulator")
    engine._restore(engine._prepare(engine.request.cluster), state)
    engine.now = state["time_s"]
    assert json.loads(json.dumps(engine.snapshot())) == state
    # And a run resumed from it finishes every job when the uninterrupted run does.
    whole = Engine(request(), DurableSimulation(), "simulator").run()
    resumed = Engine(request(), DurableSimulation(resume=state), "simulator").run()
    assert resumed.unfinished_jobs == 0
    assert {r.job_id: r.completion_s for r in resumed.records} == pytest.approx(
        {r.job_id: r.completion_s for r in whole.records}
    )
