"""Gavel's policy family beyond max-min fairness: finish-time fairness, minimum makespan,
maximum total throughput and throughput per dollar (with SLOs).

Optima are checked against independent formulations: scipy's linprog for the LPs, cvxpy +
ECOS for the convex originals of finish-time fairness and makespan."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from shock.core.errors import ShockError
from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob
from shock.core.solver import ProblemClass, SolverSpec, available_solvers
from shock.core.throughputs import default_throughputs
from shock.plugins.policies import cost, finish_time_fairness, max_sum_throughput
from shock.plugins.policies import min_total_duration as makespan_module
from shock.plugins.policies.rate_lp import agnostic_throughputs

cp = pytest.importorskip("cvxpy")

TABLE = default_throughputs()
REGISTRY = PluginRegistry(
    load_plugins(extra_plugins=[finish_time_fairness, makespan_module, max_sum_throughput, cost])
)
FTF = ("finish_time_fairness", "finish_time_fairness_perf")
MAKESPAN = ("min_total_duration", "min_total_duration_perf")
COST = (
    "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs",
)
ALL = (*FTF, *MAKESPAN, "max_sum_throughput_perf", *COST)
PRICES = {"k80": 0.9, "p100": 1.46, "v100": 2.48}  # $/GPU-hour
# Tolerance of the comparisons against cvxpy + ECOS (which often ends "optimal_inaccurate").
ECOS_REL = 1e-4


def policy(name: str) -> Policy:
    return REGISTRY.get("policy", name).for_run(0)


def problem(
    capacity: dict[str, int],
    throughputs: list[list[float]],
    remaining: list[float] | None = None,
    *,
    scale_factors: list[int] | None = None,
    weights: list[float] | None = None,
    elapsed: list[float] | None = None,
    slos: list[float | None] | None = None,
    now: float = 1000.0,
    total_steps: list[int] | None = None,
    prices: bool = True,
) -> PolicyInput:
    """A PolicyInput; `throughputs` rows follow the sorted worker types of `capacity`."""
    worker_types = tuple(sorted(capacity))
    m = len(throughputs)
    remaining = remaining if remaining is not None else [1000.0] * m
    total = total_steps or [int(np.ceil(r)) + 100 for r in remaining]
    elapsed = elapsed or [0.0] * m
    jobs = tuple(
        PolicyJob(
            job_id=i,
            job_type="A3C",
            scale_factor=(scale_factors or [1] * m)[i],
            priority_weight=(weights or [1.0] * m)[i],
            arrival_time=now - elapsed[i],
            total_steps=total[i],
            steps_done=total[i] - remaining[i],
            slo=(slos or [None] * m)[i],
        )
        for i in range(m)
    )
    return PolicyInput(
        now=now,
        jobs=jobs,
        worker_types=worker_types,
        capacity=np.array([capacity[w] for w in worker_types], float),
        throughputs=np.array(throughputs, float).reshape(m, len(worker_types)),
        prices=np.array([PRICES[w] for w in worker_types]) if prices else None,
    )


def table_problem(capacity: dict[str, int], job_types: list[str], **kwargs) -> PolicyInput:
    worker_types = sorted(capacity)
    rows = [[TABLE.throughput(t, 1, w) for w in worker_types] for t in job_types]
    return problem(capacity, rows, **kwargs)


def check_feasible(p: PolicyInput, allocation: Allocation) -> None:
    x = allocation.fractions
    assert allocation.keys == tuple(j.job_id for j in p.jobs)
    assert allocation.worker_types == p.worker_types
    assert x.shape == (len(p.jobs), len(p.worker_types))
    assert np.all(np.isfinite(x))
    assert np.all(x >= 0)
    assert np.all(x.sum(axis=1) <= 1 + 1e-9)
    assert np.all(p.scale_factors @ x <= p.capacity * (1 + 1e-7) + 1e-9)
    assert allocation.objective is not None


@st.composite
def policy_inputs(draw: st.DrawFn, max_jobs: int = 6, fresh: bool = False) -> PolicyInput:
    """Small instances; every job runs on at least one type, gangs of 1, 2 or 4 GPUs.
    `fresh`: jobs that just arrived, so an SLO asks for 1/slo of the job's best throughput
    (tight enough that the SLOs often cannot all be met)."""
    worker_types = draw(
        st.lists(st.sampled_from(["k80", "p100", "v100"]), min_size=1, max_size=3, unique=True)
    )
    capacity = {w: draw(st.integers(1, 6)) for w in sorted(worker_types)}
    m = draw(st.integers(1, max_jobs))
    rate = st.one_of(st.just(0.0), st.floats(0.5, 50.0))
    rows = []
    for _ in range(m):
        row = [draw(rate) for _ in worker_types]
        if max(row) == 0:
            row[draw(st.integers(0, len(row) - 1))] = draw(st.floats(0.5, 50.0))
        rows.append(row)
    remaining = draw(st.lists(st.integers(100, 10_000), min_size=m, max_size=m))
    elapsed = [0.0] * m if fresh else draw(st.lists(st.floats(0.0, 500.0), min_size=m, max_size=m))
    return problem(
        capacity,
        rows,
        remaining=[float(r) for r in remaining],
        total_steps=remaining if fresh else None,
        scale_factors=draw(st.lists(st.sampled_from([1, 2, 4]), min_size=m, max_size=m)),
        weights=draw(st.lists(st.sampled_from([1.0, 2.0, 5.0]), min_size=m, max_size=m)),
        elapsed=elapsed,
        slos=draw(st.lists(st.sampled_from([None, 1.2, 2.0, 10.0]), min_size=m, max_size=m)),
    )


COMPARE = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def solve_cvxpy(objective, constraints) -> float:
    problem_ = cp.Problem(objective, constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem_.solve(solver="ECOS")
    assert problem_.status in ("optimal", "optimal_inaccurate"), problem_.status
    return float(problem_.value)


def base_constraints(x, p: PolicyInput) -> list:
    return [x >= 0, cp.sum(x, axis=1) <= 1, p.scale_factors @ x <= p.capacity]


# --------------------------------------------------------------------------- registration


def test_every_policy_is_registered_as_an_lp() -> None:
    for name in ALL:
        registered = REGISTRY.get("policy", name)
        assert registered.name == name
        assert registered.problem_class is ProblemClass.LP
        assert registered.description
    aware = {name: REGISTRY.get("policy", name).heterogeneity_aware for name in ALL}
    assert aware == {
        name: name not in ("finish_time_fairness", "min_total_duration") for name in ALL
    }


@pytest.mark.parametrize("name", ALL)
def test_no_jobs_gives_an_empty_allocation(name: str) -> None:
    allocation = policy(name).allocate(problem({"v100": 2, "k80": 1}, []), SolverSpec())
    assert allocation.keys == ()
    assert allocation.fractions.shape == (0, 2)


# --------------------------------------------------------------------------- finish-time


def isolated_rates(p: PolicyInput, throughputs: np.ndarray) -> np.ndarray:
    """Throughput under Gavel's isolated allocation, written out independently."""
    m = len(p.jobs)
    total = np.zeros(m)
    for i, job in enumerate(p.jobs):
        share = [p.capacity[w] / m / job.scale_factor for w in range(len(p.worker_types))]
        cap = max(sum(share), 1.0)
        total[i] = sum(throughputs[i, w] * share[w] / cap for w in range(len(share)))
    return total


def weighted_ratios(
    p: PolicyInput, throughputs: np.ndarray, x: np.ndarray, attained: np.ndarray | None = None
) -> np.ndarray:
    """w_j (t_j + R_j / a_j(x)) / (C_j + R_j / iso_j)."""
    attained = np.zeros(len(p.jobs)) if attained is None else attained
    remaining = p.steps_remaining
    isolated_time = attained + remaining / isolated_rates(p, throughputs)
    rates = (throughputs * x).sum(axis=1)
    with np.errstate(divide="ignore"):
        left = np.where(rates > 0, remaining / rates, np.inf)
    return p.priority_weights * (p.times_since_arrival + left) / isolated_time


def reference_ftf(
    p: PolicyInput, throughputs: np.ndarray, attained: np.ndarray | None = None
) -> float:
    """min_x max_j w_j rho_j(x), the convex original (inv_pos), solved by ECOS."""
    attained = np.zeros(len(p.jobs)) if attained is None else attained
    remaining = p.steps_remaining
    isolated_time = attained + remaining / isolated_rates(p, throughputs)
    x = cp.Variable(throughputs.shape)
    rates = cp.sum(cp.multiply(throughputs, x), axis=1)
    rho = cp.multiply(
        p.priority_weights / isolated_time,
        p.times_since_arrival + cp.multiply(remaining, cp.inv_pos(rates)),
    )
    return solve_cvxpy(cp.Minimize(cp.max(rho)), base_constraints(x, p))


def v100_everywhere(p: PolicyInput) -> np.ndarray:
    """What the agnostic variants see: each job's V100 throughput on every type (its best
    throughput when there is no V100 or none is measured)."""
    t = p.throughputs.copy()
    for i in range(len(t)):
        if "v100" in p.worker_types and t[i, p.worker_types.index("v100")] > 0:
            t[i, :] = t[i, p.worker_types.index("v100")]
        else:
            t[i, :] = t[i].max()
    return t


@pytest.mark.parametrize("name", FTF)
@COMPARE
@given(p=policy_inputs())
def test_finish_time_fairness_is_feasible_and_optimal(name: str, p: PolicyInput) -> None:
    allocation = policy(name).allocate(p, SolverSpec())
    check_feasible(p, allocation)
    seen = p.throughputs if name.endswith("_perf") else v100_everywhere(p)
    ratios = weighted_ratios(p, seen, allocation.fractions)
    # The objective is the allocation's own worst ratio, and no job is above it.
    assert allocation.objective == pytest.approx(ratios.max(), rel=1e-9)
    optimum = reference_ftf(p, seen)
    assert allocation.objective == pytest.approx(optimum, rel=ECOS_REL)
    assert np.all(ratios <= optimum * (1 + ECOS_REL))


def test_priority_weights_lower_a_jobs_finish_time_ratio() -> None:
    # One GPU, T = 1, R = 1 and 3, fresh jobs: iso = 1/2, so the isolated times are 2 and 6
    # and rho = (1 / a0) / 2 and (3 / a1) / 6. With weights (2, 1): 1 / a0 = 1 / (2 a1) and
    # a0 + a1 = 1 give a0 = 2/3, a1 = 1/3 and a weighted ratio of 1.5 for both.
    p = problem({"v100": 1}, [[1.0], [1.0]], remaining=[1.0, 3.0], weights=[2.0, 1.0])
    allocation = policy("finish_time_fairness_perf").allocate(p, SolverSpec())
    np.testing.assert_allclose(allocation.fractions[:, 0], [2 / 3, 1 / 3], rtol=1e-6)
    assert allocation.objective == pytest.approx(1.5, rel=1e-6)
    # Unweighted (Gavel), both get half: rho = 1.
    even = dataclasses.replace(
        p, jobs=tuple(dataclasses.replace(j, priority_weight=1.0) for j in p.jobs)
    )
    allocation = policy("finish_time_fairness_perf").allocate(even, SolverSpec())
    np.testing.assert_allclose(allocation.fractions[:, 0], [0.5, 0.5], rtol=1e-6)
    assert allocation.objective == pytest.approx(1.0, rel=1e-6)


def test_finish_time_fairness_credits_isolated_time_across_calls() -> None:
    ftf = policy("finish_time_fairness_perf")
    capacity = {"v100": 1, "k80": 1}  # columns k80, v100
    rows = [[1.0, 4.0], [2.0, 3.0], [1.0, 1.0]]
    first = problem(capacity, rows[:2], remaining=[1000.0, 800.0], now=0.0)
    ftf.allocate(first, SolverSpec())
    assert ftf.attained_isolated_time == {0: 0.0, 1: 0.0}
    iso_first = isolated_rates(first, first.throughputs)

    # 100 s later job 0 has done 300 steps and job 1 none; job 2 arrives.
    second = problem(
        capacity,
        rows,
        remaining=[700.0, 800.0, 500.0],
        now=100.0,
        elapsed=[100.0, 100.0, 0.0],
        total_steps=[1000, 800, 500],
    )
    allocation = ftf.allocate(second, SolverSpec())
    attained = ftf.attained_isolated_time
    assert attained[0] == pytest.approx(300.0 / iso_first[0], rel=1e-12)
    assert attained[1] == 0.0 and attained[2] == 0.0
    credit = np.array([attained[0], 0.0, 0.0])
    optimum = reference_ftf(second, second.throughputs, credit)
    assert allocation.objective == pytest.approx(optimum, rel=ECOS_REL)
    ratios = weighted_ratios(second, second.throughputs, allocation.fractions, credit)
    assert allocation.objective == pytest.approx(ratios.max(), rel=1e-9)

    # Another 100 s: the credit adds up, measured at the second call's isolated rate.
    iso_second = isolated_rates(second, second.throughputs)
    third = problem(
        capacity,
        rows,
        remaining=[500.0, 700.0, 500.0],
        now=200.0,
        elapsed=[200.0, 200.0, 100.0],
        total_steps=[1000, 800, 500],
    )
    ftf.allocate(third, SolverSpec())
    attained = ftf.attained_isolated_time
    assert attained[0] == pytest.approx(300 / iso_first[0] + 200 / iso_second[0], rel=1e-12)
    assert attained[1] == pytest.approx(100 / iso_second[1], rel=1e-12)
    # A run starts from nothing.
    assert policy("finish_time_fairness_perf").attained_isolated_time == {}


CRAFTED = [
    "ResNet-18 (batch size 128)",
    "ResNet-18 (batch size 128)",
    "Recommendation (batch size 1024)",
]


def test_finish_time_fairness_aware_beats_agnostic_on_a_crafted_case() -> None:
    # ResNet-18 is 10x faster on the V100, Recommendation faster on the K80: the agnostic
    # variant sees no difference between the two GPUs and gives each ResNet K80 time.
    p = table_problem({"v100": 1, "k80": 1}, CRAFTED, remaining=[1e5, 1e5, 1e5])
    aware = policy("finish_time_fairness_perf").allocate(p, SolverSpec())
    agnostic = policy("finish_time_fairness").allocate(p, SolverSpec())
    true_aware = weighted_ratios(p, p.throughputs, aware.fractions).max()
    true_agnostic = weighted_ratios(p, p.throughputs, agnostic.fractions).max()
    assert true_aware == pytest.approx(aware.objective, rel=1e-9)
    assert true_aware < 0.8 * true_agnostic


def test_agnostic_throughputs_use_the_v100_or_else_the_best_type() -> None:
    p = problem({"k80": 1, "p100": 1, "v100": 1}, [[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])
    np.testing.assert_array_equal(agnostic_throughputs(p), [[3.0] * 3, [5.0] * 3])
    no_v100 = problem({"k80": 1, "p100": 1}, [[1.0, 2.0], [4.0, 0.5]])
    np.testing.assert_array_equal(agnostic_throughputs(no_v100), [[2.0] * 2, [4.0] * 2])
    allocation = policy("finish_time_fairness").allocate(no_v100, SolverSpec())
    check_feasible(no_v100, allocation)


@pytest.mark.parametrize("name", (*FTF, *MAKESPAN))
def test_finished_and_unrunnable_jobs_get_no_time(name: str) -> None:
    p = problem(
        {"v100": 2, "k80": 1},
        [[1.0, 2.0], [0.0, 0.0], [3.0, 1.0]],
        remaining=[500.0, 500.0, 0.0],
    )
    allocation = policy(name).allocate(p, SolverSpec())
    check_feasible(p, allocation)
    np.testing.assert_array_equal(allocation.fractions[1:], 0.0)
    assert allocation.fractions[0].sum() > 0.99
    assert np.isfinite(allocation.objective)


SOLVER_PATHS = [SolverSpec(fast_path=False)] + [
    SolverSpec(name=name)
    for name in ("ipopt", "scip", "gurobi", "cbc", "glpk")
    if name in available_solvers()
]


@pytest.mark.parametrize("spec", SOLVER_PATHS, ids=lambda s: f"{s.name}-{s.fast_path}")
@pytest.mark.parametrize("name", (*FTF, *MAKESPAN, "max_sum_throughput_perf", *COST))
def test_solver_paths_agree(name: str, spec: SolverSpec) -> None:
    # The same LPs (for FTF: the same bisection) through Pyomo vs HiGHS directly.
    p = problem(
        {"v100": 2, "p100": 1, "k80": 2},
        [[1.0, 2.0, 3.0], [4.0, 1.0, 2.0], [0.5, 0.0, 6.0], [2.0, 2.0, 2.0]],
        remaining=[3000.0, 1000.0, 2000.0, 500.0],
        scale_factors=[1, 2, 1, 1],
        weights=[1.0, 1.0, 2.0, 1.0],
        elapsed=[50.0, 0.0, 200.0, 10.0],
        slos=[2.0, None, 10.0, 1.2],
    )
    fast = policy(name).allocate(p, SolverSpec())
    other = policy(name).allocate(p, spec)
    check_feasible(p, other)
    assert other.objective == pytest.approx(fast.objective, rel=1e-5)


# --------------------------------------------------------------------------- makespan


def reference_makespan(p: PolicyInput, throughputs: np.ndarray) -> float:
    """min_x max_j R_j / a_j(x), by ECOS."""
    x = cp.Variable(throughputs.shape)
    rates = cp.sum(cp.multiply(throughputs, x), axis=1)
    finish = cp.multiply(p.steps_remaining, cp.inv_pos(rates))
    return solve_cvxpy(cp.Minimize(cp.max(finish)), base_constraints(x, p))


@pytest.mark.parametrize("name", MAKESPAN)
@COMPARE
@given(p=policy_inputs())
def test_min_total_duration_is_feasible_and_optimal(name: str, p: PolicyInput) -> None:
    allocation = policy(name).allocate(p, SolverSpec())
    check_feasible(p, allocation)
    seen = p.throughputs if name.endswith("_perf") else v100_everywhere(p)
    bound = allocation.objective
    # Every job finishes its remaining steps by the bound: a_j(x) >= R_j / T.
    rates = (seen * allocation.fractions).sum(axis=1)
    assert np.all(rates >= p.steps_remaining / bound * (1 - 1e-6))
    assert bound == pytest.approx(reference_makespan(p, seen), rel=ECOS_REL)


def test_makespan_of_two_jobs_on_one_gpu_is_their_total_work() -> None:
    p = problem({"v100": 1}, [[1.0], [2.0]], remaining=[100.0, 600.0])
    allocation = policy("min_total_duration_perf").allocate(p, SolverSpec())
    # 100 s + 300 s of work: both end at 400 s with 1/4 and 3/4 of the GPU.
    assert allocation.objective == pytest.approx(400.0, rel=1e-7)
    np.testing.assert_allclose(allocation.fractions[:, 0], [0.25, 0.75], rtol=1e-6)


def test_makespan_aware_beats_agnostic_on_a_crafted_case() -> None:
    p = table_problem({"v100": 1, "k80": 1}, CRAFTED, remaining=[1e5, 1e5, 1e5])
    aware = policy("min_total_duration_perf").allocate(p, SolverSpec())
    agnostic = policy("min_total_duration").allocate(p, SolverSpec())

    def true_makespan(x: np.ndarray) -> float:
        return float(np.max(p.steps_remaining / (p.throughputs * x).sum(axis=1)))

    assert true_makespan(aware.fractions) == pytest.approx(aware.objective, rel=1e-9)
    assert true_makespan(aware.fractions) < 0.8 * true_makespan(agnostic.fractions)


# --------------------------------------------------------------------------- throughput


def normalised(p: PolicyInput) -> np.ndarray:
    """w_j T[j, w] / max_v T[j, v], independently."""
    c = np.zeros_like(p.throughputs)
    for j, job in enumerate(p.jobs):
        best = p.throughputs[j].max()
        if best > 0:
            c[j] = job.priority_weight * p.throughputs[j] / best
    return c


def linprog_max(objective: np.ndarray, p: PolicyInput, extra_ub=()):
    """max objective.z over z = (x row-major, then any extra columns), subject to the shared
    constraints on x and the extra rows (row, bound) meaning row.z <= bound."""
    m, n = p.throughputs.shape
    size = len(objective)
    rows, rhs = [], []
    for j in range(m):
        row = np.zeros(size)
        row[j * n : (j + 1) * n] = 1.0
        rows.append(row)
        rhs.append(1.0)
    for w in range(n):
        row = np.zeros(size)
        row[w : m * n : n] = p.scale_factors
        rows.append(row)
        rhs.append(p.capacity[w])
    for row, bound in extra_ub:
        rows.append(row)
        rhs.append(bound)
    return linprog(
        -objective, A_ub=np.array(rows), b_ub=rhs, bounds=[(0, None)] * size, method="highs-ds"
    )


@COMPARE
@given(p=policy_inputs())
def test_max_sum_throughput_is_feasible_and_optimal(p: PolicyInput) -> None:
    allocation = policy("max_sum_throughput_perf").allocate(p, SolverSpec())
    check_feasible(p, allocation)
    c = normalised(p)
    assert allocation.objective == pytest.approx(float((c * allocation.fractions).sum()), rel=1e-9)
    result = linprog_max(c.ravel(), p)
    assert result.status == 0
    assert allocation.objective == pytest.approx(-result.fun, rel=1e-6, abs=1e-9)


def test_max_sum_throughput_prefers_normalised_throughput_per_gpu() -> None:
    # Two V100s: job 0 is a 1-GPU job, job 1 a 2-GPU gang, both on their best type, so the
    # 1-GPU job is worth twice as much per GPU-second.
    p = problem({"v100": 2}, [[10.0], [500.0]], scale_factors=[1, 2])
    allocation = policy("max_sum_throughput_perf").allocate(p, SolverSpec())
    # Job 0 gets all its time (1 GPU), job 1 the other GPU half the time.
    np.testing.assert_allclose(allocation.fractions[:, 0], [1.0, 0.5], atol=1e-6)
    assert allocation.objective == pytest.approx(1.5, rel=1e-6)


# --------------------------------------------------------------------------- cost


def ratio_of(p: PolicyInput, x: np.ndarray) -> float:
    dollars = float(sum(p.prices[w] * p.scale_factors @ x[:, w] for w in range(x.shape[1])))
    return float((normalised(p) * x).sum()) / dollars


def slo_needs(p: PolicyInput) -> dict[int, float]:
    """Required steps/s of the jobs whose deadline (arrival + slo x run time on the best type)
    is still ahead and reachable by the job alone on its best type (whole-GPU capacity)."""
    needs = {}
    for j, job in enumerate(p.jobs):
        best = p.throughputs[j].max()
        if job.slo is None:
            continue
        deadline = job.arrival_time + job.slo * job.total_steps / best
        if deadline <= p.now:
            continue
        need = p.steps_remaining[j] / (deadline - p.now)
        if need <= solo_rate(p, j):
            needs[j] = need
    return needs


def solo_rate(p: PolicyInput, j: int) -> float:
    """Best steps/s of job j alone: linprog over its own row."""
    n = len(p.worker_types)
    limits = [(0, min(1.0, p.capacity[w] / p.scale_factors[j])) for w in range(n)]
    result = linprog(-p.throughputs[j], A_ub=[np.ones(n)], b_ub=[1.0], bounds=limits)
    return float(-result.fun)


def reference_best_ratio(p: PolicyInput, needs: dict[int, float], level: float) -> float:
    """Charnes-Cooper by linprog: max c.y s.t. g(y) = 1, shared rows times s, SLO rows."""
    m, n = p.throughputs.shape
    size = m * n + 1
    c = np.concatenate([normalised(p).ravel(), [0.0]])
    ub = []
    for j in range(m):
        row = np.zeros(size)
        row[j * n : (j + 1) * n] = 1.0
        row[-1] = -1.0
        ub.append((row, 0.0))
    for w in range(n):
        row = np.zeros(size)
        row[w : m * n : n] = p.scale_factors
        row[-1] = -p.capacity[w]
        ub.append((row, 0.0))
    for j, need in needs.items():
        row = np.zeros(size)
        row[j * n : (j + 1) * n] = -p.throughputs[j] / need
        row[-1] = level
        ub.append((row, 0.0))
    cost_row = np.zeros(size)
    for j in range(m):
        cost_row[j * n : (j + 1) * n] = p.scale_factors[j] * p.prices
    result = linprog(
        -c,
        A_ub=np.array([r for r, _ in ub]),
        b_ub=[b for _, b in ub],
        A_eq=[cost_row],
        b_eq=[1.0],
        bounds=[(0, None)] * size,
        method="highs-ds",
    )
    assert result.status == 0, result.message
    return float(-result.fun)


def reference_slo_level(p: PolicyInput, needs: dict[int, float]) -> float:
    """The largest l <= 1 with a_j(x) >= l need_j for all SLO jobs."""
    m, n = p.throughputs.shape
    size = m * n + 1
    objective = np.zeros(size)
    objective[-1] = 1.0
    ub = []
    for j, need in needs.items():
        row = np.zeros(size)
        row[j * n : (j + 1) * n] = -p.throughputs[j] / need
        row[-1] = 1.0
        ub.append((row, 0.0))
    result = linprog_max(objective, p, extra_ub=ub)
    assert result.status == 0
    return min(1.0, float(-result.fun))


@pytest.mark.parametrize("name", COST)
@COMPARE
@given(p=st.one_of(policy_inputs(), policy_inputs(fresh=True)))
def test_cost_policies_are_feasible_and_optimal(name: str, p: PolicyInput) -> None:
    allocation = policy(name).allocate(p, SolverSpec())
    check_feasible(p, allocation)
    x = allocation.fractions
    # The objective is the fractional objective of the allocation it returns.
    assert allocation.objective == pytest.approx(ratio_of(p, x), rel=1e-9)
    needs = slo_needs(p) if name.endswith("_SLOs") else {}
    level = reference_slo_level(p, needs) if needs else 1.0
    for j, need in needs.items():  # every reachable SLO is met (or all fall short evenly)
        rate = float(p.throughputs[j] @ x[j])
        assert rate >= level * need * (1 - 1e-6)
    # linprog at a hair below the level (the policy keeps 1e-7), so that rounding cannot
    # make it infeasible; the reference is thus a little less constrained. Near the edge of
    # what the SLOs allow the ratio moves fast with the level, hence 1e-4 with SLOs.
    optimum = reference_best_ratio(p, needs, level * (1 - 1e-6))
    assert allocation.objective <= optimum * (1 + 1e-6)
    assert allocation.objective >= optimum * (1 - (1e-4 if needs else 1e-6))


def test_cost_policy_without_slos_runs_the_most_cost_efficient_pairs() -> None:
    # Columns (k80, v100) at $0.90 and $2.48. Job 0 is 2x faster on the V100 (k80 pays off:
    # 0.5/0.9 > 1/2.48); job 1 is 10x faster on the V100 (0.1/0.9 < 1/2.48). The best ratio
    # is job 0 on the K80 alone: 0.5 / 0.9.
    p = problem({"v100": 1, "k80": 1}, [[1.0, 2.0], [1.0, 10.0]])
    allocation = policy(COST[0]).allocate(p, SolverSpec())
    assert allocation.objective == pytest.approx(0.5 / 0.9, rel=1e-6)
    np.testing.assert_allclose(allocation.fractions, [[1.0, 0.0], [0.0, 0.0]], atol=1e-6)


def test_slos_force_more_expensive_allocations() -> None:
    # Same jobs; job 1 must do 9000 steps in 1000 s: 9 steps/s, 0.9 of the V100 (or some
    # of the K80), so the ratio drops.
    p = problem(
        {"v100": 1, "k80": 1},
        [[1.0, 2.0], [1.0, 10.0]],
        remaining=[1000.0, 9000.0],
        total_steps=[1000, 10000],
        elapsed=[0.0, 200.0],
        slos=[None, 1.2],
        now=200.0,
    )
    # Deadline of job 1: arrival 0 + 1.2 * 10000 / 10 = 1200 s; 1000 s left for 9000 steps.
    assert slo_needs(p) == {1: pytest.approx(9.0)}
    allocation = policy(COST[1]).allocate(p, SolverSpec())
    assert float(p.throughputs[1] @ allocation.fractions[1]) >= 9.0 * (1 - 1e-6)
    plain = policy(COST[0]).allocate(p, SolverSpec())
    assert allocation.objective < plain.objective


def test_missed_slos_become_best_effort() -> None:
    # Job 1's deadline (arrival + 1.2 x 100 s) passed long ago: no constraint, so the policy
    # behaves as without SLOs.
    p = problem(
        {"v100": 1, "k80": 1},
        [[1.0, 2.0], [1.0, 10.0]],
        remaining=[1000.0, 900.0],
        total_steps=[1000, 1000],
        elapsed=[0.0, 5000.0],
        slos=[None, 1.2],
        now=5000.0,
    )
    assert slo_needs(p) == {}
    with_slos = policy(COST[1]).allocate(p, SolverSpec())
    without = policy(COST[0]).allocate(p, SolverSpec())
    assert with_slos.objective == pytest.approx(without.objective, rel=1e-6)


def test_slos_that_cannot_all_be_met_fall_short_evenly() -> None:
    # One V100, two jobs that each need 0.8 of it (8000 steps at 10/s due in 1000 s): each
    # gets the same 10/16 of its need.
    p = problem(
        {"v100": 1},
        [[10.0], [10.0]],
        remaining=[8000.0, 8000.0],
        total_steps=[10000, 10000],
        slos=[1.0, 1.0],
    )
    needs = slo_needs(p)
    assert needs == {0: pytest.approx(8.0), 1: pytest.approx(8.0)}
    allocation = policy(COST[1]).allocate(p, SolverSpec())
    rates = p.throughputs[:, 0] * allocation.fractions[:, 0]
    np.testing.assert_allclose(rates, [5.0, 5.0], rtol=1e-6)


@pytest.mark.parametrize("name", COST)
def test_cost_policies_need_prices(name: str) -> None:
    p = problem({"v100": 1}, [[1.0]], prices=False)
    with pytest.raises(ShockError, match="needs prices"):
        policy(name).allocate(p, SolverSpec())
