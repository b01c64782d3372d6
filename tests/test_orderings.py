"""Ordering policies srtf, srsf, las, ftf, drf, tetris: feasibility and their orders."""

from __future__ import annotations

import numpy as np
import pytest
from feasibility import check_feasible
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.solver import SolverSpec

NAMES = ["fifo_skip", "srtf", "srsf", "las", "ftf", "drf", "tetris"]
MODELS = ["res18", "gnmt", "m5", "alexnet", "lstm"]


def policy(name: str) -> Policy:
    found: Policy = default_registry().get("policy", name)
    return found.for_run(0)


@st.composite
def problems(draw: st.DrawFn) -> PolicyInput:
    types = ("k80", "v100")[: draw(st.integers(1, 2))]
    count = draw(st.integers(0, 12))
    jobs = []
    for job_id in range(count):
        total = draw(st.integers(1, 10_000))
        jobs.append(
            PolicyJob(
                job_id=job_id,
                job_type=draw(st.sampled_from(MODELS)),
                scale_factor=draw(st.sampled_from([1, 2, 4, 8])),
                priority_weight=1.0,
                arrival_time=float(draw(st.integers(0, 1000))),
                total_steps=total,
                steps_done=float(draw(st.integers(0, total - 1))),
            )
        )
    rates = np.array(
        [[draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in types] for _ in jobs]
    ).reshape(len(jobs), len(types))
    capacity = np.array([float(draw(st.sampled_from([4, 8, 16]))) for _ in types])
    return PolicyInput(2000.0, tuple(jobs), types, capacity, rates)


def free_after(p: PolicyInput, allocation: Allocation) -> np.ndarray:
    result: np.ndarray = p.capacity - p.scale_factors @ allocation.fractions
    return result


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(problems())
def test_feasible_whole_types_and_no_fitting_job_left_out(name: str, p: PolicyInput) -> None:
    allocation = policy(name).allocate(p, SolverSpec())
    check_feasible(p, allocation)
    assert set(np.unique(allocation.fractions)) <= {0.0, 1.0}
    free = free_after(p, allocation)
    for row, job in enumerate(p.jobs):
        if allocation.fractions[row].sum() == 0:
            # Skipped only because it fits nowhere it can run.
            assert all(
                free[w] < job.scale_factor or p.throughputs[row, w] <= 0
                for w in range(len(p.worker_types))
            )


def single_type(jobs: list[PolicyJob], capacity: float) -> PolicyInput:
    rates = np.ones((len(jobs), 1))
    return PolicyInput(1000.0, tuple(jobs), ("v100",), np.array([capacity]), rates)


def job(
    job_id: int,
    total: int,
    done: float = 0.0,
    gpus: int = 1,
    model: str = "gnmt",
    arrival: float = 0.0,
    ran_s: float | None = None,
    speed: float = 1.0,
) -> PolicyJob:
    # At rate 1 a job has run as many seconds as steps it has done, unless told otherwise.
    ran = done if ran_s is None else ran_s
    return PolicyJob(job_id, model, gpus, 1.0, arrival, total, done, time_run_s=ran, speed=speed)


def running(p: PolicyInput, allocation: Allocation) -> set[int]:
    return {j.job_id for row, j in enumerate(p.jobs) if allocation.fractions[row].sum() > 0}


def test_srtf_runs_the_shortest_remaining() -> None:
    p = single_type([job(0, 1000), job(1, 100), job(2, 500, done=450)], capacity=2)
    assert running(p, policy("srtf").allocate(p, SolverSpec())) == {1, 2}


def test_srsf_weighs_remaining_time_by_gpus() -> None:
    p = single_type([job(0, 100, gpus=4), job(1, 300, gpus=1), job(2, 350, gpus=1)], capacity=4)
    # srtf takes the 4-GPU job (100 s); srsf counts its 400 GPU-seconds and runs the others.
    assert running(p, policy("srtf").allocate(p, SolverSpec())) == {0}
    assert running(p, policy("srsf").allocate(p, SolverSpec())) == {1, 2}


def test_las_runs_the_least_attained_gpu_time() -> None:
    jobs = [job(0, 1000, done=10, gpus=4), job(1, 1000, done=30), job(2, 1000, done=50)]
    p = single_type(jobs, capacity=4)
    # Job 0 attained 40 GPU-seconds, job 1 30, job 2 50.
    assert running(p, policy("las").allocate(p, SolverSpec())) == {1, 2}


def test_las_counts_time_run_not_work_done() -> None:
    # Job 0 ran 100 s at 3x (300 steps); job 1 ran 200 s at 1x (200 steps). Synergy's LAS
    # counts the time: job 0 has attained less.
    jobs = [job(0, 1000, done=300, ran_s=100, speed=3.0), job(1, 1000, done=200, ran_s=200)]
    assert running(
        single_type(jobs, capacity=1),
        policy("las").allocate(single_type(jobs, capacity=1), SolverSpec()),
    ) == {0}


def test_las_places_its_chosen_jobs_largest_first() -> None:
    jobs = [job(0, 100, done=1), job(1, 100, done=2, gpus=4), job(2, 100, done=3, gpus=2)]
    allocation = policy("las").allocate(single_type(jobs, capacity=8), SolverSpec())
    assert allocation.round_order == (1, 2, 0)


def test_srtf_uses_the_current_speed() -> None:
    # 1000 steps at 2.5x (400 s) are shorter than 500 steps at 1x.
    jobs = [job(0, 1000, speed=2.5), job(1, 500)]
    p = single_type(jobs, capacity=1)
    assert running(p, policy("srtf").allocate(p, SolverSpec())) == {0}


def test_fifo_skip_lets_a_later_job_past_one_that_does_not_fit() -> None:
    jobs = [job(0, 100, gpus=8, arrival=0.0), job(1, 100, gpus=1, arrival=5.0)]
    p = single_type(jobs, capacity=4)
    assert running(p, policy("fifo_skip").allocate(p, SolverSpec())) == {1}
    assert running(p, policy("fifo").allocate(p, SolverSpec())) == set()


def test_ftf_runs_the_job_furthest_behind() -> None:
    # Same remaining work; job 1 arrived long ago (waited), so it is further behind.
    p = single_type([job(0, 100, arrival=900.0), job(1, 100, arrival=0.0)], capacity=1)
    assert running(p, policy("ftf").allocate(p, SolverSpec())) == {1}


def test_ftf_synergy_order_runs_the_least_behind_first() -> None:
    p = single_type([job(0, 100, arrival=900.0), job(1, 100, arrival=0.0)], capacity=1)
    synergy = policy("ftf").with_options({"synergy_order": "true"})
    assert running(p, synergy.allocate(p, SolverSpec())) == {0}


@pytest.mark.parametrize(
    ("preset", "given", "synergy_order"),
    [
        ("synergy", (), True),
        ("synergy", ("synergy_order=false",), False),
        ("default", (), False),
    ],
)
def test_the_synergy_preset_runs_ftf_in_synergys_order(
    preset: str, given: tuple[str, ...], synergy_order: bool
) -> None:
    from shock.engine.runner import RunOptions, build_request

    request = build_request(RunOptions(policy="ftf", preset=preset, policy_options=given))
    assert request.policy.options.synergy_order is synergy_order  # type: ignore[attr-defined]


def test_drf_prefers_the_smaller_dominant_share() -> None:
    # res18's best case is 9 CPUs per GPU (3x the fair share): its dominant share is CPU.
    p = single_type([job(0, 100, model="res18"), job(1, 100, model="gnmt")], capacity=1)
    assert running(p, policy("drf").allocate(p, SolverSpec())) == {1}


def test_tetris_packs_then_prefers_short() -> None:
    p = single_type([job(0, 1000), job(1, 10)], capacity=1)
    assert running(p, policy("tetris").allocate(p, SolverSpec())) == {1}


def test_orderings_reallocate_every_round() -> None:
    assert all(policy(name).reallocate_every_round for name in NAMES)
    assert not policy("fifo").reallocate_every_round
