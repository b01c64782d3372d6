"""Which units run in a round: the three selection rules.

- by time owed (the default preset): one greedy walk over every (unit, worker type) entry by
  the time the unit is owed there since the last allocation reset, plus its carried deficit;
- by Gavel's priority (`--preset gavel`): per worker type, units by allocated share over
  received share, then deficit, then share;
- in the policy's order (policies that plan rounds, e.g. Shockwave): each unit on the first
  worker type with room.

Gangs are taken whole; a job runs at most once per round (alone or in one pair). Each rule
returns, per worker type column, the units it takes in the order it took them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from shock.core.policy import UnitKey
from shock.engine.greedy_walk import descending_order, take_at_first_entries, take_jobs_alone
from shock.engine.unit_counters import DEFICIT, RATES, SHARES, TIME_SO_FAR, UnitCounters
from shock.engine.units import JobState, PairState, Unit

_NO_FRACTION_PRIORITY = 1e9
# Below this many units, Gavel's priorities are cheaper as a Python loop than as arrays.
_FEW_UNITS = 14
# Below this many (unit, type) entries, the deficit walk is cheaper as a Python loop.
_FEW_ENTRIES = 900


@dataclass(frozen=True, slots=True)
class Candidates:
    """The units a round selects from, as the selection rules read them."""

    counters: UnitCounters
    # Their rows of the counters: active jobs by id, then allocated pairs by key.
    slots: np.ndarray
    # The unit and gang size of each of an array of slots (sizes also as an array).
    rows_of: Callable[[np.ndarray], tuple[list[Unit], list[int], np.ndarray]]
    has_pairs: bool
    gpus_of_column: list[int]  # each worker type's GPUs
    backfill: bool  # the policy lets units without a share fill idle GPUs


def _gavel_entry_order(unit: Unit) -> tuple[int, int, int]:
    """Where Gavel's priority table has a unit: job j, then pairs (i, j) for i < j by i."""
    ids = unit.member_ids
    return (ids[-1], len(ids), ids[0])


def select_by_time_owed(
    units: Candidates, order: list[int], elapsed: float, half_round: float
) -> dict[int, list[Unit]]:
    """Greedy walk over all (unit, type) pairs by the time each is owed since the last
    reset (plus carried deficit); pairs with no allocation come last (backfill). `elapsed`:
    seconds since the last reset, which restarted every unit's received time at
    `half_round`."""
    slots = units.slots
    counters = units.counters
    counters.flush()
    width = len(order)
    # Free GPUs by position in `order`.
    left = [units.gpus_of_column[column] for column in order]
    if not units.has_pairs and len(slots) * width >= _FEW_ENTRIES:
        # Most rounds take every job at its first entry; one sort over jobs then does.
        by_type = np.ascontiguousarray(
            counters.block.take(slots, axis=0)[:, :, order].transpose(1, 2, 0)
        )
        received, owed_before = by_type[TIME_SO_FAR], by_type[DEFICIT]
        shares_by_type = by_type[SHARES]
        valid = by_type[RATES] > 0
        if not units.backfill:
            valid &= shares_by_type > 0
        # Gavel's arithmetic, element by element: deficit + share x elapsed - received.
        owed_by_type = owed_before + shares_by_type * elapsed - (received - half_round)
        row_units, _, gang_sizes = units.rows_of(slots)
        first_taken = take_at_first_entries(
            valid, shares_by_type > 0, owed_by_type, shares_by_type, gang_sizes, left
        )
        if first_taken is not None:
            return {
                column: list(map(row_units.__getitem__, rows_taken))
                for column, rows_taken in zip(order, first_taken, strict=True)
            }

    # The units' counters, one contiguous row per counter: (unit, type) entries unit by
    # unit, with the types in the round's order.
    rows = counters.block.take(slots, axis=0)[:, :, order].transpose(1, 0, 2)
    rows = rows.reshape(len(rows), -1)
    time_so_far, deficit = rows[TIME_SO_FAR], rows[DEFICIT]
    shares, rates = rows[SHARES], rows[RATES]
    # The entries with a throughput and (unless the policy backfills) a share.
    runnable = rates > 0
    if not units.backfill:
        runnable &= shares > 0
    entry = np.flatnonzero(runnable)
    if len(entry) < len(runnable):
        shares, deficit, time_so_far = shares[entry], deficit[entry], time_so_far[entry]
    # Gavel's arithmetic, element by element: deficit + share x elapsed - received.
    owed = deficit + shares * elapsed - (time_so_far - half_round)
    # The order of Python's stable sort with reverse=True on (allocated, owed, share), ties
    # in entry order (arrival order, singles then pairs, then type order).
    few = len(entry) < _FEW_ENTRIES
    if few:
        walk = entry[np.lexsort((-shares, -owed, -(shares > 0).astype(np.int8)))]
    else:
        walk = entry[descending_order(shares > 0, owed, shares)]
    row_units, row_sizes, gang_sizes = units.rows_of(slots)
    if not units.has_pairs and not few:
        # Jobs alone: a job is taken at most once, whichever of its entries comes first.
        taken = take_jobs_alone(walk, width, gang_sizes, left)
        return {
            column: list(map(row_units.__getitem__, rows_taken))
            for column, rows_taken in zip(order, taken, strict=True)
        }
    free = sum(left)
    picked: list[list[Unit]] = [[] for _ in order]
    walk_rows, walk_types = (walk // width).tolist(), (walk % width).tolist()
    if units.has_pairs:
        selected: set[int] = set()
        for row, index in zip(walk_rows, walk_types, strict=True):
            unit = row_units[row]
            size = row_sizes[row]
            if size > left[index] or not selected.isdisjoint(unit.member_ids):
                continue
            left[index] -= size
            selected.update(unit.member_ids)
            picked[index].append(unit)
            free -= size
            if free == 0:
                break  # every GPU is taken (gangs have at least one GPU)
    else:
        # `take_jobs_alone` as a loop over the entries (cheaper for a few).
        is_taken = [False] * len(row_units)
        for row, index in zip(walk_rows, walk_types, strict=True):
            size = row_sizes[row]
            if size > left[index] or is_taken[row]:
                continue
            left[index] -= size
            is_taken[row] = True
            picked[index].append(row_units[row])
            free -= size
            if free == 0:
                break
    return dict(zip(order, picked, strict=True))


def select_in_order(
    order: list[int],
    round_order: tuple[UnitKey, ...],
    capacity: np.ndarray,
    active: dict[int, JobState],
    pairs: dict[tuple[int, int], PairState],
) -> dict[int, list[Unit]]:
    """The policy's order for this round: each unit in turn on the first worker type with
    room and a throughput (gangs whole); active jobs it did not list come last, by id."""
    left = {column: int(capacity[column]) for column in order}
    chosen: dict[int, list[Unit]] = {column: [] for column in order}
    listed = [
        unit
        for key in round_order
        for unit in (pairs.get(key) if isinstance(key, tuple) else active.get(key),)
        if unit is not None
    ]
    seen = {unit.key for unit in listed}
    rest = [active[j] for j in sorted(active) if j not in seen]
    selected: set[int] = set()
    for unit in [*listed, *rest]:
        if not selected.isdisjoint(unit.member_ids):
            continue
        for column in order:
            if unit.rates[column] > 0 and unit.scale_factor <= left[column]:
                left[column] -= unit.scale_factor
                selected.update(unit.member_ids)
                chosen[column].append(unit)
                break
    return chosen


def select_by_priority(
    units: Candidates, order: list[int], worker_time: list[float], hold_unallocated: bool
) -> tuple[dict[int, list[Unit]], bool]:
    """Gavel's greedy walk over each worker type's units by (priority, deficit,
    allocation), ties in the order Gavel's priority table has them: each job on arrival,
    followed by its pairs with the jobs that arrived before it. Also whether the units
    held back (no allocation yet) were left out here (then the placement need not)."""
    counters = units.counters
    owners = cast(list[Unit], counters.owner)
    slots = units.slots
    if units.has_pairs:
        ordered = sorted(slots.tolist(), key=lambda slot: _gavel_entry_order(owners[slot]))
        slots = np.array(ordered, dtype=np.intp)
    counters.flush()
    walks: list[list[int]]
    if len(slots) < _FEW_UNITS:
        walks = _priority_walks_few(units, slots, order, worker_time)
    else:
        walks = _priority_walks(units, slots, order, worker_time)
    # The walks give rows of `slots`.
    row_units, row_sizes, _ = units.rows_of(slots)
    gpus_of_column = units.gpus_of_column
    chosen: dict[int, list[Unit]] = {}
    if units.has_pairs:
        selected: set[int] = set()
        for column, walk in zip(order, walks, strict=True):
            left = gpus_of_column[column]
            picked: list[Unit] = []
            for row in walk:
                size = row_sizes[row]
                if size > left:
                    continue
                unit = row_units[row]
                ids = unit.member_ids
                if ids[0] in selected or (len(ids) > 1 and ids[1] in selected):
                    continue
                left -= size
                selected.update(ids)
                picked.append(unit)
                if left == 0:
                    break
            chosen[column] = picked
        return chosen, False
    # Jobs alone: a job is taken at most once, on the first type whose walk takes it. A
    # job held back (no allocation yet) still takes its GPUs, which then stay idle: it is
    # left out here rather than by the placement.
    held = hold_unallocated
    allocated = counters.allocated[slots].tolist() if held else None
    taken = [False] * len(row_units)
    for column, walk in zip(order, walks, strict=True):
        left = gpus_of_column[column]
        picked = []
        for row in walk:
            size = row_sizes[row]
            if size > left or taken[row]:
                continue
            left -= size
            taken[row] = True
            if allocated is None or allocated[row]:
                picked.append(row_units[row])
            if left == 0:
                break
        chosen[column] = picked
    return chosen, held


def _priority_walks(
    units: Candidates, slots: np.ndarray, order: list[int], worker_times: list[float]
) -> list[list[int]]:
    """For each type of `order`, the rows of `slots` by Gavel's priority (highest first),
    less those the walk skips whatever is left: no throughput (no priority, without
    backfill). The arithmetic for every type at once, as arrays."""
    # (counter, type, unit), contiguous: numpy's operations on small arrays cost about
    # half as much as on strided views.
    block = np.ascontiguousarray(units.counters.block.take(slots, axis=0).transpose(1, 2, 0))
    time_so_far, deficit = block[TIME_SO_FAR], block[DEFICIT]
    shares, rates = block[SHARES], block[RATES]
    worker_time = np.array(worker_times)[:, None]
    # Gavel's arithmetic, in its order: allocation / (received / worker time).
    if min(worker_times) > 0:
        fraction = time_so_far / worker_time
    else:
        fraction = np.divide(
            time_so_far, worker_time, out=np.zeros_like(time_so_far), where=worker_time > 0
        )
    priority = np.divide(shares, fraction, out=shares * _NO_FRACTION_PRIORITY, where=fraction > 0)
    # Python's conditions as written (NaN-safe): no share or no throughput, no priority.
    unrated = rates <= 0
    priority[(shares <= 0) | unrated] = 0.0
    skipped = unrated if units.backfill else unrated | (priority <= 0)
    # Python's stable sort with reverse=True on (priority, deficit, share), per type: a
    # stable ascending sort on the negated keys, ties in unit order; the entries the walk
    # skips last, cut off.
    sequences = np.lexsort((-shares, -deficit, -priority, skipped), axis=-1).tolist()
    # (A boolean sum: np.count_nonzero along an axis takes a slow path in Python.)
    lengths = (len(slots) - skipped.sum(axis=1)).tolist()
    return [sequences[column][: lengths[column]] for column in order]


def _priority_walks_few(
    units: Candidates, slots: np.ndarray, order: list[int], worker_times: list[float]
) -> list[list[int]]:
    """`_priority_walks` as a Python loop over units (cheaper for a few units)."""
    backfill = units.backfill
    # Per type: per counter, the units' values.
    by_type = units.counters.block[slots].transpose(2, 1, 0).tolist()
    # Sorted descending on (priority, deficit, share, -row): Python's stable sort with
    # reverse=True on (priority, deficit, share), ties in row order.
    negated_rows = range(0, -len(slots), -1)
    walks: list[list[int]] = []
    for column in order:
        counters = by_type[column]
        received_of, deficit_of = counters[TIME_SO_FAR], counters[DEFICIT]
        share_of, rate_of = counters[SHARES], counters[RATES]
        worker_time = worker_times[column]
        entries: list[tuple[float, float, float, int]] = []
        append = entries.append
        for received, deficit, share, rate, negated_row in zip(
            received_of, deficit_of, share_of, rate_of, negated_rows, strict=True
        ):
            if rate <= 0:
                continue  # never taken on this type
            if share <= 0:  # (0 where the unit has no allocation)
                if backfill:
                    append((0.0, deficit, share, negated_row))
                continue
            # Gavel's arithmetic, in its order: allocation / (received / worker time).
            fraction = received / worker_time if worker_time > 0 else 0.0
            priority = share / fraction if fraction > 0 else share * _NO_FRACTION_PRIORITY
            if not backfill and priority <= 0:
                continue
            append((priority, deficit, share, negated_row))
        entries.sort(reverse=True)
        walks.append([-entry[3] for entry in entries])
    return walks
