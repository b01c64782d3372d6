"""Max-min fairness groups identical jobs into classes as a plain grouping does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.plugins.policies.max_min_fairness import _job_classes


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([0.0, -0.0, 0.5, 1.25]),
            st.sampled_from([0.0, 2.0]),
            st.sampled_from([1.0, 3.0]),
            st.sampled_from([1, 2, 4]),
        ),
        max_size=40,
    )
)
def test_identical_rows_share_a_class_numbered_by_first_appearance(
    rows: list[tuple[float, float, float, int]],
) -> None:
    first_of: dict[tuple[float, ...], int] = {}
    for row, values in enumerate(rows):
        first_of.setdefault(values, row)  # -0.0 == 0.0: one key
    firsts = sorted(first_of.values())
    class_of = [firsts.index(first_of[values]) for values in rows]
    rates = np.array([row[:3] for row in rows], dtype=float).reshape(len(rows), 3)
    scale_factors = np.array([row[3] for row in rows], dtype=float)
    classes, class_of_job, sizes = _job_classes(rates, scale_factors)
    assert classes.tolist() == firsts
    assert class_of_job.tolist() == class_of
    assert sizes.tolist() == [class_of.count(c) for c in range(len(firsts))]
