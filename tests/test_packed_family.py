"""Space-sharing variants of finish-time fairness and of throughput per dollar under SLOs.

Optimality is checked with scipy: no allocation over the same units reaches a slightly better
objective (the LP at that objective is infeasible)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from feasibility import check_packed_feasible
from instances import WORKER_TYPES, generated_input
from scipy.optimize import linprog

from shock.core.errors import ShockError
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.plugins.policies.cost import slo_targets
from shock.plugins.policies.isolated import isolated_fractions
from shock.plugins.policies.units import Units, job_units

TABLE = default_throughputs()
INSTANCES = {
    "scarce": (24, (1, 2, 1), 3, False),
    "gangs": (16, (4, 4, 4), 1, True),
    "roomy": (8, (4, 4, 4), 5, False),
}


def instance(name: str) -> PolicyInput:
    return generated_input(*INSTANCES[name])


def policy(name: str) -> Policy:
    return default_registry().get("policy", name).for_run(0)


def unit_rates(p: PolicyInput, allocation_keys: tuple, fractions: np.ndarray) -> np.ndarray:
    """Each job's steps/s under an allocation with pairs, from the table directly."""
    rates = np.zeros(len(p.jobs))
    row_of = {job.job_id: r for r, job in enumerate(p.jobs)}
    for key, x in zip(allocation_keys, fractions, strict=True):
        if isinstance(key, int):
            rates[row_of[key]] += p.throughputs[row_of[key]] @ x
            continue
        a, b = (p.jobs[row_of[k]] for k in key)
        pair = np.array(
            [
                TABLE.pair_throughput((a.job_type, a.scale_factor), (b.job_type, b.scale_factor), w)
                for w in WORKER_TYPES
            ]
        )
        if a.job_type == b.job_type:
            pair[:] = pair.mean(axis=1, keepdims=True)
        rates[row_of[key[0]]] += pair[:, 0] @ x
        rates[row_of[key[1]]] += pair[:, 1] @ x
    return rates


# --------------------------------------------------------------------------- finish-time fairness


def ftf_terms(p: PolicyInput) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t_j, R_j, D_j, counted) of a first call (no attained time yet), written out here."""
    x0 = isolated_fractions(p.capacity, p.scale_factors)
    iso = (p.throughputs * x0).sum(axis=1)
    remaining = p.steps_remaining
    counted = (remaining > 0) & (iso > 0)
    horizon = np.where(counted, remaining / np.where(iso > 0, iso, 1) / p.priority_weights, 1)
    return p.times_since_arrival, remaining, horizon, counted


@pytest.mark.parametrize("name", list(INSTANCES))
def test_packed_finish_time_fairness_is_feasible_and_optimal(name: str) -> None:
    p = instance(name)
    allocation = policy("finish_time_fairness_packed").allocate(p, SolverSpec())
    check_packed_feasible(p, allocation)
    elapsed, remaining, horizon, counted = ftf_terms(p)
    rates = unit_rates(p, allocation.keys, allocation.fractions)
    ratios = (elapsed + remaining / rates) / horizon
    assert allocation.objective == pytest.approx(ratios[counted].max(), rel=1e-9)
    # Pairs only add options: never worse than the unpacked optimum.
    unpacked = policy("finish_time_fairness_perf").allocate(p, SolverSpec()).objective
    assert unpacked is not None and allocation.objective <= unpacked * (1 + 1e-6)
    # No allocation over the same units reaches a ratio 1e-6 lower.
    units = job_units(p, packed=True)
    rho = allocation.objective * (1 - 1e-6)
    demand = remaining / (rho * horizon - elapsed)
    progress = units.progress_matrix(np.ones(len(p.jobs))).toarray()[counted]
    resources = np.vstack([units.time_matrix().toarray(), units.capacity_matrix().toarray()])
    if np.any(rho * horizon[counted] <= elapsed[counted]):
        return  # that rho is below a job's elapsed share: infeasible outright
    result = linprog(
        np.zeros(units.num_columns),
        A_ub=np.vstack([resources, -progress]),
        b_ub=np.concatenate([np.ones(len(p.jobs)), units.capacity, -demand[counted]]),
        bounds=(0, None),
        method="highs",
    )
    assert result.status == 2, f"a better allocation exists: {result.message}"


def test_packing_lowers_the_worst_finish_time_ratio_when_gpus_are_scarce() -> None:
    p = instance("scarce")
    packed = policy("finish_time_fairness_packed").allocate(p, SolverSpec()).objective
    unpacked = policy("finish_time_fairness_perf").allocate(p, SolverSpec()).objective
    assert packed is not None and unpacked is not None
    assert packed < 0.95 * unpacked
    assert any(
        isinstance(k, tuple)
        for k in policy("finish_time_fairness_packed").allocate(p, SolverSpec()).keys
    )


def test_packed_finish_time_fairness_credits_isolated_time_across_calls() -> None:
    p = instance("roomy")
    ftf = policy("finish_time_fairness_packed")
    ftf.allocate(p, SolverSpec())
    assert ftf.attained_isolated_time == {job.job_id: 0.0 for job in p.jobs}
    later = replace(
        p,
        now=p.now + 100.0,
        jobs=tuple(replace(j, steps_done=j.steps_done + 10) for j in p.jobs),
    )
    ftf.allocate(later, SolverSpec())
    assert all(v > 0 for v in ftf.attained_isolated_time.values())


# --------------------------------------------------------------------------- cost with SLOs

COST_PACKED = "max_sum_throughput_normalized_by_cost_packed_SLOs"


@pytest.mark.parametrize("name", list(INSTANCES))
def test_packed_cost_with_slos_is_feasible_and_optimal(name: str) -> None:
    p = instance(name)
    assert p.prices is not None
    allocation = policy(COST_PACKED).allocate(p, SolverSpec())
    check_packed_feasible(p, allocation)
    rates = unit_rates(p, allocation.keys, allocation.fractions)
    best = p.throughputs.max(axis=1)
    normalised = float((p.priority_weights * rates / best).sum())
    gang = {job.job_id: job.scale_factor for job in p.jobs}
    dollars = sum(
        float(p.prices @ x) * gang[k if isinstance(k, int) else k[0]]
        for k, x in zip(allocation.keys, allocation.fractions, strict=True)
    )
    assert allocation.objective == pytest.approx(normalised / dollars, rel=1e-9)
    unpacked = policy("max_sum_throughput_normalized_by_cost_perf_SLOs").allocate(p, SolverSpec())
    assert unpacked.objective is not None
    assert allocation.objective >= unpacked.objective * (1 - 1e-6)

    # Independent check (scipy): the SLOs' common level, then no x meeting them at that level
    # reaches a ratio 1e-5 above the policy's.
    units = job_units(p, packed=True)
    rows, required = slo_targets(p)
    progress = units.progress_matrix(np.ones(len(p.jobs))).toarray()
    slo = progress[rows] / required[:, None]
    resources = np.vstack([units.time_matrix().toarray(), units.capacity_matrix().toarray()])
    bounds = np.concatenate([np.ones(len(p.jobs)), units.capacity])
    c = units.num_columns
    level = 1.0
    if len(rows):
        lp = linprog(
            np.concatenate([np.zeros(c), [-1.0]]),
            A_ub=np.vstack(
                [
                    np.hstack([resources, np.zeros((len(bounds), 1))]),
                    np.hstack([-slo, np.ones((len(rows), 1))]),
                ]
            ),
            b_ub=np.concatenate([bounds, np.zeros(len(rows))]),
            bounds=[(0, None)] * c + [(0, 1)],
            method="highs",
        )
        assert lp.status == 0
        level = float(lp.x[-1])
        assert np.all(slo @ allocation_columns(units, allocation) >= level * (1 - 1e-5))
    f = (progress * (p.priority_weights / best)[:, None]).sum(axis=0)
    g = np.tile(p.prices, len(units.keys)) * np.repeat(units.gang, units.num_types)
    better = allocation.objective * (1 + 1e-5)
    lp = linprog(
        -(f - better * g),
        A_ub=np.vstack([resources, -slo]),
        b_ub=np.concatenate([bounds, -np.full(len(rows), level * (1 - 1e-7))]),
        bounds=(0, None),
        method="highs",
    )
    assert lp.status == 0
    assert -lp.fun <= 1e-7, "an allocation with a better throughput per dollar exists"


def allocation_columns(units: Units, allocation: Allocation) -> np.ndarray:
    """The allocation's fractions as units.py columns (the unit order of job_units)."""
    rows = dict(zip(allocation.keys, allocation.fractions, strict=True))
    empty = np.zeros(units.num_types)
    return np.concatenate([rows.get(k, empty) for k in units.keys])


def test_a_pair_billed_once_beats_two_jobs_alone() -> None:
    p = instance("scarce")
    packed = policy(COST_PACKED).allocate(p, SolverSpec())
    unpacked = policy("max_sum_throughput_normalized_by_cost_perf_SLOs").allocate(p, SolverSpec())
    assert packed.objective is not None and unpacked.objective is not None
    assert packed.objective > 1.05 * unpacked.objective
    assert any(isinstance(k, tuple) for k in packed.keys)


def test_packed_cost_needs_prices() -> None:
    with pytest.raises(ShockError, match="needs prices"):
        policy(COST_PACKED).allocate(replace(instance("roomy"), prices=None), SolverSpec())
