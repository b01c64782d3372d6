"""Gavel's throughput estimator: matrix completion worked by hand, and the estimator against
Gavel's measured table with rows hidden from it."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from shock.core.throughputs import ThroughputTable, default_throughputs
from shock.engine.throughput_estimator import (
    EstimatorOptions,
    JobProfile,
    ThroughputEstimator,
)
from shock.lp.matrix_completion import CompletionSettings, complete_matrix

GPU_TYPES = ("k80", "p100", "v100")


def test_rank_one_matrix_gets_its_missing_entry() -> None:
    # Rows are multiples of (1, 2): the third row's second entry must be 2 * 3 = 6.
    values = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 0.0]])
    observed = np.array([[True, True], [True, True], [True, False]])
    completed = complete_matrix(values, observed, CompletionSettings(rank=1, regularisation=1e-6))
    assert completed[2, 1] == pytest.approx(6.0, rel=1e-3)
    assert completed[0, 0] == pytest.approx(1.0, rel=1e-3)


def test_rank_two_matrix_gets_its_missing_entries() -> None:
    # x_ij = a_i + b_j is rank 2 (a_i * 1 + 1 * b_j): a = (0, 1, 2, 5), b = (1, 3, 4).
    a = np.array([0.0, 1.0, 2.0, 5.0])
    b = np.array([1.0, 3.0, 4.0])
    truth = a[:, None] + b[None, :]
    observed = np.ones_like(truth, dtype=bool)
    observed[3, 2] = False  # the last row lacks its last entry, the second its first
    observed[1, 0] = False
    completed = complete_matrix(truth, observed, CompletionSettings(rank=2, regularisation=1e-8))
    # By hand: rows lie in the span of (1, 1, 1) and b; row 3 = (6, 8, ?) = 5 (1, 1, 1) + b,
    # so ? = 9; row 1 = (?, 4, 5) = 1 (1, 1, 1) + b, so ? = 2.
    assert completed[3, 2] == pytest.approx(9.0, rel=1e-3)
    assert completed[1, 0] == pytest.approx(2.0, rel=1e-3)


def test_completion_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="one 2-d shape"):
        complete_matrix(np.zeros((2, 2)), np.zeros((2, 3), dtype=bool))


def _small_table() -> ThroughputTable:
    """Three job types on two worker types; "fast" is 2x on v100, "flat" is not; pairs."""
    table = ThroughputTable(source="small")
    rates = {"fast": (10.0, 20.0), "flat": (8.0, 8.0), "mid": (5.0, 7.5)}
    for name, (k80, v100) in rates.items():
        table.set(name, 1, "k80", k80)
        table.set(name, 1, "v100", v100)
    shares = {("fast", "fast"): 0.5, ("fast", "flat"): 0.9, ("flat", "fast"): 0.4,
              ("flat", "flat"): 0.5, ("mid", "mid"): 0.6, ("mid", "fast"): 0.7,
              ("fast", "mid"): 0.8, ("mid", "flat"): 0.3, ("flat", "mid"): 0.95}  # fmt: skip
    for (a, b), share in shares.items():
        table.pairs[((a, 1), (b, 1))] = {
            w: (share * table.throughput(a, 1, w), shares[(b, a)] * table.throughput(b, 1, w))
            for w in ("k80", "v100")
        }
    return table


def test_a_new_job_measured_like_a_reference_is_matched_to_it() -> None:
    table = _small_table()
    estimator = ThroughputEstimator(table, ("k80", "v100"))
    # Twice as fast as "flat" everywhere, and it shares a GPU as "flat" does.
    profile = JobProfile(
        ("new", 1),
        isolated={"k80": 16.0},
        colocated={
            ("k80", ("fast", 1)): 0.4,
            ("v100", ("flat", 1)): 0.5,
            ("v100", ("mid", 1)): 0.95,
        },
    )
    estimate = estimator.estimate(profile)
    assert estimate.reference == ("flat", 1)
    assert estimate.isolated["k80"] == 16.0  # measured: kept
    assert estimate.measured == frozenset({"k80"})
    assert estimate.isolated["v100"] > 0


def test_full_profiles_of_every_reference_give_back_the_table() -> None:
    # Gavel's own check: all job types are references and everything is measured, so every
    # job matches itself and the estimated table is the measured one.
    table = default_throughputs()
    estimator = ThroughputEstimator(table, GPU_TYPES)
    keys = [key for key in table.isolated if key[1] == 1]
    estimates = [estimator.estimate(estimator.profile_from_table(key, table)) for key in keys]
    for estimate in estimates:
        assert estimate.reference == estimate.key
        assert estimate.distance == pytest.approx(0.0, abs=1e-9)
    estimated = estimator.estimated_table(estimates)
    for key in keys:
        for w in GPU_TYPES:
            assert estimated.throughput(*key, w) == table.throughput(*key, w)
    for first in keys[:6]:
        for second in keys[:6]:
            for w in GPU_TYPES:
                expected = table.pair_throughput(first, second, w)
                got = estimated.pair_throughput(first, second, w)
                assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_hidden_rows_are_estimated_from_a_partial_profile() -> None:
    """Each job type hidden in turn (not a reference), half its entries measured and none
    alone on k80/p100: its nearest reference is of its own family for most types, and its
    isolated rates on the types not measured are close to Gavel's measurements."""
    table = default_throughputs()
    names = sorted({k[0] for k in table.isolated})
    same_family = 0
    errors: list[float] = []
    for hidden in names:
        reduced = ThroughputTable(
            isolated={k: v for k, v in table.isolated.items() if k[0] != hidden},
            pairs={
                k: v for k, v in table.pairs.items() if k[0][0] != hidden and k[1][0] != hidden
            },
            source="gavel without one type",
        )
        estimator = ThroughputEstimator(reduced, GPU_TYPES, EstimatorOptions(seed=1))
        key = (hidden, 1)
        full = estimator.profile_from_table(key, table)
        rng = random.Random(sum(map(ord, hidden)))
        profile = JobProfile(
            key,
            isolated={"v100": full.isolated["v100"]},
            colocated={k: v for k, v in full.colocated.items() if rng.random() < 0.5},
        )
        estimate = estimator.estimate(profile)
        if estimate.reference[0].split(" ")[0] == hidden.split(" ")[0]:
            same_family += 1
        for w in ("k80", "p100"):
            errors.append(abs(math.log(estimate.isolated[w] / table.throughput(*key, w))))
    # 24 of the 26 types have a sibling of their family among the references; 18 match one.
    assert same_family >= 16
    # Median error of the estimated isolated rates on the unmeasured types within 30%
    # (24% measured; the mean speed-up of all references is off by 50%).
    assert float(np.median(errors)) < math.log(1.30)


def test_nothing_measured_falls_back_to_the_most_typical_reference() -> None:
    table = _small_table()
    estimator = ThroughputEstimator(table, ("k80", "v100"))
    estimate = estimator.estimate(JobProfile(("unknown", 1)))
    assert math.isnan(estimate.distance)
    assert estimate.reference in estimator.reference_keys
    assert estimate.isolated == table.isolated[estimate.reference]


def test_reference_types_are_a_seeded_sample() -> None:
    table = default_throughputs()
    options = EstimatorOptions(reference_types=8, seed=3)
    first = ThroughputEstimator(table, GPU_TYPES, options).reference_types
    again = ThroughputEstimator(table, GPU_TYPES, options).reference_types
    assert len(first) == 8 and first == again
    with pytest.raises(ValueError, match="profiling fraction"):
        EstimatorOptions(profiling_fraction=1.5)
