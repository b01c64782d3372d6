"""Last round's assignments, and the lease counts: a unit of last round that is still here
had a lease it could extend; it extended it if it runs on exactly the same GPUs again,
otherwise it was preempted."""

from __future__ import annotations

from shock.core.policy import UnitKey
from shock.engine.units import ASSIGNED_UNIT, KEPT_GPUS, UNIT_KEY, Assignment, MechanismStats


class LeaseBook:
    def __init__(self) -> None:
        self.previous_round: dict[UnitKey, Assignment] = {}
        # Units of `previous_round` that left since (they were all here when it was set).
        self._left_since_last_round: set[UnitKey] = set()

    def left(self, key: UnitKey) -> None:
        """A unit left (a job finished or was withdrawn, a pair was dropped)."""
        if key in self.previous_round:
            self._left_since_last_round.add(key)

    def back(self, key: UnitKey) -> None:
        """A unit of that key is here (again)."""
        self._left_since_last_round.discard(key)

    def count(self, assignments: list[Assignment], stats: MechanismStats) -> None:
        """Count last round's units that are still here (lease opportunities) and those that
        run on the same GPUs again (extensions: the assignments the placement marked as
        having kept their GPUs, which it does exactly when last round's were of the same type
        and equal); this round becomes last round."""
        # Last round's units were all here then; those that left since are noted as they go.
        opportunities = len(self.previous_round) - len(self._left_since_last_round)
        self._left_since_last_round = set()
        extensions = sum(map(KEPT_GPUS, assignments))
        stats.lease_opportunities += opportunities
        stats.lease_extensions += extensions
        stats.preemptions += opportunities - extensions
        keys = map(UNIT_KEY, map(ASSIGNED_UNIT, assignments))
        self.previous_round = dict(zip(keys, assignments, strict=True))
