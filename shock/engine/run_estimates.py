"""The throughputs a run's policy sees when some (or all) are estimated.

`--estimate-throughputs unknown`: job types the table lacks are estimated by Gavel's
estimator (from what `--profile` measured of them, if anything); the rest keep the table's
rates. `--estimate-throughputs all`: the table is hidden from the policy (Gavel's estimator
experiment): every job type is profiled partially from the table and estimated, and the
simulator runs jobs at the table's rates (the oracle) and reports them as a real cluster
would, so the estimates are replaced by measurements as jobs run.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from shock.core.errors import InputError
from shock.core.throughputs import JobKey, ThroughputTable
from shock.core.trace import Trace
from shock.engine.throughput_estimator import (
    EstimatorOptions,
    JobEstimate,
    JobProfile,
    ThroughputEstimator,
)

ESTIMATION_MODES = ("off", "unknown", "all")


@dataclass(frozen=True, slots=True)
class RunEstimates:
    table: ThroughputTable  # what the policy sees
    oracle: ThroughputTable  # what jobs run at in a simulation (rates it lacks: the estimate's)
    estimates: dict[JobKey, JobEstimate]  # the job types that were estimated


def estimate_run_table(
    keys: Iterable[JobKey],
    table: ThroughputTable,
    worker_types: tuple[str, ...],
    mode: str,
    options: EstimatorOptions,
    profiles: ThroughputTable | None = None,
) -> RunEstimates:
    """The run's table under `mode` (see the module); `profiles` holds what was measured of
    job types the table lacks (a Gavel-format table, possibly partial)."""
    if mode not in ESTIMATION_MODES:
        raise InputError(
            f"'{mode}' is not one of {', '.join(ESTIMATION_MODES)}", field="--estimate-throughputs"
        )
    wanted = sorted(set(keys))
    try:
        estimator = ThroughputEstimator(table, worker_types, options)
    except ValueError as exc:
        raise InputError(str(exc), field="--estimate-throughputs") from exc
    rng = random.Random(options.seed)
    estimates: dict[JobKey, JobEstimate] = {}
    chosen: list[JobEstimate] = []
    for key in wanted:
        known = max((table.throughput(*key, w) for w in worker_types), default=0.0) > 0
        if known and mode == "unknown":
            # Kept as measured; its own reference for the co-located rates of new jobs.
            rates = {w: table.throughput(*key, w) for w in worker_types}
            chosen.append(JobEstimate(key, key, 0.0, rates, frozenset(worker_types)))
            continue
        if known:
            profile = estimator.sample_profile(key, table, rng)
        elif profiles is not None and key in profiles.isolated:
            profile = estimator.profile_from_table(key, profiles)
        else:
            profile = JobProfile(key)
        estimate = estimator.estimate(profile)
        estimates[key] = estimate
        chosen.append(estimate)
    run_table = estimator.estimated_table(chosen)
    run_table.ranking = table.fastest_first(worker_types)
    if mode == "unknown":
        # Every measured entry stays as it is (other batch sizes and unconsolidated rates
        # too); the estimated types and their pairs come on top.
        merged = ThroughputTable(
            isolated={key: dict(rates) for key, rates in table.isolated.items()},
            pairs={key: dict(rates) for key, rates in table.pairs.items()},
            ranking=run_table.ranking,
        )
        for key in estimates:
            merged.isolated[key] = dict(run_table.isolated[key])
        for (first, second), paired in run_table.pairs.items():
            if first in estimates or second in estimates:
                merged.pairs[(first, second)] = paired
        run_table = merged
    run_table.source = f"{table.source} with estimated throughputs ({mode})"
    return RunEstimates(run_table, table, estimates)


def check_throughputs_known(
    trace: Trace, table: ThroughputTable, worker_types: tuple[str, ...]
) -> None:
    """A job type the table has no rate for stops the run, naming its line and the way out."""
    seen: set[tuple[str, int]] = set()
    for job in trace.jobs:
        key = (job.job_type, job.scale_factor)
        if key in seen:
            continue
        seen.add(key)
        if not any(table.throughput(*key, w) > 0 for w in worker_types):
            raise InputError(
                f"throughput table {table.source} has no throughput for '{job.job_type}' at "
                f"scale factor {job.scale_factor} on {', '.join(worker_types)} (measure it "
                "with `shock profile`, or estimate it with --estimate-throughputs unknown)",
                path=trace.source,
                line=job.source_line,
                field="job_type",
            )
