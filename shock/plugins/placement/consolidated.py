"""Built-in placements: Gavel's first-fit and shock's consolidating best-fit.

Both keep a unit on last round's GPUs when those are still free (lease extension) and place
larger gangs first.
"""

from __future__ import annotations

from itertools import chain, filterfalse, groupby, islice
from operator import attrgetter

from shock.api import PlacementRequest, Register, UnitKey, hookimpl

# Getters in C (they run for every request in every round).
_size = attrgetter("scale_factor")
_key = attrgetter("key")
_previous = attrgetter("previous_gpus")


def _by_size(requests: list[PlacementRequest]) -> list[PlacementRequest]:
    # Stable, so earlier requests go first among gangs of one size.
    return sorted(requests, key=_size, reverse=True)


def _extend_leases(
    requests: list[PlacementRequest], taken: set[int]
) -> dict[UnitKey, tuple[int, ...]]:
    """Each request that had GPUs last round keeps them if they are as many as it needs and
    none is taken (by an earlier request or in `taken`); the kept GPUs are added to `taken`."""
    kept: dict[UnitKey, tuple[int, ...]] = {}
    for request in requests:
        previous = request.previous_gpus
        if previous and len(previous) == request.scale_factor and taken.isdisjoint(previous):
            kept[request.key] = previous
            taken.update(previous)
    return kept


class FirstFitPlacement:
    """Gavel's placement: lease extension, then GPUs in server order (may straddle servers)."""

    name = "first_fit"
    description = "Gavel's placement: keep last round's GPUs, else first free GPUs in order"
    extends_leases = True
    # Gavel's and Shockwave's simulators place this way.
    default_for_presets = ("gavel", "shockwave")

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        sizes = {r.scale_factor for r in requests}
        one_size = len(sizes) == 1  # then no sorting or grouping by size is needed
        ordered = requests if one_size else _by_size(requests)
        taken: set[int] = set()
        placed: dict[UnitKey, tuple[int, ...]] = {}
        gpus_in_order = [gpu for server in servers for gpu in server]
        # Gavel extends leases size class by size class, largest first.
        for size in sorted(sizes, reverse=True):
            same_size = ordered if one_size else [r for r in ordered if r.scale_factor == size]
            placed.update(_extend_leases(same_size, taken))
            cursor = 0
            for request in same_size:
                if request.key in placed:
                    continue
                gpus: list[int] = []
                while len(gpus) < size:
                    gpu = gpus_in_order[cursor]
                    cursor += 1
                    if gpu not in taken:
                        gpus.append(gpu)
                taken.update(gpus)
                placed[request.key] = tuple(gpus)
        return placed


class ConsolidatedPlacement:
    """Lease extension, then each gang on the server that fits it most tightly; a gang that
    fits on no single server takes the fullest-free servers first (fewest servers)."""

    name = "consolidated"
    description = "keep last round's GPUs, else pack each gang onto as few servers as possible"
    extends_leases = True
    # Leases first, then every other unit on the GPUs left, as if the kept ones were gone:
    # the mechanism may keep the leases itself and ask only for the others.
    places_around_leases = True
    default_for_presets = ("default", "pollux", "sia")

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        sizes = set(map(_size, requests))
        ordered = requests if len(sizes) <= 1 else _by_size(requests)
        taken: set[int] = set()
        # (No request had GPUs last round when the mechanism kept their leases itself.)
        placed = _extend_leases(ordered, taken) if any(map(_previous, ordered)) else {}
        # Each server's free GPUs (never changed in place: a server nothing took from is
        # shared with `servers`).
        free = (
            [
                server
                if taken.isdisjoint(server)
                else list(filterfalse(taken.__contains__, server))
                for server in servers
            ]
            if taken
            else list(servers)
        )
        same_sizes = [(sizes.pop(), ordered)] if len(sizes) == 1 else groupby(ordered, _size)
        for need, same_size in same_sizes:
            if placed:
                keys = [request.key for request in same_size if request.key not in placed]
            else:
                keys = list(map(_key, same_size))
            if len(set(keys)) != len(keys):
                keys = list(dict.fromkeys(keys))  # a unit asked for twice is placed once
            gangs = _tightest_fits(free, need, len(keys))
            placed.update(zip(keys, gangs, strict=False))  # (fewer gangs: the rest spread)
            for key in keys[len(gangs) :]:
                placed[key] = _spread(free, need)
        return placed


def _tightest_fits(free: list[list[int]], need: int, wanted: int) -> list[tuple[int, ...]]:
    """Up to `wanted` gangs of `need` GPUs, each on the server that fits it most tightly
    (fewest free GPUs, then lowest index), taken out of `free`.

    One gang after another would pick the same servers in the same order: a server that fits
    most tightly still does after giving a gang (it has even fewer free GPUs and no other
    server that fits has fewer), until it no longer fits; so the servers that fit are taken in
    order of (free GPUs, index), each giving as many gangs as it holds."""
    if need < 1:
        return []  # (`_spread` gives such a gang no GPUs)
    counts = list(map(len, free))
    fitting = sorted((i for i, count in enumerate(counts) if count >= need), key=counts.__getitem__)
    if need == 1:
        return _tightest_singles(free, fitting, wanted)
    gangs: list[tuple[int, ...]] = []
    for index in fitting:
        gpus = free[index]
        take = min(counts[index] // need, wanted - len(gangs)) * need
        # Consecutive runs of `need` GPUs, as tuples (zip over one iterator `need` times).
        gangs.extend(zip(*[iter(gpus[:take])] * need, strict=True))
        free[index] = gpus[take:]
        if len(gangs) == wanted:
            break
    return gangs


def _tightest_singles(
    free: list[list[int]], fitting: list[int], wanted: int
) -> list[tuple[int, ...]]:
    """`_tightest_fits` for one-GPU gangs: the free GPUs of the servers in order."""
    gangs: list[tuple[int, ...]] = list(
        zip(islice(chain.from_iterable(map(free.__getitem__, fitting)), wanted))
    )
    left = len(gangs)
    for index in fitting:  # take them out of `free`
        gpus = free[index]
        free[index] = gpus[left:]
        left -= len(gpus)
        if left <= 0:
            break
    return gangs


def _spread(free: list[list[int]], need: int) -> tuple[int, ...]:
    """A gang that fits on no single server: the servers with the most free GPUs first
    (lowest index among equals), taken out of `free`."""
    chosen: list[int] = []
    for i in sorted(range(len(free)), key=lambda i: (-len(free[i]), i)):
        take = free[i][: need - len(chosen)]
        chosen.extend(take)
        free[i] = free[i][len(take) :]
        if len(chosen) == need:
            break
    return tuple(chosen)


@hookimpl
def register_placements(register: Register) -> None:
    register(FirstFitPlacement())
    register(ConsolidatedPlacement())
