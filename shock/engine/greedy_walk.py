"""The deficit selection's greedy walk for jobs alone, mostly as array operations.

The walk visits (job, worker type) entries in order (`descending_order`) and takes a job on an
entry's type when the job is not taken yet and its gang fits what is left of the type. Walked
one entry at a time in Python this costs a loop over every entry (three per job on three
types), although most rounds take every job at its first entry.

`take_at_first_entries` answers those rounds with one sort over jobs instead of one over
entries: each job's first entry is its highest, and where every job fits on the type of its
first entry, the walk takes each there, in the order of those entries.

`take_jobs_alone` does any walk in stretches: every job not taken yet is assumed to be taken
at its first entry that fits what is left now; that holds for the walk up to the first such
entry that overflows its type (an entry that does not fit now never fits later: what is left
only shrinks). The jobs before it are taken, the entry is skipped, and the next stretch starts
from the state after them. Each overflow ends a stretch; a type that single-GPU jobs overflow
is full, so those need at most one stretch per type. After `max_stretches` the rest is walked
one entry at a time.
"""

from __future__ import annotations

import numpy as np

# Past this many stretches (many gangs that do not fit), the rest of the walk is a loop.
MAX_STRETCHES = 8


def take_jobs_alone(
    walk: np.ndarray,
    width: int,
    sizes: np.ndarray,
    left: list[int],
    max_stretches: int = MAX_STRETCHES,
) -> list[list[int]]:
    """The rows each type index takes, in walk order.

    `walk`: entries (row x `width` + type index, each at most once) in the walk's order;
    `sizes`: each row's gang size (at least 1); `left`: GPUs of each type index.
    """
    rows = len(sizes)
    count = len(walk)
    walk_rows = walk // width
    walk_types = walk % width
    # Where each (type, row) entry is in the walk; `count` where it has none (by type, then
    # row: numpy reduces across a few long rows much faster than along many short ones).
    flat_position = np.full(width * rows, count, dtype=np.intp)
    flat_position[walk_types * rows + walk_rows] = np.arange(count, dtype=np.intp)
    position = flat_position.reshape(width, rows)
    sizes = np.asarray(sizes)
    largest = int(sizes.max(initial=0))
    free = np.array(left, dtype=sizes.dtype)
    taken = np.zeros(rows, dtype=bool)
    in_stretch = np.zeros(count, dtype=bool)
    picked: list[list[np.ndarray]] = [[] for _ in range(width)]
    type_indices = np.arange(width)[:, None]
    start = 0
    for _ in range(max_stretches):
        # Each untaken row's first entry that fits now (entries before `start` of untaken
        # rows never fit again).
        first = np.minimum.reduce(
            [
                position[index]
                if room >= largest
                else np.where(sizes <= room, position[index], count)
                for index, room in enumerate(free.tolist())
            ]
        )
        first = first[~taken & (first < count)]
        if not len(first):
            return _rows_of(picked)
        in_stretch[first] = True
        stretch = np.flatnonzero(in_stretch)
        in_stretch[first] = False
        types = walk_types[stretch]
        gpus = sizes[walk_rows[stretch]]
        # GPUs each type has given after each entry of the stretch, were all taken.
        used = np.cumsum(np.where(types == type_indices, gpus, 0), axis=1)
        overflows = (used > free[:, None]).any(axis=0)
        end = int(overflows.argmax()) if overflows.any() else len(stretch)
        took = walk_rows[stretch[:end]]
        took_types = types[:end]
        taken[took] = True
        for index in range(width):
            picked[index].append(took[took_types == index])
        if end:
            free -= used[:, end - 1]
        if end == len(stretch):
            return _rows_of(picked)
        start = int(stretch[end]) + 1  # the overflowing entry: skipped
    return _walk_rest(walk_rows, walk_types, sizes, start, free, taken, _rows_of(picked))


def _rows_of(picked: list[list[np.ndarray]]) -> list[list[int]]:
    return [np.concatenate(parts).tolist() if parts else [] for parts in picked]


def _walk_rest(
    walk_rows: np.ndarray,
    walk_types: np.ndarray,
    sizes: np.ndarray,
    start: int,
    free: np.ndarray,
    taken: np.ndarray,
    picked: list[list[int]],
) -> list[list[int]]:
    """The walk from `start`, one entry at a time."""
    left = free.tolist()
    is_taken = taken.tolist()
    size_of = sizes.tolist()
    remaining = sum(left)
    for row, index in zip(walk_rows[start:].tolist(), walk_types[start:].tolist(), strict=True):
        size = size_of[row]
        if size > left[index] or is_taken[row]:
            continue
        left[index] -= size
        is_taken[row] = True
        picked[index].append(row)
        remaining -= size
        if remaining == 0:
            break
    return picked


def descending_order(allocated: np.ndarray, owed: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """The entries by (allocated, owed, share), highest first, ties in entry order: what
    `np.lexsort((-shares, -owed, -allocated))` gives, with one sort where few entries tie
    on (allocated, owed) (lexsort sorts on every key)."""
    by_owed = np.argsort(-owed, kind="stable")
    flags = allocated[by_owed]
    order = np.concatenate([by_owed[flags], by_owed[~flags]])
    ranked_owed, ranked_flags = owed[order], allocated[order]
    tie = (ranked_owed[1:] == ranked_owed[:-1]) & (ranked_flags[1:] == ranked_flags[:-1])
    if not tie.any():
        return order
    # Runs of tied entries, each re-sorted by share (then entry) in its place.
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] = tie
    tied[:-1] |= tie
    run = np.concatenate([[0], np.cumsum(~tie)])
    places = np.flatnonzero(tied)
    entries = order[places]
    order[places] = entries[np.lexsort((entries, -shares[entries], run[places]))]
    return order


def take_at_first_entries(
    valid: np.ndarray,
    allocated: np.ndarray,
    owed: np.ndarray,
    shares: np.ndarray,
    sizes: np.ndarray,
    left: list[int],
) -> list[list[int]] | None:
    """The walk's outcome where every row fits on the type of its first entry, as most rounds
    have it: the rows each type index takes, in walk order (the walk: entries by (allocated,
    owed, share), highest first, ties in entry order, row by row and by type index within a
    row). None where some type has no room for all the rows whose first entry it has, or an
    owed time is NaN. Arrays by (type index, row); only `valid` entries are in the walk.
    Cheaper than the whole walk: one sort over rows, not over every entry."""
    width, rows = valid.shape
    if np.isnan(owed).any():
        return None
    # Each row's highest valid entry, the first of equals.
    best = np.full(rows, -1, dtype=np.intp)
    best_allocated = np.zeros(rows, dtype=bool)
    best_owed = np.zeros(rows)
    best_share = np.zeros(rows)
    for index in range(width):
        row_allocated, row_owed, row_share = allocated[index], owed[index], shares[index]
        higher = (row_allocated > best_allocated) | (
            (row_allocated == best_allocated)
            & ((row_owed > best_owed) | ((row_owed == best_owed) & (row_share > best_share)))
        )
        better = valid[index] & ((best < 0) | higher)
        best[better] = index
        best_allocated = np.where(better, row_allocated, best_allocated)
        best_owed = np.where(better, row_owed, best_owed)
        best_share = np.where(better, row_share, best_share)
    walked = np.flatnonzero(best >= 0)
    types = best[walked]
    if (np.bincount(types, weights=sizes[walked], minlength=width) > left).any():
        return None
    # Every row is taken at its first entry, in the order of those entries.
    ranked = descending_order(best_allocated[walked], best_owed[walked], best_share[walked])
    ranked_rows, ranked_types = walked[ranked], types[ranked]
    return [ranked_rows[ranked_types == index].tolist() for index in range(width)]
