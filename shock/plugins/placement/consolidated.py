"""Built-in placements: Gavel's first-fit and shock's consolidating best-fit.

Both keep a unit on last round's GPUs when those are still free (lease extension) and place
larger gangs first.
"""

from __future__ import annotations

from heapq import heappop, heappush

from shock.core.hookspecs import Register, hookimpl
from shock.core.placement import PlacementRequest
from shock.core.policy import UnitKey


def _by_size(requests: list[PlacementRequest]) -> list[PlacementRequest]:
    # Stable, so earlier requests go first among gangs of one size.
    return sorted(requests, key=_size, reverse=True)


def _size(request: PlacementRequest) -> int:
    return request.scale_factor


def _extend_leases(
    requests: list[PlacementRequest], taken: set[int]
) -> dict[UnitKey, tuple[int, ...]]:
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
    default_for_presets = ("default",)

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        ordered = _by_size(requests)
        taken: set[int] = set()
        placed = _extend_leases(ordered, taken)
        free = [[gpu for gpu in server if gpu not in taken] for server in servers]
        by_free = _ServersByFree(free)
        for request in ordered:
            if request.key in placed:
                continue
            need = request.scale_factor
            best = by_free.tightest(need)
            if best is not None:
                gpus = tuple(free[best][:need])
                free[best] = free[best][need:]
                by_free.add(best, len(free[best]))
            else:
                chosen: list[int] = []
                for i in sorted(range(len(free)), key=lambda i: (-len(free[i]), i)):
                    take = free[i][: need - len(chosen)]
                    chosen.extend(take)
                    free[i] = free[i][len(take) :]
                    if len(chosen) == need:
                        break
                gpus = tuple(chosen)
                by_free = _ServersByFree(free)
            placed[request.key] = gpus
        return placed


class _ServersByFree:
    """Server indices grouped by their number of free GPUs, lowest index first in each group:
    the tightest fit for a gang is then found without scanning every server."""

    def __init__(self, free: list[list[int]]) -> None:
        self.groups: list[list[int]] = [[] for _ in range(max(map(len, free), default=0) + 1)]
        for index, gpus in enumerate(free):
            self.groups[len(gpus)].append(index)  # in increasing order: already a heap

    def tightest(self, need: int) -> int | None:
        """Take out the server with the fewest free GPUs >= need (lowest index on ties)."""
        groups = self.groups
        for count in range(need, len(groups)):
            if groups[count]:
                return heappop(groups[count])
        return None

    def add(self, index: int, free_gpus: int) -> None:
        heappush(self.groups[free_gpus], index)


@hookimpl
def register_placements(register: Register) -> None:
    register(FirstFitPlacement())
    register(ConsolidatedPlacement())
