"""When the mechanism re-allocates, and what a re-allocation resets.

An allocation is recomputed when jobs arrived, left or changed (or every round, for policies
and presets that re-plan each round), and no sooner than the minimum interval after the last
one. Each allocation resets the units' received time: what each was owed since the last reset
(share x elapsed - received) carries over into its deficit.
"""

from __future__ import annotations

import time

from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.solver import SolverSpec
from shock.engine.allocation_check import allocate_checked
from shock.engine.unit_counters import UnitCounters
from shock.engine.units import MechanismStats


def allocation_due(
    needed: bool, every_round: bool, now: float, last_reset_s: float, min_interval_s: float
) -> bool:
    """Whether to recompute the allocation now (`needed`: jobs changed since the last one)."""
    if not (needed or every_round):
        return False
    return every_round or last_reset_s == 0 or now - last_reset_s >= min_interval_s


def reset_received(
    counters: UnitCounters,
    worker_time: list[float],
    tracked_units: int,
    elapsed: float,
    half_round: float,
) -> None:
    """Carry each unit's time owed since the last reset (`elapsed` seconds ago) into its
    deficit, and restart its received time, and each worker type's total, at half a round
    per unit."""
    for column in range(len(worker_time)):
        worker_time[column] = half_round * tracked_units
    counters.carry_owed(elapsed, half_round)


def timed_allocation(
    policy: Policy, problem: PolicyInput, solver: SolverSpec, stats: MechanismStats
) -> Allocation:
    """The policy's allocation, checked; its seconds and count go into `stats`."""
    started = time.perf_counter()
    allocation = allocate_checked(policy, problem, solver)
    stats.solver_seconds += time.perf_counter() - started
    stats.allocations += 1
    return allocation
