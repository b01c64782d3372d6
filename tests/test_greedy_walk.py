"""The deficit walk's array version takes what the entry-by-entry walk takes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.engine.greedy_walk import descending_order, take_at_first_entries, take_jobs_alone


def _plain_walk(walk: list[int], width: int, sizes: list[int], left: list[int]) -> list[list[int]]:
    """Entry by entry: a row is taken on the first entry whose type has room for its gang."""
    left = list(left)
    taken: set[int] = set()
    picked: list[list[int]] = [[] for _ in range(width)]
    for entry in walk:
        row, index = divmod(entry, width)
        if row in taken or sizes[row] > left[index]:
            continue
        taken.add(row)
        left[index] -= sizes[row]
        picked[index].append(row)
    return picked


@st.composite
def _walks(draw: st.DrawFn) -> tuple[list[int], int, list[int], list[int]]:
    width = draw(st.integers(1, 4))
    rows = draw(st.integers(0, 40))
    sizes = draw(st.lists(st.sampled_from([1, 1, 1, 2, 4, 8]), min_size=rows, max_size=rows))
    # Some (row, type) entries, in a random order.
    entries = draw(st.lists(st.booleans(), min_size=rows * width, max_size=rows * width))
    walk = draw(st.permutations([e for e, kept in enumerate(entries) if kept]))
    left = draw(st.lists(st.integers(0, 24), min_size=width, max_size=width))
    return walk, width, sizes, left


@settings(max_examples=300, deadline=None)
@given(case=_walks(), max_stretches=st.sampled_from([1, 2, 8]))
def test_the_walk_in_stretches_takes_what_the_plain_walk_takes(
    case: tuple[list[int], int, list[int], list[int]], max_stretches: int
) -> None:
    walk, width, sizes, left = case
    taken = take_jobs_alone(
        np.array(walk, dtype=np.intp), width, np.array(sizes, dtype=np.int64), left, max_stretches
    )
    assert taken == _plain_walk(walk, width, sizes, left)


def test_a_full_type_ends_a_stretch_and_the_rest_goes_on_elsewhere() -> None:
    # Rows 0-2 want type 0 first, which has room for two; row 2 then goes to type 1.
    walk = [0, 2, 4, 1, 3, 5]  # (row, type): (0,0) (1,0) (2,0) (0,1) (1,1) (2,1)
    assert take_jobs_alone(np.array(walk), 2, np.array([1, 1, 1]), [2, 5]) == [[0, 1], [2]]


_KEYS = [-1.5, -0.0, 0.0, 0.0, 2.0, 2.0, 3.25]


@settings(max_examples=300, deadline=None)
@given(
    owed=st.lists(st.sampled_from(_KEYS), max_size=60),
    data=st.data(),
)
def test_the_descending_order_is_lexsorts(owed: list[float], data: st.DataObject) -> None:
    count = len(owed)
    shares = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5]), min_size=count, max_size=count))
    owed_array, shares_array = np.array(owed), np.array(shares)
    allocated = shares_array > 0
    expected = np.lexsort((-shares_array, -owed_array, -allocated.astype(np.int8)))
    assert descending_order(allocated, owed_array, shares_array).tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(data=st.data(), width=st.integers(1, 4), rows=st.integers(0, 30))
def test_taking_every_row_at_its_first_entry_is_the_walk_where_they_fit(
    data: st.DataObject, width: int, rows: int
) -> None:
    def grid(values: st.SearchStrategy[float]) -> np.ndarray:
        drawn = data.draw(st.lists(values, min_size=width * rows, max_size=width * rows))
        return np.array(drawn, dtype=float).reshape(width, rows)

    shares = grid(st.sampled_from([0.0, 0.25, 0.5]))
    owed = grid(st.sampled_from(_KEYS))
    valid = grid(st.sampled_from([0.0, 1.0, 1.0])) > 0
    sizes = data.draw(st.lists(st.sampled_from([1, 1, 2, 4]), min_size=rows, max_size=rows))
    left = data.draw(st.lists(st.integers(0, 40), min_size=width, max_size=width))
    allocated = shares > 0
    # The walk over (row, type) entries, row by row: lexsort's order of the valid ones.
    by_row = [array.T.ravel() for array in (valid, allocated, owed, shares)]
    entries = np.flatnonzero(by_row[0])
    keys = [array[entries] for array in by_row[1:]]
    walk = entries[np.lexsort((-keys[2], -keys[1], -keys[0].astype(np.int8)))].tolist()
    expected = _plain_walk(walk, width, sizes, left)
    # It answers exactly where every row fits on the type of its first entry.
    first: dict[int, int] = {}
    for entry in walk:
        first.setdefault(entry // width, entry % width)
    fits = all(
        sum(sizes[row] for row, index in first.items() if index == column) <= left[column]
        for column in range(width)
    )
    taken = take_at_first_entries(
        valid, allocated, owed, shares, np.array(sizes, dtype=np.int64), left
    )
    assert taken == (expected if fits else None)
