"""finish_time_fairness and a job that still runs with no steps left (Shockwave's simulator keeps
one that a batch-size change left without steps): `jobs_without_steps=shockwave`, which the
shockwave preset sets, treats it as Shockwave's simulator does."""

from __future__ import annotations

import numpy as np
import pytest
from test_policies_family import check_feasible, policy, problem

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.policy import Policy, PolicyInput
from shock.core.solver import SolverSpec
from shock.engine.runner import RunOptions, build_request
from shock.plugins.policies.isolated import isolated_fractions

CAPACITY = {"v100": 2}
RATES = [[1.0], [10.0]]  # steps/s; two jobs on two GPUs: each job's isolated rate is its own


def ftf(jobs_without_steps: str | None = None) -> Policy:
    base = policy("finish_time_fairness")
    if jobs_without_steps is None:
        return base
    return base.with_options({"jobs_without_steps": jobs_without_steps}).for_run(0)


def at(now: float, remaining: list[float]) -> PolicyInput:
    return problem(
        CAPACITY, RATES, remaining=remaining, now=now, elapsed=[now, now],
        total_steps=[100, 100_000],
    )  # fmt: skip


@pytest.mark.parametrize("spec", [SolverSpec(), SolverSpec(fast_path=False)])
def test_a_job_with_none_left_counts_with_its_fixed_ratio(spec: SolverSpec) -> None:
    # Job 0 did its 100 steps (100 s alone) and job 1 10,000 (1,000 s alone) in 1,000 s.
    answers = {}
    for option in ("leave_out", "shockwave"):
        policy_ = ftf(option)
        policy_.allocate(at(0.0, [100.0, 100_000.0]), spec)
        later = at(1000.0, [0.0, 90_000.0])
        answers[option] = policy_.allocate(later, spec)
        check_feasible(later, answers[option])
    # Left out: no share, and job 1 alone sets the ratio (all its time: 10,000 / 10,000).
    assert answers["leave_out"].fractions[0].sum() == 0.0
    assert answers["leave_out"].objective == pytest.approx(1.0, rel=1e-5)
    # Shockwave's: its ratio 1,000 s / 100 s is the largest, and it gets a share.
    assert answers["shockwave"].objective == pytest.approx(10.0, rel=1e-5)
    assert answers["shockwave"].fractions[0].sum() > 0.0


def test_more_steps_done_than_the_total_gives_the_isolated_allocation() -> None:
    credited = {}
    for option in ("leave_out", "shockwave"):
        policy_ = ftf(option)
        policy_.allocate(at(0.0, [100.0, 100_000.0]), SolverSpec())
        over = at(1000.0, [-50.0, 90_000.0])
        allocation = policy_.allocate(over, SolverSpec())
        if option == "shockwave":
            x0 = isolated_fractions(over.capacity, over.scale_factors)
            np.testing.assert_array_equal(allocation.fractions, x0)
        else:
            assert allocation.fractions[0].sum() == 0.0
            assert allocation.fractions[1].sum() == pytest.approx(1.0)
        policy_.allocate(at(1100.0, [-50.0, 89_000.0]), SolverSpec())
        credited[option] = policy_.attained_isolated_time[1]  # type: ignore[attr-defined]
    # Job 1 did 10,000 then 1,000 steps at 10 steps/s alone.
    assert credited["leave_out"] == pytest.approx(1100.0)
    # Shockwave's kept the first call's record: the second credit counts from it again.
    assert credited["shockwave"] == pytest.approx(1000.0 + 1100.0)


def test_only_the_shockwave_preset_sets_the_option() -> None:
    registry = default_registry()
    for preset, expected in (("shockwave", "shockwave"), ("default", "leave_out")):
        for name in ("finish_time_fairness", "finish_time_fairness_perf"):
            request = build_request(RunOptions(policy=name, preset=preset), registry)
            assert request.policy.options.jobs_without_steps == expected  # type: ignore[attr-defined]


def test_a_bad_value_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="jobs_without_steps"):
        policy("finish_time_fairness").with_options({"jobs_without_steps": "drop"})
    with pytest.raises(InputError, match="takes no options"):
        policy("finish_time_fairness_packed").with_options({"jobs_without_steps": "shockwave"})
