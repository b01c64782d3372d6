"""Gavel's throughput estimator: rates for a job type the table lacks, from a partial profile.

A few job types of a measured table are *reference* job types. Each is described by one row
of features, all measured:

- its isolated throughput on each worker type, relative to the fastest type's (its speed-up
  profile), and
- for each worker type and each reference job type of its scale factor, its throughput when
  it shares a GPU with that job, relative to its isolated throughput there (Gavel's
  normalised space-sharing throughputs, in [0, 1]).

A new job is measured on only some of these (a profiling fraction of them: a brief run alone
on a worker type, or next to a reference job). Matrix completion over the reference rows plus
the new job's partial row fills in the rest, and the new job is matched to the reference job
whose row is nearest by cosine distance. The job's isolated rates are its measured ones where
it has them, else the reference job's scaled to what was measured (the reference job's own
when nothing was; on Gavel's table with one job type hidden at a time and measured alone on
the V100 only, this is within 24% of the measured rate for the median type, against 50% for
the mean speed-up of all job types); its co-located rates are the reference pair's normalised rates
times the two jobs' isolated rates, as in Gavel. As the job runs, what it reports replaces
these estimates (`shock.engine.measured_throughputs`, and the engine's rate reports).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from shock.core.throughputs import UNCONSOLIDATED, JobKey, ThroughputTable
from shock.lp.matrix_completion import (
    CompletionSettings,
    complete_matrix,
    fit_rows,
    starting_factors,
)

# (worker type, reference job key): the new job's steps/s next to that job on that type,
# divided by its isolated steps/s there.
ColocatedKey = tuple[str, JobKey]


@dataclass(frozen=True, slots=True)
class EstimatorOptions:
    """How much is measured of a new job, and how many reference job types there are."""

    # Share of a new job's feature entries that are measured (Gavel's profiling percentage).
    profiling_fraction: float = 1.0
    # How many of the table's job types are reference job types (None: all of them), drawn
    # at random with `seed`.
    reference_types: int | None = None
    # Measure every new job alone on every worker type (Gavel's experiment: isolated rates
    # are known, only co-located ones are estimated). False: isolated entries are sampled at
    # the profiling fraction like the others.
    profile_isolated: bool = True
    seed: int = 0
    completion: CompletionSettings = field(default_factory=CompletionSettings)

    def __post_init__(self) -> None:
        if not 0.0 <= self.profiling_fraction <= 1.0:
            raise ValueError(
                f"profiling fraction must be in [0, 1], got {self.profiling_fraction}"
            )
        if self.reference_types is not None and self.reference_types < 1:
            raise ValueError(f"reference types must be >= 1, got {self.reference_types}")


@dataclass(frozen=True, slots=True)
class JobProfile:
    """What was measured of one job type: alone, and next to reference jobs."""

    key: JobKey
    isolated: Mapping[str, float] = field(default_factory=dict)  # worker type -> steps/s
    colocated: Mapping[ColocatedKey, float] = field(default_factory=dict)  # normalised


@dataclass(frozen=True, slots=True)
class JobEstimate:
    key: JobKey
    reference: JobKey  # the nearest reference job type
    distance: float  # cosine distance to it (nan: nothing was measured, the medoid is used)
    isolated: dict[str, float]  # steps/s per worker type: measured, else estimated
    measured: frozenset[str]  # worker types whose isolated rate was measured


@dataclass(slots=True)
class _ReferenceRows:
    """The reference jobs of one scale factor as a fully measured feature matrix."""

    keys: list[JobKey]
    pair_keys: list[JobKey]  # the co-location columns' partners (empty: no pair data)
    values: np.ndarray  # (references, features)
    observed: np.ndarray  # bool, same shape
    # Low-rank factors of the reference rows alone: every completion starts from them.
    factors: tuple[np.ndarray, np.ndarray]
    medoid: int  # the row nearest all others: the guess when nothing is measured


class ThroughputEstimator:
    """Matches new job types to reference job types of a measured table (see the module)."""

    def __init__(
        self,
        table: ThroughputTable,
        worker_types: Sequence[str] | None = None,
        options: EstimatorOptions | None = None,
    ) -> None:
        self.table = table
        self.options = options or EstimatorOptions()
        self.worker_types = tuple(worker_types or table.gpu_types)
        # Speed-up profiles are relative to one type for every job: the fastest overall.
        self.anchor = table.fastest_first(self.worker_types)[0]
        names = sorted(
            {job_type for (job_type, _), rates in table.isolated.items() if _runs_on(rates, self)}
        )
        count = self.options.reference_types
        if count is not None and count < len(names):
            chosen = set(random.Random(self.options.seed).sample(names, count))
            names = [name for name in names if name in chosen]
        self.reference_types: tuple[str, ...] = tuple(names)
        self.reference_keys: tuple[JobKey, ...] = tuple(
            key
            for key, rates in sorted(table.isolated.items())
            if key[0] in self.reference_types and _runs_on(rates, self)
        )
        if not self.reference_keys:
            raise ValueError(
                f"throughput table {table.source} has no job type measured on every one of "
                f"{', '.join(self.worker_types)}: nothing to estimate from"
            )
        self._rows: dict[int, _ReferenceRows] = {}

    # The feature matrix.

    def _rows_for(self, scale_factor: int) -> _ReferenceRows:
        rows = self._rows.get(scale_factor)
        if rows is None:
            rows = self._build_rows(scale_factor)
            self._rows[scale_factor] = rows
        return rows

    def _build_rows(self, scale_factor: int) -> _ReferenceRows:
        keys = [k for k in self.reference_keys if k[1] == scale_factor]
        if not keys:  # no reference of this size: match on speed-up profiles of all sizes
            keys = list(self.reference_keys)
        pair_keys = [k for k in keys if k[1] == scale_factor]
        if not any((a, b) in self.table.pairs for a in pair_keys for b in pair_keys):
            pair_keys = []
        width = self._width(pair_keys)
        values = np.zeros((len(keys), width))
        observed = np.zeros((len(keys), width), dtype=bool)
        for row, key in enumerate(keys):
            profile = self.profile_from_table(key, self.table, pair_keys)
            values[row], observed[row] = self._features(profile, pair_keys)
        rank = self.options.completion.rank
        factors = starting_factors(np.where(observed, values, 0.0), rank)
        return _ReferenceRows(keys, pair_keys, values, observed, factors, _medoid(values))

    def _width(self, pair_keys: Sequence[JobKey]) -> int:
        return len(self.worker_types) * (1 + len(pair_keys))

    def _features(
        self, profile: JobProfile, pair_keys: Sequence[JobKey]
    ) -> tuple[np.ndarray, np.ndarray]:
        types = self.worker_types
        values = np.zeros(self._width(pair_keys))
        observed = np.zeros(len(values), dtype=bool)
        anchor = profile.isolated.get(self.anchor, 0.0)
        if anchor > 0:
            for column, worker_type in enumerate(types):
                rate = profile.isolated.get(worker_type)
                if rate is not None:
                    values[column] = rate / anchor
                    observed[column] = True
        offset = len(types)
        for worker_type in types:
            for partner in pair_keys:
                share = profile.colocated.get((worker_type, partner))
                if share is not None:
                    values[offset] = share
                    observed[offset] = True
                offset += 1
        return values, observed

    # Profiles.

    def profile_from_table(
        self, key: JobKey, table: ThroughputTable, partners: Sequence[JobKey] | None = None
    ) -> JobProfile:
        """Everything `table` has measured of `key`: rates alone, and shares next to the
        reference jobs of its scale factor."""
        if partners is None:
            partners = self._rows_for(key[1]).pair_keys
        alone = table.isolated.get(key, {})
        isolated = {w: alone[w] for w in self.worker_types if w in alone}
        colocated: dict[ColocatedKey, float] = {}
        for partner in partners:
            measured = table.pairs.get((key, partner), {})
            for worker_type in self.worker_types:
                rate = isolated.get(worker_type, 0.0)
                if worker_type in measured and rate > 0:
                    colocated[(worker_type, partner)] = min(measured[worker_type][0] / rate, 1.0)
        return JobProfile(key, isolated, colocated)

    def sample_profile(
        self, key: JobKey, oracle: ThroughputTable, rng: random.Random
    ) -> JobProfile:
        """A partial profile of `key` as a brief measurement would give it: each entry the
        oracle table has is measured with probability `profiling_fraction` (isolated rates
        always, with `profile_isolated`)."""
        full = self.profile_from_table(key, oracle)
        fraction = self.options.profiling_fraction
        isolated = {
            w: rate
            for w, rate in full.isolated.items()
            if self.options.profile_isolated or rng.random() < fraction
        }
        colocated = {k: share for k, share in full.colocated.items() if rng.random() < fraction}
        return JobProfile(key, isolated, colocated)

    # Estimating.

    def estimate(self, profile: JobProfile) -> JobEstimate:
        rows = self._rows_for(profile.key[1])
        values, observed = self._features(profile, rows.pair_keys)
        measured = frozenset(w for w, r in profile.isolated.items() if r > 0)
        if not observed.any():
            # Nothing to match on: the most typical reference job.
            reference = rows.keys[rows.medoid]
            isolated = self.scaled_rates(reference, profile, measured)
            return JobEstimate(profile.key, reference, math.nan, isolated, measured)
        row = values
        if not observed.all():
            matrix = np.vstack([rows.values, values])
            mask = np.vstack([rows.observed, observed])
            settings = self.options.completion
            reference_rows, columns = rows.factors
            new_row = fit_rows(values[None], observed[None], columns, settings.regularisation)
            start = (np.vstack([reference_rows, new_row]), columns)
            completed = complete_matrix(matrix, mask, settings, start)[-1]
            completed = np.clip(completed, 0.0, None)
            pairs_from = len(self.worker_types)
            completed[pairs_from:] = np.minimum(completed[pairs_from:], 1.0)
            row = np.where(observed, values, completed)
        distances = [_cosine_distance(reference, row) for reference in rows.values]
        nearest = int(np.argmin(distances))
        reference = rows.keys[nearest]
        isolated = self.scaled_rates(reference, profile, measured)
        return JobEstimate(profile.key, reference, float(distances[nearest]), isolated, measured)

    def scaled_rates(
        self, reference: JobKey, profile: JobProfile, measured: frozenset[str]
    ) -> dict[str, float]:
        """Isolated steps/s on every worker type: measured ones as they are; the others the
        reference job's, scaled to the measured ones (geometric mean of the ratios)."""
        reference_rates = self.table.isolated[reference]
        ratios = [
            math.log(profile.isolated[w] / reference_rates[w])
            for w in measured
            if reference_rates.get(w, 0.0) > 0
        ]
        scale = math.exp(sum(ratios) / len(ratios)) if ratios else 1.0
        return {
            w: profile.isolated[w] if w in measured else scale * reference_rates[w]
            for w in self.worker_types
        }

    def estimated_table(self, estimates: Iterable[JobEstimate]) -> ThroughputTable:
        """A table of the estimates: isolated rates, and co-located rates for every two jobs
        of one scale factor (the reference pair's normalised rates times their isolated ones)."""
        table = ThroughputTable(source="estimated (Gavel's throughput estimator)")
        chosen = list(estimates)
        for estimate in chosen:
            reference = self.table.isolated.get(estimate.reference, {})
            for worker_type, rate in estimate.isolated.items():
                table.set(*estimate.key, worker_type, rate)
                # Gangs across servers: the reference's slow-down, where it was measured.
                spread = reference.get(f"{worker_type}{UNCONSOLIDATED}", 0.0)
                if spread > 0 and reference.get(worker_type, 0.0) > 0:
                    slowdown = spread / reference[worker_type]
                    table.set(*estimate.key, f"{worker_type}{UNCONSOLIDATED}", rate * slowdown)
        reference_pairs = self.table.pairs
        for first in chosen:
            for second in chosen:
                if first.key[1] != second.key[1]:
                    continue
                measured = reference_pairs.get((first.reference, second.reference))
                if not measured:
                    continue
                per_type: dict[str, tuple[float, float]] = {}
                for worker_type, (a, b) in measured.items():
                    if worker_type not in first.isolated:
                        continue
                    alone_a = self.table.throughput(*first.reference, worker_type)
                    alone_b = self.table.throughput(*second.reference, worker_type)
                    if alone_a <= 0 or alone_b <= 0:
                        continue
                    per_type[worker_type] = (
                        _scaled_share(a, alone_a, first.isolated[worker_type]),
                        _scaled_share(b, alone_b, second.isolated[worker_type]),
                    )
                if per_type:
                    table.pairs[(first.key, second.key)] = per_type
        return table


def _scaled_share(paired: float, alone: float, rate: float) -> float:
    """`paired / alone` of the job's isolated `rate` (exactly `paired` when the rate is the
    reference's own, so a table estimated from itself is itself to the last bit)."""
    return paired if rate == alone else min(paired / alone, 1.0) * rate


def _runs_on(rates: Mapping[str, float], estimator: ThroughputEstimator) -> bool:
    return all(rates.get(w, 0.0) > 0 for w in estimator.worker_types)


def _cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norms == 0:
        return 1.0
    return 1.0 - float(np.dot(a, b)) / norms


def _medoid(values: np.ndarray) -> int:
    """The row with the least summed cosine distance to all rows."""
    norms = np.linalg.norm(values, axis=1)
    norms[norms == 0] = 1.0
    unit = values / norms[:, None]
    return int(np.argmin((1.0 - unit @ unit.T).sum(axis=1)))


class UnknownTypeRates:
    """Rates of job types a table lacks, from what has been measured of them so far: the
    nearest reference job type for the worker types measured (isolated speed-up profiles
    only: a running cluster measures jobs alone), its rates scaled to the measurements. A
    `ThroughputEstimates` fallback; the reference is found once per set of measured types."""

    def __init__(
        self,
        table: ThroughputTable,
        worker_types: Sequence[str] | None = None,
        options: EstimatorOptions | None = None,
    ) -> None:
        try:
            self.estimator: ThroughputEstimator | None = ThroughputEstimator(
                table, worker_types, options
            )
        except ValueError:  # nothing to estimate from: callers keep their default
            self.estimator = None
        self._references: dict[tuple[JobKey, frozenset[str]], JobKey] = {}

    def __call__(self, key: JobKey, measured: Mapping[str, float]) -> dict[str, float] | None:
        estimator = self.estimator
        if estimator is None:
            return None
        types = frozenset(
            w for w, rate in measured.items() if rate > 0 and w in estimator.worker_types
        )
        profile = JobProfile(key, isolated={w: measured[w] for w in types})
        reference = self._references.get((key, types))
        if reference is None:
            reference = estimator.estimate(profile).reference
            self._references[(key, types)] = reference
        return estimator.scaled_rates(reference, profile, types)
