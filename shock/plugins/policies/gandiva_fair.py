"""Gandiva-fair (Chaudhary et al., EuroSys 2020): fair shares per user, then GPU trading.

1. **Fair share.** Each entity e (user or group, `PolicyJob.entity`; the default entity for
   jobs without one) weighs W_e (`PolicyInput.entity_weights`, else 1) and demands
   D_e = sum of its jobs' gang sizes. GPUs are shared by weighted water filling on the
   totals: every entity gets W_e / sum W of what is left, an entity that needs less keeps
   only D_e and the rest is shared again. An entity holds the cluster's mix:
   h[e, w] = share_e N_w / N.
2. **Trading.** For a fast type f and a slow type s, entity e's speedup r_e is the mean over
   its jobs of T[j, f] / T[j, s]. While the entity with the highest speedup holds slow
   GPUs and the one with the lowest holds fast GPUs and r_high > r_low, the first buys fast
   GPUs from the second at price p = (r_high + r_low) / 2 slow GPUs each, as many as either
   side can give (and the seller, whose GPU count grows, can use). Per fast GPU the buyer
   gains r_high - p > 0 and the seller p - r_low > 0 slow-GPU equivalents, so both are
   better off than at their fair share; the totals of each type stay the same. Type pairs
   go from the largest cluster-wide speedup down.
3. **Within an entity**, jobs time-slice its GPUs of each type in proportion to their
   priority: x[j, w] = h[e, w] p_j / sum_{k in e} p_k s_k (rows capped at 1).

Option `size_blind_shares=true` (set by `--preset shockwave`) is what Shockwave's simulator
runs as `gandiva_fair` instead (its GandivaFairProportional policy): every job, whatever its
gang size, gets N_w / m of each type (rows capped at 1), with no entities and no trading. A
gang's shares then count s times, so they can ask a type for more GPUs than it has; the round
mechanism's priorities decide who runs.

Gandiva-fair sets its exchange rate by an auction among users; the midpoint of the two
speedups is this implementation's choice (any price strictly between them benefits both).
The policy is a heuristic (no solver). The allocation's objective is the total normalised
throughput, sum_j w_j a_j(x) / max_w T[j, w].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import permutations

import numpy as np

from shock.api import (
    DEFAULT_ENTITY,
    Allocation,
    Policy,
    PolicyInput,
    Register,
    SolverSpec,
    hookimpl,
    typed_options,
)
from shock.plugins.policies.rate_lp import normalised_throughput_coefficients
from shock.plugins.policies.time_fraction_lp import clean_fractions

_PROFIT = 1e-9  # trade only while the speedups differ by more than this (relative)


def weighted_fair_shares(weights: np.ndarray, demands: np.ndarray, total: float) -> np.ndarray:
    """Water filling on totals: shares proportional to weights, none above its demand."""
    shares = np.zeros(len(weights))
    open_ = demands > 0
    left = total
    while open_.any() and left > 1e-12:
        offer = left * weights / weights[open_].sum()
        capped = open_ & (shares + offer >= demands)
        if not capped.any():
            shares[open_] += offer[open_]
            break
        left -= float((demands[capped] - shares[capped]).sum())
        shares[capped] = demands[capped]
        open_ &= ~capped
    return shares


def trade(
    holdings: np.ndarray, demands: np.ndarray, speedups: np.ndarray, fast: int, slow: int
) -> None:
    """Trade fast-type GPUs for slow-type GPUs between entities in place (see module doc).
    A seller takes no more GPUs in all than it demands."""
    full = np.zeros(len(speedups), dtype=bool)
    for _ in range(4 * len(speedups) ** 2 + 4):
        known = np.isfinite(speedups)
        sellers = np.flatnonzero((holdings[:, fast] > 1e-12) & known & ~full)
        buyers = np.flatnonzero((holdings[:, slow] > 1e-12) & known)
        if not len(sellers) or not len(buyers):
            return
        seller = sellers[np.argmin(speedups[sellers])]
        buyer = buyers[np.argmax(speedups[buyers])]
        low, high = speedups[seller], speedups[buyer]
        if seller == buyer or high <= low * (1 + _PROFIT):
            return
        price = 0.5 * (high + low)
        amount = min(holdings[seller, fast], holdings[buyer, slow] / price)
        if price > 1:
            room = demands[seller] - holdings[seller].sum()
            if room / (price - 1) <= amount:
                amount = max(0.0, room / (price - 1))
                full[seller] = True
        holdings[seller, fast] -= amount
        holdings[buyer, fast] += amount
        holdings[buyer, slow] -= amount * price
        holdings[seller, slow] += amount * price


@dataclass(frozen=True, slots=True)
class GandivaFairOptions:
    # Shockwave's `gandiva_fair`: N_w / m of each type per job, blind to gang sizes.
    size_blind_shares: bool = False


def size_blind_fractions(capacity: np.ndarray, jobs: int) -> np.ndarray:
    """N_w / m of every type for each of m jobs, each row scaled down to sum at most 1."""
    fractions = np.tile(capacity / jobs, (jobs, 1))
    rows = np.maximum(fractions.sum(axis=1), 1.0)
    return fractions / rows[:, None]


class GandivaFair(Policy):
    name = "gandiva_fair"
    weighs_entities = True
    description = "Gandiva-fair: weighted fair share per entity, then fast-for-slow GPU trading"

    def __init__(self, options: GandivaFairOptions | None = None) -> None:
        self.options = options or GandivaFairOptions()
        self.may_oversubscribe = self.options.size_blind_shares

    def with_options(self, values: Mapping[str, str]) -> GandivaFair:
        return GandivaFair(typed_options(self.options, values, self.name))

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        if not keys:
            return Allocation.empty(problem.worker_types)
        if self.options.size_blind_shares:
            fractions = size_blind_fractions(problem.capacity, len(keys))
            objective = float((normalised_throughput_coefficients(problem) * fractions).sum())
            return Allocation(keys, problem.worker_types, fractions, objective)
        entity_of = [job.entity or DEFAULT_ENTITY for job in problem.jobs]
        names = sorted(set(entity_of))
        member = np.array([names.index(e) for e in entity_of])
        given = problem.entity_weights or {}
        weights = np.array([given.get(name, 1.0) for name in names])
        scale, priority = problem.scale_factors, problem.priority_weights
        demands = np.bincount(member, weights=scale, minlength=len(names))
        capacity = problem.capacity
        shares = weighted_fair_shares(weights, demands, float(capacity.sum()))
        holdings = shares[:, None] * (capacity / capacity.sum())[None, :]
        for fast, slow in _type_pairs(problem):
            speedups = _speedups(problem, member, len(names), fast, slow)
            trade(holdings, demands, speedups, fast, slow)
        per_gpu = (
            priority / np.bincount(member, weights=priority * scale, minlength=len(names))[member]
        )
        fractions = clean_fractions(holdings[member] * per_gpu[:, None])
        objective = float((normalised_throughput_coefficients(problem) * fractions).sum())
        return Allocation(keys, problem.worker_types, fractions, objective)


def _type_pairs(problem: PolicyInput) -> list[tuple[int, int]]:
    """(fast, slow) type pairs, largest cluster-wide median speedup first."""
    t = problem.throughputs
    pairs = []
    for fast, slow in permutations(range(len(problem.worker_types)), 2):
        usable = (t[:, fast] > 0) & (t[:, slow] > 0)
        if not usable.any():
            continue
        speedup = float(np.median(t[usable, fast] / t[usable, slow]))
        if speedup > 1:
            pairs.append((speedup, fast, slow))
    return [(fast, slow) for _, fast, slow in sorted(pairs, reverse=True)]


def _speedups(
    problem: PolicyInput, member: np.ndarray, count: int, fast: int, slow: int
) -> np.ndarray:
    """Each entity's mean fast/slow speedup over its jobs that run on both (nan if none)."""
    t = problem.throughputs
    usable = (t[:, fast] > 0) & (t[:, slow] > 0)
    ratio = np.where(usable, t[:, fast] / np.where(usable, t[:, slow], 1.0), 0.0)
    total = np.bincount(member, weights=ratio, minlength=count)
    jobs = np.bincount(member, weights=usable.astype(float), minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(jobs > 0, total / jobs, np.nan)


@hookimpl
def register_policies(register: Register) -> None:
    register(GandivaFair())
