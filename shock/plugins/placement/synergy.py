"""Synergy's resource-aware placements: GPUs plus CPU cores and DRAM per job.

Units arrive in the mechanism's priority order; each is placed in turn.

- `proportional`: GPU-proportional share (each GPU brings its server's CPUs and memory per GPU).
- `greedy`: the job's best-case demand, or the job does not run this round.
- `tune`: the best-case demand where it fits on one server; else the GPUs alone, with the
  fastest cell that the server's free resources allow if that is at least as fast as the fair
  share, else exactly the fair share, reclaimed from jobs placed earlier that hold more than
  theirs. No job ever runs slower than at its GPU-proportional share.
"""

from __future__ import annotations

from collections.abc import Callable

from shock.core.hookspecs import Register, hookimpl
from shock.core.policy import UnitKey
from shock.core.resource_placement import ResourceGrant, ResourceRequest, ServerResources
from shock.resources.books import EPSILON, Books, PerGpu, ServerBook, best_case, fair_share
from shock.resources.catalog import profile_for
from shock.resources.cells import Cell, candidate_cells
from shock.resources.profiles import ResourceProfile


class _ResourcePlacement:
    extends_leases = True
    resource_aware = True

    def place(
        self, servers: list[list[int]], requests: list[object]
    ) -> dict[UnitKey, tuple[int, ...]]:
        raise TypeError(f"placement '{getattr(self, 'name', '?')}' is resource-aware")


class ProportionalPlacement(_ResourcePlacement):
    name = "proportional"
    description = "GPU-proportional CPUs and memory (Synergy's baseline); gangs consolidated"

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        return _each_with(servers, requests, lambda profile: fair_share)


class GreedyPlacement(_ResourcePlacement):
    name = "greedy"
    description = "each job's best-case CPUs and memory, or it waits (Synergy-GREEDY)"

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        return _each_with(servers, requests, best_case)


def _each_with(
    servers: list[ServerResources],
    requests: list[ResourceRequest],
    demand: Callable[[ResourceProfile], Callable[[ServerBook], PerGpu]],
) -> dict[UnitKey, ResourceGrant]:
    """Place units in order, each with `demand(its profile)` per GPU, or not at all."""
    books = Books(servers)
    for request in requests:
        profile = profile_for(request.job_type)
        per_gpu = demand(profile)
        choice = books.choose_gpus(request, per_gpu)
        if choice is not None:
            books.take(request, choice, per_gpu, profile)
    return books.grants()


class TunePlacement(_ResourcePlacement):
    name = "tune"
    description = (
        "best-case CPUs and memory where they fit, else at least the fair share, reclaimed "
        "from jobs holding more (Synergy-TUNE)"
    )

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        books = Books(servers)
        largest = max((len(s.gpus) for s in servers), default=0)
        for request in requests:
            place_tuned(books, request, allow_spread=request.scale_factor > largest)
        return books.grants()


def place_tuned(books: Books, request: ResourceRequest, allow_spread: bool) -> bool:
    """Tune's step for one unit; False if its GPUs fit nowhere."""
    profile = profile_for(request.job_type)
    choice = books.choose_gpus(request, best_case(profile), allow_spread=allow_spread)
    if choice is not None:
        books.take(request, choice, best_case(profile), profile)
        return True
    choice = books.choose_gpus(request, None)
    if choice is None:
        return False
    cells = {book.server.server_id: _cell_for(book, profile, len(gpus)) for book, gpus in choice}

    def per_gpu(book: ServerBook) -> tuple[float, float]:
        cell = cells[book.server.server_id]
        return cell.cpus_per_gpu, cell.mem_gb_per_gpu

    books.take(request, choice, per_gpu, profile)
    return True


def _cell_for(book: ServerBook, profile: ResourceProfile, gpus: int) -> Cell:
    """The fastest cell that fits in what is free, if no slower than the fair share; else
    reclaim from others down to their fair share until this unit's fair share fits."""
    fair = book.fair_per_gpu
    cells = candidate_cells(profile, fair)
    fair_speed = profile.speed(*fair)
    fitting = _fitting(cells, book, gpus)
    if fitting is not None and fitting.speed >= fair_speed - EPSILON:
        return fitting
    _reclaim(book, fair[0] * gpus - book.free_cpus, fair[1] * gpus - book.free_mem)
    fitting = _fitting(cells, book, gpus)
    assert fitting is not None and fitting.speed >= fair_speed - EPSILON  # fair share fits now
    return fitting


def _fitting(cells: tuple[Cell, ...], book: ServerBook, gpus: int) -> Cell | None:
    best: Cell | None = None
    for cell in cells:
        if (
            cell.cpus_per_gpu * gpus <= book.free_cpus + EPSILON
            and cell.mem_gb_per_gpu * gpus <= book.free_mem + EPSILON
            and (best is None or cell.speed > best.speed)
        ):
            best = cell
    return best


def _reclaim(book: ServerBook, cpus_needed: float, mem_needed: float) -> None:
    """Cut units placed here earlier (latest, i.e. lowest priority, first) to their fair share
    in each resource they hold more of, until the amounts needed are free."""
    fair_cpus, fair_mem = book.fair_per_gpu
    for holding in reversed(book.holdings):
        if cpus_needed <= EPSILON and mem_needed <= EPSILON:
            return
        count = len(holding.gpus)
        cpus, memory = holding.cpus, holding.memory_gb
        if cpus_needed > EPSILON and cpus > fair_cpus * count:
            cpus_needed -= cpus - fair_cpus * count
            cpus = fair_cpus * count
        if mem_needed > EPSILON and memory > fair_mem * count:
            mem_needed -= memory - fair_mem * count
            memory = fair_mem * count
        holding.resize(cpus, memory)


@hookimpl
def register_placements(register: Register) -> None:
    register(ProportionalPlacement())
    register(GreedyPlacement())
    register(TunePlacement())
