"""The themis policy: its auction's incentives, its leases, its offers, and whole runs."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from feasibility import check_feasible
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from instances import generated_input

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.engine.metrics import finish_time_ratio
from shock.engine.runner import RunOptions, build_request
from shock.plugins.policies.themis.auction import Bid, proportional_fair, run_auction
from shock.plugins.policies.themis.options import ThemisOptions
from shock.plugins.policies.themis.policy import AuctionLog, JobView, Themis

EXACT = SolverSpec("highs", mip_gap=1e-9)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Whole arbiters on generated clusters: fewer, larger examples.
ARBITER_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# The auction on its own.


@st.composite
def auctions(draw: st.DrawFn) -> tuple[list[Bid], np.ndarray]:
    """2-4 bidders for 1-2 GPUs of each of 1-2 types, with rho values that improve on
    winning nothing (or not)."""
    types = draw(st.integers(1, 2))
    offered = np.array([draw(st.integers(1, 2)) for _ in range(types)], float)
    bids = []
    for job_id in range(draw(st.integers(2, 4))):
        gpus = draw(st.sampled_from([1, 1, 2]))
        without = draw(st.floats(1.0, 8.0))
        rho_with = {
            w: draw(st.floats(0.5, 9.0))
            for w in range(types)
            if gpus <= offered[w] and draw(st.booleans() | st.just(True))
        }
        bids.append(Bid(job_id, gpus, without, rho_with))
    return bids, offered


def utility(result_bundles: dict[int, int], kept: dict[int, float], truth: Bid) -> float:
    """What job `truth.job_id` gets, valued by its true rhos: 1 / rho of its outcome, times
    the share of its bundle it keeps (partial allocation's utility)."""
    column = result_bundles.get(truth.job_id)
    if column is None:
        return 1.0 / truth.rho_without
    return kept[truth.job_id] / truth.rho_with[column]


@SETTINGS
@given(auctions(), st.lists(st.sampled_from([0.05, 0.2, 0.5, 1.0, 2.0]) | st.floats(0.05, 5.0),
                            min_size=3, max_size=3))
def test_no_misreport_of_rho_raises_a_jobs_utility(
    instance: tuple[list[Bid], np.ndarray], factors: list[float]
) -> None:
    bids, offered = instance
    truth = bids[0]
    truthful = run_auction(bids, offered, EXACT)
    honest = utility(truthful.bundles, truthful.kept, truth)
    lie = Bid(
        truth.job_id,
        truth.gpus,
        truth.rho_without * factors[0],
        {w: rho * factors[1 + w] for w, rho in truth.rho_with.items()},
    )
    lied = run_auction([lie, *bids[1:]], offered, EXACT)
    assert utility(lied.bundles, lied.kept, truth) <= honest * (1 + 1e-7)


def test_inflating_a_bid_wins_the_bundle_but_not_the_utility() -> None:
    """Two jobs, one GPU. Job 1 truly gains more from it; job 0 claims its rho with the GPU
    would be 10x lower. It now wins, but keeps so small a share that it is worse off than
    losing truthfully (the check above can fail: without the hidden payment, c = 1, the lie
    would pay)."""
    honest = [Bid(0, 1, 2.0, {0: 1.5}), Bid(1, 1, 3.0, {0: 1.0})]
    offered = np.array([1.0])
    truthful = run_auction(honest, offered, EXACT)
    assert truthful.bundles == {1: 0}
    lied = run_auction([Bid(0, 1, 2.0, {0: 0.15}), honest[1]], offered, EXACT)
    assert lied.bundles == {0: 0}
    assert utility(lied.bundles, lied.kept, honest[0]) < utility(
        truthful.bundles, truthful.kept, honest[0]
    )
    assert utility(truthful.bundles, truthful.kept, honest[0]) < 1.0 / 1.5  # c = 1 would pay


@SETTINGS
@given(auctions())
def test_the_assignment_maximises_the_product_of_1_over_rho(
    instance: tuple[list[Bid], np.ndarray],
) -> None:
    """Against every assignment, enumerated: the solver's is proportional fair, and the
    payments are fractions in [0, 1]."""
    bids, offered = instance
    result = run_auction(bids, offered, EXACT)

    def welfare(choice: dict[int, int]) -> float:
        return sum(
            -math.log(b.rho_with[choice[b.job_id]] if b.job_id in choice else b.rho_without)
            for b in bids
        )

    best = -math.inf
    options = [[None, *sorted(b.rho_with)] for b in bids]
    for combo in np.ndindex(*(len(o) for o in options)):
        choice = {
            b.job_id: options[k][i] for k, (b, i) in enumerate(zip(bids, combo, strict=True))
            if options[k][i] is not None
        }
        used = np.zeros(len(offered))
        for b in bids:
            if b.job_id in choice:
                used[choice[b.job_id]] += b.gpus
        if np.all(used <= offered):
            best = max(best, welfare(choice))
    assert welfare(result.bundles) == pytest.approx(best, abs=1e-7)
    assert all(0.0 <= c <= 1.0 for c in result.kept.values())
    assert result.solves == 1 + len(result.bundles)


def test_the_pyomo_model_and_the_highs_fast_path_agree() -> None:
    rng = np.random.default_rng(4)
    for _ in range(5):
        bids = [
            Bid(j, int(rng.integers(1, 3)), float(rng.uniform(2, 6)),
                {w: float(rng.uniform(0.5, 4)) for w in range(2)})
            for j in range(5)
        ]  # fmt: skip
        offered = np.array([2.0, 3.0])
        _, fast = proportional_fair(bids, offered, EXACT)
        _, pyomo = proportional_fair(bids, offered, dataclasses.replace(EXACT, fast_path=False))
        assert fast == pytest.approx(pyomo, abs=1e-7)


# The arbiter: offers, leases, leftovers.


def test_rho_is_the_metrics_rho() -> None:
    """The projected rho uses the metric's formula: a job that ran alone at full speed since
    arrival, with N_avg = 2 on one GPU, is at rho = JCT / (2 T_alone)."""
    view = JobView(elapsed_s=50.0, remaining_steps=50.0, alone_s=100.0, best_rate=1.0,
                   contention=2.0)  # fmt: skip
    assert view.rho(1.0, total_gpus=1) == pytest.approx(100.0 / 200.0)
    assert view.rho(1.0, 1) == float(finish_time_ratio(100.0, 100.0, 2.0, 1))


@pytest.mark.parametrize(("knob", "expected"), [(0.0, 10), (0.5, 5), (0.8, 2), (0.999, 1)])
def test_the_fairness_knob_offers_the_worst_jobs(knob: float, expected: int) -> None:
    policy = Themis(ThemisOptions(fairness_knob=knob))
    rhos = {job_id: float(job_id % 7) + job_id / 100 for job_id in range(10)}
    offered = policy.offered_jobs(rhos)
    assert len(offered) == expected
    worst = sorted(rhos, key=lambda j: -rhos[j])[:expected]
    assert offered == worst


def _input(now: float, jobs: tuple[PolicyJob, ...], base: PolicyInput) -> PolicyInput:
    rows = {j.job_id: r for r, j in enumerate(base.jobs)}
    return dataclasses.replace(
        base,
        now=now,
        jobs=jobs,
        throughputs=base.throughputs[[rows[j.job_id] for j in jobs]],
    )


def test_with_f_near_1_only_the_worst_job_bids() -> None:
    base = generated_input(12, (2, 2, 2), seed=3, multi_gpu=False)
    log = AuctionLog()
    policy = Themis(ThemisOptions(fairness_knob=0.99), log).for_run(0)
    policy.allocate(base, EXACT)
    assert [r.bidders for r in log.records] == [1]
    log_all = AuctionLog()
    Themis(ThemisOptions(fairness_knob=0.0), log_all).for_run(0).allocate(base, EXACT)
    assert log_all.records[0].bidders == 12


def _waiting_but_idle(problem: PolicyInput, x: np.ndarray) -> list[str]:
    """Worker types with free capacity while a job that could run there has time left."""
    used = problem.scale_factors @ x
    idle = []
    for w, name in enumerate(problem.worker_types):
        free = problem.capacity[w] - used[w]
        if free <= 1e-6:
            continue
        for row, job in enumerate(problem.jobs):
            can_run = problem.throughputs[row, w] > 0 and job.scale_factor <= problem.capacity[w]
            if can_run and x[row].sum() < 1 - 1e-6:
                idle.append(f"{name}: {free:.3f} free, job {job.job_id} at {x[row].sum():.3f}")
    return idle


@ARBITER_SETTINGS
@given(
    st.integers(2, 30),
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 5)),
    st.integers(0, 1000),
    st.booleans(),
    st.sampled_from([0.0, 0.5, 0.8, 0.95]),
)
def test_no_gpu_idles_while_a_job_waits_and_the_allocation_is_feasible(
    jobs: int, capacity: tuple[int, int, int], seed: int, multi_gpu: bool, knob: float
) -> None:
    base = generated_input(jobs, capacity, seed, multi_gpu)
    policy = Themis(ThemisOptions(fairness_knob=knob)).for_run(seed)
    active = base.jobs
    for step in range(4):  # leases granted at different times, jobs leaving
        problem = _input(base.now + 300.0 * step, active, base)
        allocation = policy.allocate(problem, EXACT)
        check_feasible(problem, allocation)
        assert _waiting_but_idle(problem, allocation.fractions) == []
        active = active[1:] if step % 2 else active


def test_a_lease_holds_until_it_expires_unless_its_job_leaves() -> None:
    base = generated_input(16, (2, 2, 2), seed=7, multi_gpu=False)
    lease_s = 600.0
    policy = Themis(ThemisOptions(lease_s=lease_s)).for_run(0)
    first = policy.allocate(base, EXACT)
    granted = first.fractions.copy()
    held = {j for j, row in zip(first.keys, granted, strict=True) if row.sum() > 0}
    assert held and len(held) < len(base.jobs)  # some wait
    leaving = min(held)
    active = tuple(j for j in base.jobs if j.job_id != leaving)
    for t in (120.0, 240.0, 480.0, 599.0):
        problem = _input(base.now + t, active, base)
        allocation = policy.allocate(problem, EXACT)
        for row, job_id in enumerate(allocation.keys):
            before = granted[first.keys.index(job_id)]
            assert np.all(allocation.fractions[row] >= before - 1e-12), (t, job_id)
        # The leaving job's GPUs went to someone who held nothing.
        newly = [
            j for r, j in enumerate(allocation.keys)
            if allocation.fractions[r].sum() > 0 and j not in held
        ]  # fmt: skip
        assert newly
    after = policy.allocate(_input(base.now + lease_s, active, base), EXACT)
    moved = any(
        not np.allclose(after.fractions[r], granted[first.keys.index(j)])
        for r, j in enumerate(after.keys)
    )
    assert moved  # expired leases were auctioned again


def test_a_restored_arbiter_keeps_its_leases() -> None:
    base = generated_input(10, (1, 2, 1), seed=2, multi_gpu=True)
    policy = Themis().for_run(0)
    policy.allocate(base, EXACT)
    restored = Themis().for_run(0)
    restored.restore(json.loads(json.dumps(policy.snapshot())))
    later = _input(base.now + 200.0, base.jobs[2:], base)
    assert np.array_equal(
        restored.allocate(later, EXACT).fractions, policy.allocate(later, EXACT).fractions
    )
    with pytest.raises((KeyError, ValueError, TypeError)):
        Themis().restore({"leases": [{"job_id": 1}]})


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("fairness_knob=1", "fairness_knob must be in"),
        ("fairness_knob=-0.1", "fairness_knob must be in"),
        ("lease_s=0", "lease_s must be"),
        ("lease_s=abc", "expected float"),
        ("lease=5", "no option 'lease'"),
    ],
)
def test_bad_options_are_refused_by_name(option: str, message: str) -> None:
    key, _, value = option.partition("=")
    with pytest.raises(InputError, match=message):
        Themis().with_options({key: value})


def test_a_whole_run_on_the_bundled_trace_completes() -> None:
    registry = default_registry()
    options = RunOptions(policy="themis")
    request = build_request(options, registry)
    log = AuctionLog()
    request = dataclasses.replace(request, policy=Themis(request.policy.options, log))  # type: ignore[attr-defined]
    result = registry.get("backend", "simulator").run(request)
    assert result.unfinished_jobs == 0
    assert result.metrics.jobs == len(request.trace.jobs)
    assert log.records and all(r.solves == r.winners + 1 for r in log.records)
