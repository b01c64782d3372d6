"""Throughputs for Synergy traces, derived from the profiles.

A Synergy trace gives iterations, not run times; Synergy's simulator runs a job at one
iteration per `iter_time_s` (its profile's iteration time at the fair share), whatever its
GPU count (multi-GPU jobs use the 1-GPU profile, see the data README). The derived table gives
every model that rate on each of the cluster's GPU types: Synergy's profiles know one GPU type,
so on a cluster with several types they all run at that speed (pass `--throughputs` for
type-specific rates). The resource-aware placements then scale it by the speed of the CPUs and
memory granted.
"""

from __future__ import annotations

from collections.abc import Iterable

from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable
from shock.resources.profiles import PROFILE_FILE, synergy_profiles


def synergy_throughput_table(
    jobs: Iterable[JobSpec], worker_types: Iterable[str], fallback: ThroughputTable | None = None
) -> ThroughputTable:
    """Steps/s at the fair share for every (model, GPU count) of `jobs` that has a profile;
    other job types (a Gavel job type written as a Synergy CSV) take `fallback`'s entries. The
    rest stay out, so the mechanism reports them naming their trace line."""
    profiles = synergy_profiles()
    types = tuple(worker_types)
    # Profiles do not depend on the GPU type: the fallback's order of speed stands.
    ranking = fallback.fastest_first(types) if fallback is not None else ()
    table = ThroughputTable(source=f"{PROFILE_FILE} iteration times (bundled)", ranking=ranking)
    for job in jobs:
        profile = profiles.get(job.job_type)
        for worker_type in types:
            if profile is not None and profile.iter_time_s > 0:
                rate = 1.0 / profile.iter_time_s
            elif fallback is not None:
                rate = fallback.throughput(job.job_type, job.scale_factor, worker_type)
            else:
                continue
            if rate > 0:
                table.set(job.job_type, job.scale_factor, worker_type, rate)
    return table
