"""The mechanism's per-unit counters, one row per unit in numpy matrices.

Every job and pair the mechanism tracks holds a slot: a row of each (slot, worker type)
matrix (throughputs, allocated share, time received since the last reset, carried deficit).
A round's selection and the allocation reset are then array operations over all units
instead of Python loops over every unit and type. Freed slots are re-used; the matrices
double when full. Received time is credited in batches: a round credits each unit once, and
the batch is added (in credit order) before anything reads the counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np

_FIRST_CAPACITY = 64
# The counters of a unit's block, in order.
_COUNTERS = ("time_so_far", "deficit", "shares", "rates")
TIME_SO_FAR, DEFICIT, SHARES, RATES = range(len(_COUNTERS))

# One unit's counters per worker type: time received, deficit, share (None: no allocation).
Counters = tuple[list[float], list[float], list[float] | None]


class SlotHolder(Protocol):
    """A job or pair as the counters see it."""

    slot: int
    rates: list[float]
    final_counters: Counters | None


class UnitRates(list[float]):
    """A unit's throughputs per worker type: a list whose item assignments (the engine
    replaces a rate it measured) also update the unit's row of the counters."""

    __slots__ = ("_counters", "_slot")

    def __init__(self, rates: Iterable[float], counters: UnitCounters, slot: int) -> None:
        super().__init__(rates)
        self._counters = counters
        self._slot = slot

    def __setitem__(self, index: int, value: float) -> None:  # type: ignore[override]
        super().__setitem__(index, value)
        if self._slot >= 0:
            self._counters.rates[self._slot] = self

    def detach(self) -> None:
        """The unit left: its slot is no longer its own."""
        self._slot = -1


class UnitCounters:
    """Rows of counters for the mechanism's units (see the module's docstring)."""

    def __init__(self, types: int) -> None:
        self.types = types
        self.capacity = 0
        # (slot, counter, worker type): one gather takes a unit's four rows; the counters'
        # names below are views of it.
        self.block = np.zeros((0, len(_COUNTERS), types))
        self._name_views()
        self.allocated = np.zeros(0, dtype=bool)
        self.in_use = np.zeros(0, dtype=bool)
        # What a unit's slot holds for the policy: its job id (-1: a pair), GPUs, weight.
        self.job_id = np.zeros(0, dtype=np.int64)
        self.gpus = np.zeros(0)
        self.weight = np.zeros(0)
        # A job's progress (steps done, seconds on GPUs, steps in all); unused for pairs.
        self.steps_done = np.zeros(0)
        self.time_run = np.zeros(0)
        self.total_steps = np.zeros(0)
        self.owner: list[SlotHolder | None] = []  # the unit holding each slot
        # The same as an object array, for gathering many slots' units at once.
        self.owners = np.empty(0, dtype=object)
        self.size: list[int] = []  # its gang size
        self._free: list[int] = []
        # The jobs' slots by job id, kept between calls of `jobs_by_id`: jobs mostly arrive in
        # id order, so a new one goes at the end and a sort is needed only when one does not.
        # Entries of jobs that left stay until the next call drops them.
        self._by_id_slots = np.zeros(0, dtype=np.intp)
        self._by_id_ids = np.zeros(0, dtype=np.int64)
        self._arrived: list[tuple[int, int]] = []  # (slot, id) since the last call
        self._largest_id = -1
        self._by_id_sorted = True
        self._released: list[int] = []  # free once the pending credits are added
        # Credits not yet added: flat indices (slot x stride + column: received time is the
        # block's first counter), and seconds.
        self.stride = len(_COUNTERS) * types
        self._pending_index: list[int] = []
        self._pending_seconds: list[float] = []
        self._grow()

    def _grow(self) -> None:
        old = self.capacity
        new = max(_FIRST_CAPACITY, 2 * old)
        extra = new - old

        def grown(matrix: np.ndarray) -> np.ndarray:
            return np.concatenate([matrix, np.zeros((extra, *matrix.shape[1:]), matrix.dtype)])

        self.block = grown(self.block)
        self._name_views()
        self.allocated = grown(self.allocated)
        self.in_use = grown(self.in_use)
        self.job_id = grown(self.job_id)
        self.gpus = grown(self.gpus)
        self.weight = grown(self.weight)
        self.steps_done = grown(self.steps_done)
        self.time_run = grown(self.time_run)
        self.total_steps = grown(self.total_steps)
        self.owner.extend([None] * extra)
        self.owners = np.concatenate([self.owners, np.full(extra, None, dtype=object)])
        self.size.extend([0] * extra)
        self._free.extend(range(new - 1, old - 1, -1))  # popped lowest first
        self.capacity = new

    def _name_views(self) -> None:
        block = self.block
        self.time_so_far = block[:, TIME_SO_FAR]  # seconds received since the last reset
        self.deficit = block[:, DEFICIT]  # time owed, carried over resets
        self.shares = block[:, SHARES]  # the allocation's; 0 where it has none
        self.rates = block[:, RATES]  # isolated (or co-located) steps/s

    def acquire(
        self,
        owner: SlotHolder,
        job_id: int,
        size: int,
        weight: float,
        rates: Sequence[float],
        time_so_far: float,
        deficit: float,
        total_steps: float = 0.0,
    ) -> int:
        """A slot for a new unit (a job, or a pair with job_id -1), with its counters set
        (and no allocation, no progress)."""
        if not self._free:
            self._grow()
        slot = self._free.pop()
        self.rates[slot] = rates
        self.shares[slot] = 0.0
        self.allocated[slot] = False
        self.time_so_far[slot] = time_so_far
        self.deficit[slot] = deficit
        self.in_use[slot] = True
        self.job_id[slot] = job_id
        self.gpus[slot] = size
        self.weight[slot] = weight
        if job_id >= 0:
            if job_id > self._largest_id:
                self._arrived.append((slot, job_id))
                self._largest_id = job_id
            else:
                self._by_id_sorted = False
        self.steps_done[slot] = 0.0
        self.time_run[slot] = 0.0
        self.total_steps[slot] = total_steps
        self.owner[slot] = owner
        self.owners[slot] = owner
        self.size[slot] = size
        return slot

    def release(self, slot: int) -> None:
        """The unit left; its slot is re-used once the pending credits are added."""
        self.in_use[slot] = False
        self._released.append(slot)

    def jobs_by_id(self) -> tuple[np.ndarray, np.ndarray]:
        """The slots of the jobs (not pairs) in use, by job id, and their ids."""
        if not self._by_id_sorted:
            slots = np.flatnonzero(self.in_use & (self.job_id >= 0))
            ids = self.job_id[slots]
            order = np.argsort(ids, kind="stable")
            slots, ids = slots[order], ids[order]
            self._largest_id = int(ids[-1]) if len(ids) else -1
            self._by_id_sorted = True
        else:
            slots, ids = self._by_id_slots, self._by_id_ids
            if self._arrived:
                arrived = np.array(self._arrived, dtype=np.int64).reshape(-1, 2)
                slots = np.concatenate((slots, arrived[:, 0].astype(np.intp)))
                ids = np.concatenate((ids, arrived[:, 1]))
            # Drop the jobs that left (their slot is free, or another job's now).
            still = self.in_use[slots] & (self.job_id[slots] == ids)
            if not still.all():
                slots, ids = slots[still], ids[still]
        self._arrived.clear()
        self._by_id_slots, self._by_id_ids = slots, ids
        return slots, ids

    def credit(self, slot: int, column: int, seconds: float) -> None:
        self._pending_index.append(slot * self.stride + column)
        self._pending_seconds.append(seconds)

    def credit_appenders(self) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """`credit` in two calls, for a caller that credits every unit every round: append
        slot x `stride` + column, then the seconds."""
        return self._pending_index.append, self._pending_seconds.append

    def flush(self) -> None:
        """Add the pending credits, each in turn (np.add.at: a unit credited twice adds
        both, in order), and free the released slots (their units keep their last
        counters)."""
        if self._pending_index:
            np.add.at(
                self.block.reshape(-1),
                np.array(self._pending_index, dtype=np.intp),
                np.array(self._pending_seconds, dtype=float),
            )
            self._pending_index.clear()  # in place: `credit_appenders` append to them
            self._pending_seconds.clear()
        if self._released:
            for slot in self._released:
                owner = self.owner[slot]
                if owner is not None:
                    owner.final_counters = self._row(slot)
                    owner.slot = -1
                    if isinstance(owner.rates, UnitRates):
                        owner.rates.detach()
                self.owner[slot] = None
                self.owners[slot] = None
            self._free.extend(self._released)
            self._released = []

    def of(self, unit: SlotHolder) -> Counters:
        """A unit's counters (copies), also after it left."""
        self.flush()
        slot = unit.slot
        if slot < 0:
            return unit.final_counters or ([], [], None)
        return self._row(slot)

    def _row(self, slot: int) -> Counters:
        share = self.shares[slot].tolist() if self.allocated[slot] else None
        return self.time_so_far[slot].tolist(), self.deficit[slot].tolist(), share

    def set_column(
        self, slot: int, column: int, time_so_far: float, deficit: float, share: float | None
    ) -> None:
        """One unit's counters on one worker type (a resumed run's); a share makes the unit
        allocated, with 0 on the types not set."""
        self.flush()
        self.time_so_far[slot, column] = time_so_far
        self.deficit[slot, column] = deficit
        if share is not None:
            self.allocated[slot] = True
            self.shares[slot, column] = share

    def set_times(
        self, slot: int, time_so_far: Sequence[float], deficit: Sequence[float]
    ) -> None:
        self.flush()
        self.time_so_far[slot] = time_so_far
        self.deficit[slot] = deficit

    def clear_shares(self) -> None:
        self.shares.fill(0.0)
        self.allocated.fill(False)

    def set_shares(self, slots: np.ndarray, fractions: np.ndarray) -> None:
        self.shares[slots] = fractions
        self.allocated[slots] = True

    def carry_owed(self, elapsed: float, half_round: float) -> None:
        """Gavel's reset, element by element: wherever a unit was owed or received anything,
        deficit += share x elapsed - (received - half a round), and received restarts at
        half a round; the other entries stay as they are."""
        self.flush()
        time_so_far, deficit = self.time_so_far, self.deficit
        should = np.where(self.allocated[:, None], self.shares * elapsed, 0.0)
        received = time_so_far - half_round
        # (Rows not in use are left as they are: a unit that takes one sets its own.)
        moved = ((should != 0.0) | (received != 0.0)) & self.in_use[:, None]
        np.add(deficit, should - received, out=deficit, where=moved)
        np.copyto(time_so_far, half_round, where=moved)
