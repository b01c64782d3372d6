"""Where the chosen units run: each worker type's units placed on its GPUs by the run's
placement plugin, keeping leases where the placement extends them, and with CPUs and memory
where it is resource-aware.

A placement that `extends_leases` would keep every unit that ran on a worker type last round
where it was, so where all of them stayed the placement is not asked at all; one that also
`places_around_leases` is asked only for the units that moved, on the GPUs the others do not
hold. Every answer of a plugin is checked (`allocation_check`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import chain, compress, count, filterfalse, repeat
from operator import eq, itemgetter, not_
from typing import cast

import numpy as np

from shock.core.model import Cluster
from shock.core.placement import Placement, PlacementRequest
from shock.core.policy import UnitKey
from shock.core.resource_placement import (
    ResourcePlacement,
    ResourceRequest,
    ServerResources,
    requested_per_gpu,
)
from shock.core.run import MechanismConfig
from shock.engine.allocation_check import check_resource_placement, placed_in_order
from shock.engine.units import (
    ASSIGNED_COLUMN,
    ASSIGNED_GPUS,
    NOT_PLACED,
    ONLY_JOBS,
    RATES_OF,
    SCALE_FACTOR,
    UNIT_KEY,
    Assignment,
    JobState,
    PairState,
    Unit,
    new_tuple,
)

# Up to this many units of a type, their assignments are cheaper built in a Python loop.
_FEW_PLACED = 24


class RoundPlacement:
    """A run's servers by worker type and its placement plugin: places each round."""

    def __init__(
        self,
        cluster: Cluster,
        worker_types: tuple[str, ...],
        placement: Placement,
        config: MechanismConfig,
    ) -> None:
        self.placement = placement
        self.worker_types = worker_types
        self.placement_sensitive = config.placement_sensitive
        self.servers_by_column: list[list[list[int]]] = [[] for _ in worker_types]
        self.server_of_gpu: dict[int, int] = {}
        self.resource_aware = getattr(placement, "resource_aware", False)
        self.resource_servers: list[list[ServerResources]] = [[] for _ in worker_types]
        self._nominal_speeds: dict[tuple[str, int, int], float] = {}
        next_gpu = 0
        for server in cluster.servers():
            gpus = list(range(next_gpu, next_gpu + server.num_gpus))
            next_gpu += server.num_gpus
            self.servers_by_column[worker_types.index(server.worker_type)].append(gpus)
            if self.resource_aware:
                self.resource_servers[worker_types.index(server.worker_type)].append(
                    ServerResources.of(server, tuple(gpus))
                )
            for gpu in gpus:
                self.server_of_gpu[gpu] = server.server_id
        # Each type's GPUs, to check placements against.
        self.gpus_by_column = [frozenset(chain.from_iterable(s)) for s in self.servers_by_column]

    def place(
        self,
        order: list[int],
        chosen: dict[int, list[Unit]],
        previous_round: dict[UnitKey, Assignment],
        active: dict[int, JobState],
        allocated: np.ndarray | None,
    ) -> list[Assignment]:
        """The chosen units of each worker type (in `order`) on GPUs, with last round's
        assignments (`previous_round`) for leases. `allocated`: where units held back (no
        allocation yet) are to be left out here, each counter row's "is allocated"."""
        assignments: list[Assignment] = []
        previous_get = previous_round.get
        allocated_rows: list[bool] | None = None
        extends_leases = getattr(self.placement, "extends_leases", False)
        around_leases = extends_leases and getattr(self.placement, "places_around_leases", False)
        if self.resource_aware:
            self.reset_speeds(active)
        for column in order:
            runnable = chosen[column]
            if allocated is not None:
                if allocated_rows is None:
                    allocated_rows = allocated.tolist()
                runnable = [unit for unit in runnable if allocated_rows[unit.slot]]
            if not runnable:
                continue
            if self.resource_aware:
                assignments.extend(self._place_with_resources(column, runnable, previous_round))
                continue
            keys = list(map(UNIT_KEY, runnable))
            # Each unit's assignment of last round (`NOT_PLACED` if it did not run).
            lasts = list(map(previous_get, keys, repeat(NOT_PLACED)))
            if around_leases:
                placed_around = self._place_around_leases(column, runnable, keys, lasts)
                if placed_around is not None:
                    assignments.extend(placed_around)
                    continue
            # Each unit's GPUs of last round if it ran on this type (None otherwise).
            previous_gpus = [None if last[1] != column else last[3] for last in lasts]
            if extends_leases and not around_leases and None not in previous_gpus:
                # Everyone stayed: the placement would keep them all where they were.
                placed_around = self._place_around_leases(column, runnable, keys, lasts)
                if placed_around is not None:
                    assignments.extend(placed_around)
                    continue
            sizes = list(map(SCALE_FACTOR, runnable))
            fields = zip(keys, sizes, previous_gpus, strict=True)
            requests = list(map(new_tuple, repeat(PlacementRequest), fields))
            servers = self.servers_by_column[column]
            gpus_of = self.placement.place(servers, requests)
            placed = cast(
                list[tuple[int, ...]],
                placed_in_order(
                    self.placement,
                    servers,
                    requests,
                    gpus_of,
                    self.gpus_by_column[column],
                    keys,
                    sizes,
                ),
            )
            # Kept: ran on exactly these GPUs of this type last round.
            kept = map(eq, previous_gpus, placed)
            assignments.extend(self._assignments(column, runnable, placed, kept, sizes))
        return assignments

    def _place_around_leases(
        self,
        column: int,
        runnable: list[Unit],
        keys: list[UnitKey],
        lasts: list[Assignment],
    ) -> list[Assignment] | None:
        """With a placement that extends leases: the units that ran on this type last round
        keep their GPUs, and the placement places only the others, on the GPUs left (called
        only when there are no others, or when the placement says it places around leases
        exactly as it would with them). None where last round's GPUs cannot all be kept:
        then every unit goes to the placement."""
        stayed = list(map(eq, map(ASSIGNED_COLUMN, lasts), repeat(column)))
        everyone_stayed = all(stayed)
        if everyone_stayed and len(runnable) <= _FEW_PLACED:
            return self._few_stay(column, runnable, lasts)
        # Each unit's GPUs: last round's for now (the others' are replaced below).
        gpus = list(map(ASSIGNED_GPUS, lasts))
        sizes = list(map(SCALE_FACTOR, runnable))
        if everyone_stayed:
            held = list(chain.from_iterable(gpus))
            if list(map(len, gpus)) != sizes:
                return None
        else:
            stayed_gpus = list(compress(gpus, stayed))
            held = list(chain.from_iterable(stayed_gpus))
            if list(map(len, stayed_gpus)) != list(compress(sizes, stayed)):
                return None
        held_set = set(held)
        if len(held_set) != len(held) or not held_set <= self.gpus_by_column[column]:
            return None  # (a resumed run's memory may not fit): the placement decides
        if not everyone_stayed:
            # The others: placed on the GPUs the stayed units do not hold.
            moved = list(map(not_, stayed))
            unit_keys = list(compress(keys, moved))
            unit_sizes = list(compress(sizes, moved))
            fields = zip(unit_keys, unit_sizes, repeat(None))
            requests = list(map(new_tuple, repeat(PlacementRequest), fields))
            servers = [
                server
                if held_set.isdisjoint(server)
                else list(filterfalse(held_set.__contains__, server))
                for server in self.servers_by_column[column]
            ]
            gpus_of = self.placement.place(servers, requests)
            placed = placed_in_order(
                self.placement,
                servers,
                requests,
                gpus_of,
                self.gpus_by_column[column],
                unit_keys,
                unit_sizes,
                held_set,
            )
            deque(map(gpus.__setitem__, compress(count(), moved), placed), maxlen=0)
        return self._assignments(column, runnable, gpus, stayed, sizes)

    def _few_stay(
        self, column: int, units: list[Unit], lasts: list[Assignment]
    ) -> list[Assignment] | None:
        """`_place_around_leases` where every unit ran on this type last round, as one loop
        (cheaper for a few units): last round's assignment where it still holds (the same
        unit, already marked kept, at the unit's rates now), else a new one on its GPUs."""
        sensitive = self.placement_sensitive
        worker_type = self.worker_types[column]
        held: set[int] = set()
        built: list[Assignment] = []
        append = built.append
        for unit, last in zip(units, lasts, strict=True):
            gpus = last[3]
            if len(gpus) != unit.scale_factor or not held.isdisjoint(gpus):
                return None  # (a resumed run's memory may not fit): the placement decides
            held.update(gpus)
            if type(unit) is JobState and (len(gpus) == 1 or not sensitive):
                unit_rates: tuple[float, ...] = (unit.rates[column],)  # `_rates_on`, inline
            else:
                unit_rates = self.rates_on(unit, column, gpus)
            if last[5] and last[0] is unit and last[4] == unit_rates and last[6] is None:
                append(last)
            else:
                fields = (unit, column, worker_type, gpus, unit_rates, True, None)
                append(new_tuple(Assignment, fields))
        if not held <= self.gpus_by_column[column]:
            return None
        return built

    def _assignments(
        self,
        column: int,
        units: list[Unit],
        placed: list[tuple[int, ...]],
        kept: Iterable[bool],
        sizes: list[int],
    ) -> list[Assignment]:
        """The units' assignments on these GPUs of a worker type."""
        worker_type = self.worker_types[column]
        if (
            len(units) > _FEW_PLACED
            and set(map(type, units)) == ONLY_JOBS
            and (not self.placement_sensitive or max(sizes) == 1)
        ):
            # Jobs at their one rate per type (`_rates_on`): all built in C.
            rates = zip(map(itemgetter(column), map(RATES_OF, units)))
            fields = zip(
                units, repeat(column), repeat(worker_type), placed, rates, kept, repeat(None)
            )
            return list(map(new_tuple, repeat(Assignment), fields))
        sensitive = self.placement_sensitive
        built: list[Assignment] = []
        append = built.append
        for unit, gpus, kept_gpus in zip(units, placed, kept, strict=False):  # (`kept` may repeat)
            if type(unit) is JobState and (len(gpus) == 1 or not sensitive):
                unit_rates: tuple[float, ...] = (unit.rates[column],)  # `_rates_on`, inline
            else:
                unit_rates = self.rates_on(unit, column, gpus)
            append(
                new_tuple(
                    Assignment, (unit, column, worker_type, gpus, unit_rates, kept_gpus, None)
                )
            )
        return built

    def _place_with_resources(
        self, column: int, runnable: list[Unit], previous: dict[UnitKey, Assignment]
    ) -> list[Assignment]:
        """Every unit re-placed with CPUs and memory; its rates scaled by the grant's speed.
        Units the placement leaves out do not run this round."""
        last_gpus: dict[UnitKey, tuple[int, ...]] = {}
        for unit in runnable:
            last = previous.get(unit.key)
            if last is not None and last.column == column:
                last_gpus[unit.key] = last.gpus
        requests = [
            ResourceRequest(
                unit.key,
                unit.scale_factor,
                unit.members[0].spec.job_type,
                last_gpus.get(unit.key),
                requested_per_gpu(unit.members[0].spec),
            )
            for unit in runnable
        ]
        placement = cast(ResourcePlacement, self.placement)
        grants = placement.place_with_resources(self.resource_servers[column], requests)
        check_resource_placement(placement, self.servers_by_column[column], requests, grants)
        placed = []
        worker_type = self.worker_types[column]
        for unit in runnable:
            grant = grants.get(unit.key)
            if grant is None:
                continue
            parts, speed = grant
            gpus = tuple(parts[0].gpus) if len(parts) == 1 else grant.gpus
            if type(unit) is JobState:
                unit.speed = speed
                rates: tuple[float, ...] = (self.rates_on(unit, column, gpus)[0] * speed,)
            else:
                rates = tuple(rate * speed for rate in self.rates_on(unit, column, gpus))
            kept = last_gpus.get(unit.key) == gpus
            placed.append(Assignment(unit, column, worker_type, gpus, rates, kept, grant))
        return placed

    def reset_speeds(self, active: dict[int, JobState]) -> None:
        """Every job's speed back to what the placement aims for (Synergy resets each job's
        speedup before every round); the round's grants then overwrite it."""
        nominal = getattr(self.placement, "nominal_speed", None)
        if nominal is None:
            for job in active.values():
                job.speed = 1.0
            return
        for job in active.values():
            rates = job.rates
            column = rates.index(max(rates))  # the fastest type (the first of equals)
            key = (job.spec.job_type, job.scale_factor, column)
            speed = self._nominal_speeds.get(key)
            if speed is None:
                servers = self.resource_servers[column]
                speed = nominal(job.spec.job_type, job.scale_factor, servers[0]) if servers else 1.0
                self._nominal_speeds[key] = speed
            job.speed = speed

    def assignment(self, unit: Unit, column: int, gpus: tuple[int, ...], kept: bool) -> Assignment:
        return Assignment(
            unit, column, self.worker_types[column], gpus, self.rates_on(unit, column, gpus), kept
        )

    def rates_on(self, unit: Unit, column: int, gpus: tuple[int, ...]) -> tuple[float, ...]:
        """Steps/s of each member of `unit` on these GPUs of a worker type."""
        if isinstance(unit, PairState):
            return unit.pair_rates[column]
        if (
            len(gpus) > 1
            and self.placement_sensitive
            and len({self.server_of_gpu[g] for g in gpus}) > 1
        ):
            return (unit.unconsolidated_rates[column],)  # the gang straddles servers
        return (unit.rates[column],)
