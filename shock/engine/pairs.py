"""Space sharing: pairs of jobs on one gang of GPUs, as a policy that packs allocates them.

A pair is its own unit with its own counters (as in Gavel); each member progresses at its
co-located throughput from the table. A pair exists from the allocation that gives it a share
until one of its members leaves or changes batch size.
"""

from __future__ import annotations

from shock.core.run import MechanismConfig
from shock.core.throughputs import ThroughputTable
from shock.engine.leases import LeaseBook
from shock.engine.unit_counters import UnitCounters
from shock.engine.units import JobState, PairState


class PairBook:
    def __init__(
        self,
        table: ThroughputTable,
        worker_types: tuple[str, ...],
        config: MechanismConfig,
        counters: UnitCounters,
        worker_time: list[float],
        leases: LeaseBook,
    ) -> None:
        self.pairs: dict[tuple[int, int], PairState] = {}
        self._table = table
        self._worker_types = worker_types
        self._counters = counters
        self._worker_time = worker_time  # the mechanism's, changed in place
        self._leases = leases
        # Time owed: a new pair has no credit, so it is urgent until it has run. Gavel's rule:
        # Gavel tracks every possible pair from its later member's arrival, with no time; the
        # first reset after that owes it half a round and credits it half a round, and a pair
        # is only ever allocated after a reset, so it starts as if it had been through one.
        self._credit = config.round_length_s / 2 if config.selection == "gavel" else 0.0

    def pair(self, key: tuple[int, int], active: dict[int, JobState]) -> PairState | None:
        """The pair of these two jobs, made if new; None if a member left or the jobs' gangs
        differ."""
        return self.pairs.get(key) or self._new_pair(key, active)

    def _new_pair(self, key: tuple[int, int], active: dict[int, JobState]) -> PairState | None:
        first, second = (active.get(job_id) for job_id in key)
        if first is None or second is None or first.scale_factor != second.scale_factor:
            return None
        size = first.scale_factor
        pair_rates = [
            self._table.pair_throughput(
                (first.spec.job_type, size), (second.spec.job_type, size), worker_type
            )
            for worker_type in self._worker_types
        ]
        if first.spec.job_type == second.spec.job_type:
            # Identical jobs are interchangeable: each gets the mean of the two measurements.
            pair_rates = [((a + b) / 2, (a + b) / 2) for a, b in pair_rates]
        credit = self._credit
        pair = PairState(
            key=key,
            members=(first, second),
            scale_factor=size,
            pair_rates=pair_rates,
            rates=[min(a, b) for a, b in pair_rates],
            member_ids=key,
        )
        pair.slot = self._counters.acquire(pair, -1, size, 1.0, pair.rates, credit, credit)
        pair.counters = self._counters
        if credit:
            for column in range(len(self._worker_types)):
                self._worker_time[column] += credit
        self.pairs[key] = pair
        self._leases.back(key)
        return pair

    def drop_pairs_of(self, job: JobState) -> None:
        """A job left or changed: its pairs go, and their counter rows with them."""
        if self.pairs:
            for key in [k for k in self.pairs if job.job_id in k]:
                self._counters.release(self.pairs.pop(key).slot)
                self._leases.left(key)

    def allocated_slots(self) -> list[int]:
        """The counter rows of the pairs the current allocation gives a share, by key."""
        allocated = self._counters.allocated
        paired = [self.pairs[k].slot for k in sorted(self.pairs)]
        return [slot for slot in paired if allocated[slot]]
