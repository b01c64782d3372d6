"""The mechanism's counters in numpy rows give what per-unit Python lists give."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.engine.cluster_spec import parse_cluster
from shock.engine.mechanism import Mechanism
from shock.engine.unit_counters import Counters, UnitCounters, UnitRates
from shock.engine.units import Unit

HALF_ROUND = 180.0
TABLE = default_throughputs()


@dataclasses.dataclass
class Holder:
    """A unit as the counters see it."""

    rates: list[float]
    slot: int = -1
    final_counters: Counters | None = None


def _unit(counters: UnitCounters, rates: list[float], deficit: float = 0.0) -> Holder:
    holder = Holder(rates)
    holder.slot = counters.acquire(holder, 0, 1, 1.0, rates, HALF_ROUND, deficit)
    holder.rates = UnitRates(rates, counters, holder.slot)
    return holder


@settings(max_examples=60, deadline=None)
@given(
    credits=st.lists(
        st.tuples(
            st.integers(0, 4),
            st.integers(0, 2),
            st.sampled_from([0.0, 1.0, 1e16, -1e16, 360.0, 0.1, 1e-9]),
        ),
        max_size=40,
    )
)
def test_batched_credits_add_up_as_one_add_after_another(
    credits: list[tuple[int, int, float]],
) -> None:
    counters = UnitCounters(3)
    units = [_unit(counters, [1.0, 1.0, 1.0]) for _ in range(5)]
    expected = [[HALF_ROUND] * 3 for _ in units]
    for index, column, seconds in credits:
        counters.credit(units[index].slot, column, seconds)
        expected[index][column] += seconds  # the order matters for these magnitudes
    assert [counters.of(unit)[0] for unit in units] == expected


def _plain_reset(
    shares: list[list[float] | None],
    time_so_far: list[list[float]],
    deficit: list[list[float]],
    elapsed: float,
) -> None:
    """Gavel's reset as a loop over units and types (the rule the arrays implement)."""
    for allocation, received_row, deficit_row in zip(shares, time_so_far, deficit, strict=True):
        for column in range(len(received_row)):
            should = allocation[column] * elapsed if allocation else 0.0
            received = received_row[column] - HALF_ROUND
            if should == 0.0 and received == 0.0:
                continue
            deficit_row[column] += should - received
            received_row[column] = HALF_ROUND


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), elapsed=st.sampled_from([0.0, 360.0, 1234.5, 1e7]))
def test_the_reset_carries_time_owed_as_gavels_loop_does(seed: int, elapsed: float) -> None:
    rng = random.Random(seed)
    counters = UnitCounters(3)
    units = [
        _unit(counters, [1.0, 0.0, 2.0], deficit=rng.choice([0.0, -3.5, 7.25])) for _ in range(9)
    ]
    allocated = [units[i] for i in range(9) if rng.random() < 0.6]
    rows = np.array(
        [[rng.choice([0.0, 0.25, 0.5, 1 / 3]) for _ in range(3)] for _ in allocated]
    ).reshape(-1, 3)
    counters.set_shares(np.array([unit.slot for unit in allocated], dtype=np.intp), rows)
    for unit in units:
        for column in range(3):
            if rng.random() < 0.5:
                counters.credit(unit.slot, column, rng.choice([0.0, 360.0, 17.3]))
    gone = units.pop(rng.randrange(len(units)))
    counters.release(gone.slot)
    before = [counters.of(unit) for unit in units]
    plain_shares = [share for _, _, share in before]
    plain_time = [list(time) for time, _, _ in before]
    plain_deficit = [list(deficit) for _, deficit, _ in before]
    _plain_reset(plain_shares, plain_time, plain_deficit, elapsed)
    counters.carry_owed(elapsed, HALF_ROUND)
    assert [counters.of(unit) for unit in units] == [
        (time, deficit, share)
        for time, deficit, share in zip(plain_time, plain_deficit, plain_shares, strict=True)
    ]


def test_a_released_slot_is_reused_only_after_its_credits_and_the_unit_keeps_its_counters() -> (
    None
):
    counters = UnitCounters(2)
    first = _unit(counters, [1.0, 2.0])
    counters.credit(first.slot, 1, 30.0)
    counters.release(first.slot)
    second = _unit(counters, [3.0, 4.0])
    assert second.slot != first.slot  # the credit to the first is still pending
    assert counters.of(first) == ([HALF_ROUND, HALF_ROUND + 30.0], [0.0, 0.0], None)
    assert first.slot == -1
    first.rates[0] = 9.0  # a rate set on a unit that left changes no one's row
    third = _unit(counters, [5.0, 6.0])
    assert counters.rates[third.slot].tolist() == [5.0, 6.0]
    assert counters.of(third) == ([HALF_ROUND, HALF_ROUND], [0.0, 0.0], None)


def test_rows_survive_the_matrices_growing_and_a_set_rate_reaches_the_row() -> None:
    counters = UnitCounters(2)
    units = [_unit(counters, [float(i), 1.0]) for i in range(200)]
    assert counters.capacity >= 200
    for unit in units:
        counters.credit(unit.slot, 0, float(unit.slot))
    units[150].rates[1] = 7.5
    assert counters.rates[units[150].slot].tolist() == [150.0, 7.5]
    assert units[150].rates == [150.0, 7.5]
    assert [counters.of(unit)[0][0] for unit in units] == [
        HALF_ROUND + unit.slot for unit in units
    ]


def _problem_of(jobs: tuple[PolicyJob, ...], calls: list[int]) -> PolicyInput:
    def build() -> tuple[PolicyJob, ...]:
        calls.append(1)
        return jobs

    return PolicyInput.of_job_columns(
        build,
        tuple(job.job_id for job in jobs),
        np.array([job.scale_factor for job in jobs], float),
        np.array([job.priority_weight for job in jobs], float),
        now=5.0,
        worker_types=("v100", "k80"),
        capacity=np.array([4.0, 2.0]),
        throughputs=np.ones((len(jobs), 2)),
        round_length_s=360.0,
    )


JOBS = (
    PolicyJob(3, "ResNet-18 (batch size 16)", 2, 1.0, 0.0, 100, 10.0),
    PolicyJob(8, "LM (batch size 20)", 1, 2.5, 1.0, 50, 0.0),
)


def test_an_input_builds_its_jobs_at_the_first_read_and_equals_one_given_them() -> None:
    calls: list[int] = []
    problem = _problem_of(JOBS, calls)
    assert problem.job_ids == (3, 8)
    assert problem.scale_factors.tolist() == [2.0, 1.0]
    assert problem.priority_weights.tolist() == [1.0, 2.5]
    assert calls == []
    assert problem.jobs is JOBS and problem.jobs is JOBS
    assert calls == [1]
    plain = PolicyInput(
        5.0, JOBS, ("v100", "k80"), np.array([4.0, 2.0]), np.ones((2, 2)), round_length_s=360.0
    )
    assert plain.job_ids == problem.job_ids
    assert plain.scale_factors.tolist() == problem.scale_factors.tolist()
    assert plain.priority_weights.tolist() == problem.priority_weights.tolist()
    assert repr(plain) == repr(problem)


def test_an_input_with_jobs_to_build_copies_pickles_and_replaces_with_its_jobs() -> None:
    for copied in (
        pickle.loads(pickle.dumps(_problem_of(JOBS, []))),
        copy.deepcopy(_problem_of(JOBS, [])),
        dataclasses.replace(_problem_of(JOBS, []), now=6.0),
    ):
        assert copied.jobs == JOBS
        assert copied.job_ids == (3, 8)
        assert copied.round_length_s == 360.0
    problem = _problem_of(JOBS, [])
    problem.scale_factors[0] = 99.0  # a caller's change to its array stays its own
    assert problem.scale_factors.tolist() == [2.0, 1.0]


def _plain_priority_walk(mechanism: Mechanism, order: list[int]) -> dict[int, list[Unit]]:
    """Gavel's walk per worker type, written as a loop over units and their counters."""
    units: list[Unit] = [mechanism.active[j] for j in sorted(mechanism.active)]
    units += [mechanism.pairs[k] for k in sorted(mechanism.pairs) if mechanism.pairs[k].allocation]
    units.sort(key=lambda unit: (unit.member_ids[-1], len(unit.member_ids), unit.member_ids[0]))
    chosen: dict[int, list[Unit]] = {}
    selected: set[int] = set()
    for column in order:
        worker_time = mechanism.worker_time[column]
        entries = []
        for unit in units:
            allocation, time_so_far, deficit = unit.allocation, unit.time_so_far, unit.deficit
            share = allocation[column] if allocation is not None else 0.0
            priority = 0.0
            if share > 0 and unit.rates[column] > 0:
                fraction = time_so_far[column] / worker_time if worker_time > 0 else 0.0
                priority = share / fraction if fraction > 0 else share * 1e9
            entries.append((priority, deficit[column], share, unit))
        entries.sort(key=lambda entry: entry[:3], reverse=True)
        left = mechanism.cluster.gpus_per_type[mechanism.worker_types[column]]
        chosen[column] = []
        for priority, _, _, unit in entries:
            if unit.scale_factor > left or not selected.isdisjoint(unit.member_ids):
                continue
            if unit.rates[column] <= 0 or (not mechanism.policy.backfill and priority <= 0):
                continue
            left -= unit.scale_factor
            selected.update(unit.member_ids)
            chosen[column].append(unit)
    return chosen


def _plain_time_owed_walk(
    mechanism: Mechanism, order: list[int], now: float
) -> dict[int, list[Unit]]:
    """The deficit walk over (unit, type) entries by (allocated, owed, share), descending."""
    half_round = mechanism.config.round_length_s / 2
    elapsed = now - mechanism.last_reset_s
    units: list[Unit] = [mechanism.active[j] for j in sorted(mechanism.active)]
    units += [mechanism.pairs[k] for k in sorted(mechanism.pairs) if mechanism.pairs[k].allocation]
    entries = []
    for unit in units:
        allocation, time_so_far, deficit = unit.allocation, unit.time_so_far, unit.deficit
        for index, column in enumerate(order):
            share = allocation[column] if allocation is not None else 0.0
            if unit.rates[column] <= 0 or (not mechanism.policy.backfill and share <= 0):
                continue
            owed = deficit[column] + share * elapsed - (time_so_far[column] - half_round)
            entries.append((share > 0, owed, share, index, unit))
    entries.sort(key=lambda entry: entry[:3], reverse=True)
    left = [mechanism.cluster.gpus_per_type[mechanism.worker_types[c]] for c in order]
    picked: list[list[Unit]] = [[] for _ in order]
    selected: set[int] = set()
    for _, _, _, index, unit in entries:
        if unit.scale_factor > left[index] or not selected.isdisjoint(unit.member_ids):
            continue
        left[index] -= unit.scale_factor
        selected.update(unit.member_ids)
        picked[index].append(unit)
    return dict(zip(order, picked, strict=True))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    policy=st.sampled_from(["max_min_fairness", "max_min_fairness_packed", "fifo"]),
    selection=st.sampled_from(["gavel", "deficit"]),
    few_units=st.sampled_from([0, 10**6]),
)
def test_the_selections_pick_what_the_plain_walks_pick(
    seed: int, policy: str, selection: str, few_units: int
) -> None:
    # Gavel's priorities and the deficit walk as arrays, and as loops (below the thresholds).
    with (
        patch("shock.engine.selection._FEW_UNITS", few_units),
        patch("shock.engine.selection._FEW_ENTRIES", few_units),
    ):
        _selections_agree_with_the_plain_walks(seed, policy, selection)


def _selections_agree_with_the_plain_walks(seed: int, policy: str, selection: str) -> None:
    rng = random.Random(seed)
    registry = default_registry()
    mechanism = Mechanism(
        parse_cluster("3:2:2", 1),
        registry.get("policy", policy).for_run(seed),
        SolverSpec(),
        registry.get("placement", "first_fit"),
        TABLE,
        MechanismConfig(round_length_s=2 * HALF_ROUND, selection=selection, seed=seed),
    )
    keys = sorted(k for k in TABLE.isolated if k[1] == 1)
    next_id, now = 0, 0.0
    for _ in range(8):
        for _ in range(rng.randrange(4)):
            job_type, scale = rng.choice(keys)
            mechanism.admit(JobSpec(next_id, job_type, 10**12, scale_factor=scale))
            next_id += 1
        if mechanism.active and rng.random() < 0.3:
            mechanism.withdraw(rng.choice(sorted(mechanism.active)))
        mechanism.maybe_reallocate(now)
        order = list(range(len(mechanism.worker_types)))
        rng.shuffle(order)
        if selection == "gavel":
            expected = _plain_priority_walk(mechanism, order)
            chosen, _ = mechanism._select_by_priority(order)
        else:
            expected = _plain_time_owed_walk(mechanism, order, now)
            chosen = mechanism._select_by_time_owed(order, now)
        assert {c: [u.key for u in units] for c, units in chosen.items()} == {
            c: [u.key for u in units] for c, units in expected.items()
        }
        for assignment in mechanism.plan_round(now):
            exec_s = rng.choice([2 * HALF_ROUND, 100.0, 0.0])
            steps = [1.0] * len(assignment.unit.members)
            mechanism.credit(assignment, steps, exec_s, overhead_s=rng.choice([0.0, 20.0]))
        now += 2 * HALF_ROUND


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 60)), max_size=80))
def test_jobs_by_id_kept_between_calls_is_the_sorted_order(
    steps: list[tuple[bool, int, int]],
) -> None:
    # Jobs arrive mostly in id order (now and then one out of order, or an id that left
    # coming back), leave, and the pending credits free their slots for re-use; after each
    # step the kept order must be the jobs in use sorted by id.
    counters = UnitCounters(3)
    holders: dict[int, Holder] = {}
    next_id = 0
    for arrive, flush_now, back in steps:
        if arrive or not holders:
            job_id = next_id if back > 10 else back  # mostly the next id
            if job_id in holders:
                job_id = next_id
            next_id = max(next_id, job_id) + 1
            holder = Holder([1.0, 1.0, 1.0])
            holder.slot = counters.acquire(holder, job_id, 1, 1.0, holder.rates, HALF_ROUND, 0.0)
            holders[job_id] = holder
        else:
            job_id = sorted(holders)[back % len(holders)]
            counters.release(holders.pop(job_id).slot)
        if flush_now:
            counters.flush()
        if back % 2:
            slots, ids = counters.jobs_by_id()
            assert ids.tolist() == sorted(holders)
            assert slots.tolist() == [holders[i].slot for i in sorted(holders)]
