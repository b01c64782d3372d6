"""Synergy's resource-aware placements: GPUs plus CPU cores and DRAM per job.

Units arrive in the mechanism's priority order; each is placed in turn.

- `proportional`: GPU-proportional share (each GPU brings its server's CPUs and memory per GPU).
- `greedy`: the job's best-case demand, or the job does not run this round.
- `tune`: Synergy-TUNE as its simulator does it: the best-case demand (capped at one server)
  wherever it fits; else the fair share; else the fair share (or a smaller best case) made
  room for by cutting jobs placed earlier back to their fair share. A job runs at its best
  case or at no less than its GPU-proportional share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shock.api import Register, ResourceGrant, ResourceRequest, ServerResources, UnitKey, hookimpl
from shock.resources.books import (
    EPSILON,
    Books,
    PerGpu,
    ServerBook,
    best_case,
    capped_best_case,
    fair_share,
)
from shock.resources.catalog import profile_for, profile_for_request
from shock.resources.profiles import ResourceProfile

_Grants = dict[UnitKey, ResourceGrant]


class _ResourcePlacement:
    extends_leases = True
    resource_aware = True

    def place(
        self, servers: list[list[int]], requests: list[object]
    ) -> dict[UnitKey, tuple[int, ...]]:
        raise TypeError(f"placement '{getattr(self, 'name', '?')}' is resource-aware")


class _RepeatingPlacement(_ResourcePlacement):
    """A placement whose grants follow from the servers and requests alone: a round that
    asks exactly what the last one asked (same units, order and GPUs held) gets the same
    grants back without placing again, as happens whenever no job arrived or left."""

    def __init__(self) -> None:
        # (servers, requests, grants) of the last call, replaced as one.
        self._last: tuple[list[ServerResources], list[ResourceRequest], _Grants] | None = None

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> _Grants:
        last = self._last
        if last is not None and last[1] == requests and last[0] == servers:
            return dict(last[2])
        grants = self._place(servers, requests)
        self._last = (list(servers), list(requests), grants)
        return dict(grants)

    def _place(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        raise NotImplementedError


@dataclass(slots=True)
class _Round:
    """A placement's last call: its servers and requests, its books (journaled) as it left
    them, where in their journal each request's steps end, and what each request was given
    (None: left out), where the placement keeps that."""

    servers: list[ServerResources]
    requests: list[ResourceRequest]
    books: Books
    ends: list[int]
    given: list[ResourceGrant | None]


class _Rounds:
    """The last call of a placement on each list of servers (each worker type's)."""

    # Bounds what is kept: clusters have a few worker types.
    LIMIT = 16

    def __init__(self) -> None:
        self._last: dict[tuple[ServerResources, ...], _Round] = {}

    def resume(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> tuple[Books, list[int], list[ResourceGrant | None]]:
        """`_resume` from the last call on these servers; it is forgotten until `keep`
        (a call that fails leaves nothing half done behind)."""
        return _resume(self._last.pop(tuple(servers), None), servers, requests)

    def keep(self, last: _Round) -> None:
        if len(self._last) >= self.LIMIT:
            self._last.clear()
        self._last[tuple(last.servers)] = last


def _resume(
    last: _Round | None, servers: list[ServerResources], requests: list[ResourceRequest]
) -> tuple[Books, list[int], list[ResourceGrant | None]]:
    """Books in which the requests that begin `requests` as they began `last.requests` are
    placed as they were then (the steps of the others undone): the books, and `last.ends` and
    `last.given` of those requests. Fresh books where there is no `last` on these servers."""
    if last is None or last.servers != servers:
        books = Books(servers)
        books.journal = []
        return books, [], []
    shared = 0
    for new, old in zip(requests, last.requests, strict=False):
        if new != old:
            break
        shared += 1
    ends = last.ends[:shared]
    last.books.undo(ends[-1] if ends else 0)
    return last.books, ends, last.given[:shared]


class _OneByOnePlacement(_RepeatingPlacement):
    """Units placed in order, each with `_demand(its profile)` per GPU or not at all, and never
    revisited: what a unit gets follows from the requests before it. A round whose requests
    begin as the last round's did (a job left or arrived further down) keeps those units'
    grants and places only the rest."""

    def __init__(self) -> None:
        super().__init__()
        self._rounds = _Rounds()

    @staticmethod
    def _demand(profile: ResourceProfile) -> Callable[[ServerBook], PerGpu]:
        raise NotImplementedError

    def _place(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        books, ends, given = self._rounds.resume(servers, requests)
        journal = books.journal
        assert journal is not None
        demand = self._demand
        for request in requests[len(ends) :]:
            profile = profile_for_request(request)
            per_gpu = demand(profile)
            choice = books.choose_gpus(request, per_gpu)
            grant = None
            if choice is not None:
                grant = books.take_for_good(choice, per_gpu, profile)
            given.append(grant)
            ends.append(len(journal))
        self._rounds.keep(_Round(list(servers), list(requests), books, ends, given))
        return {
            request.key: grant
            for request, grant in zip(requests, given, strict=True)
            if grant is not None
        }


class ProportionalPlacement(_OneByOnePlacement):
    name = "proportional"
    description = "GPU-proportional CPUs and memory (Synergy's baseline); gangs consolidated"
    # Synergy's simulator's baseline.
    default_for_presets = ("synergy",)

    @staticmethod
    def _demand(profile: ResourceProfile) -> Callable[[ServerBook], PerGpu]:
        return fair_share


class GreedyPlacement(_OneByOnePlacement):
    name = "greedy"
    description = "each job's best-case CPUs and memory, or it waits (Synergy-GREEDY)"

    @staticmethod
    def _demand(profile: ResourceProfile) -> Callable[[ServerBook], PerGpu]:
        return best_case(profile)

    def nominal_speed(self, job_type: str, scale_factor: int, server: ServerResources) -> float:
        return profile_for(job_type).speedup


class TunePlacement(_RepeatingPlacement):
    name = "tune"
    description = (
        "best-case CPUs and memory where they fit, else the fair share, taken back from jobs "
        "holding more if need be (Synergy-TUNE)"
    )

    def __init__(self) -> None:
        super().__init__()
        self._rounds = _Rounds()

    def _place(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        # The requests that begin as they began last round stay placed as they were then.
        books, ends, _ = self._rounds.resume(servers, requests)
        journal = books.journal
        assert journal is not None
        for request in requests[len(ends) :]:
            place_tuned(books, request)
            ends.append(len(journal))
        self._rounds.keep(_Round(list(servers), list(requests), books, ends, []))
        return books.grants()

    def nominal_speed(self, job_type: str, scale_factor: int, server: ServerResources) -> float:
        """The speed tune aims for: the job's best case, capped at one server."""
        return nominal_best_speed(job_type, scale_factor, server)


def nominal_best_speed(job_type: str, scale_factor: int, server: ServerResources) -> float:
    profile = profile_for(job_type)
    book = ServerBook(server, list(server.gpus), server.cpus, server.memory_gb)
    return profile.speed(*capped_best_case(profile, scale_factor)(book))


def place_tuned(books: Books, request: ResourceRequest) -> bool:
    """Synergy-TUNE's steps for one unit (its simulator's `_tune`); False if its GPUs fit
    nowhere.

    1. The best-case demand per GPU (capped at one server), on any servers where it fits.
    2. If that asks more than the fair share of a resource: the fair share, anywhere it fits.
    3. Else, on the servers its GPUs are taken from, units placed earlier are cut back to the
       fair share (in Synergy's order, see `_cut_back_peers`) until its demand (the fair share,
       or its own smaller best case) fits.
    A unit thus runs at its best case or at no less than its GPU-proportional share."""
    profile = profile_for_request(request)
    best = capped_best_case(profile, request.scale_factor)
    choice = books.choose_gpus(request, best)
    if choice is not None:
        books.take(request, choice, best, profile)
        return True
    demand = best
    if any(_above_fair(best(book), book) for book in books.books):
        demand = fair_share
        choice = books.choose_gpus(request, demand)
        if choice is not None:
            books.take(request, choice, demand, profile)
            return True
    choice = books.choose_gpus(request, None)
    if choice is None:
        return False
    for book, gpus in choice:
        cpus, memory = demand(book)
        _cut_back_peers(
            books, book, cpus * len(gpus) - book.free_cpus, memory * len(gpus) - book.free_mem
        )
    books.take(request, choice, demand, profile)
    return True


def _above_fair(per_gpu: PerGpu, book: ServerBook) -> bool:
    fair_cpus, fair_mem = book.fair_per_gpu
    return per_gpu[0] > fair_cpus + EPSILON or per_gpu[1] > fair_mem + EPSILON


def _cut_back_peers(books: Books, book: ServerBook, cpus_needed: float, mem_needed: float) -> None:
    """Cut units on this server back to the fair share (on every server they span), in
    Synergy's order: units on fewest servers first, then the most CPUs per GPU, then the most
    memory per GPU, until the amounts needed are free here. A unit below the fair share in a
    resource keeps what it has there."""
    peers = sorted(
        book.holdings,
        key=lambda h: (len(h.placed.holdings), -h.per_gpu[0], -h.per_gpu[1]),
    )
    for holding in peers:
        if cpus_needed <= EPSILON and mem_needed <= EPSILON:
            return
        before_cpus, before_mem = holding.cpus, holding.memory_gb
        for part in holding.placed.holdings:
            fair_cpus, fair_mem = part.book.fair_per_gpu
            count = len(part.gpus)
            books.resize(
                part, min(part.cpus, fair_cpus * count), min(part.memory_gb, fair_mem * count)
            )
        cpus_needed -= before_cpus - holding.cpus
        mem_needed -= before_mem - holding.memory_gb


@hookimpl
def register_placements(register: Register) -> None:
    register(ProportionalPlacement())
    register(GreedyPlacement())
    register(TunePlacement())
