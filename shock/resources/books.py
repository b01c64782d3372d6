"""Bookkeeping shared by the resource-aware placements: free GPUs, CPUs and memory per server,
what each placed unit holds, and the choice of GPUs for a unit.

A unit holds the same CPUs and memory per GPU on every server it spans unless a placement
changes one part; its speed is that of its slowest part (a gang runs in lockstep).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shock.core.policy import UnitKey
from shock.core.resource_placement import GrantPart, ResourceGrant, ResourceRequest, ServerResources
from shock.resources.catalog import profile_for_request
from shock.resources.profiles import ResourceProfile

# Named tuples built without their generated `__new__` (placements build thousands a round).
_new_tuple = tuple.__new__

# Rounding slack when comparing sums of CPU and memory amounts.
EPSILON = 1e-9
PerGpu = tuple[float, float]  # (CPUs, GB) per GPU


@dataclass(slots=True)
class ServerBook:
    server: ServerResources
    free_gpus: list[int]
    free_cpus: float
    free_mem: float
    holdings: list[Holding] = field(default_factory=list)
    # The server's CPUs and memory per GPU, kept: every unit placed asks for it.
    fair_per_gpu: PerGpu = field(init=False)

    def __post_init__(self) -> None:
        server = self.server
        self.fair_per_gpu = server.fair_cpus_per_gpu, server.fair_mem_gb_per_gpu

    def usable_gpus(self, per_gpu: PerGpu | None) -> int:
        """How many more GPUs could be taken here, each with `per_gpu` resources."""
        count = len(self.free_gpus)
        if per_gpu is None:
            return count
        cpus, memory = per_gpu
        if cpus > 0:
            count = min(count, int((self.free_cpus + EPSILON) / cpus))
        if memory > 0:
            count = min(count, int((self.free_mem + EPSILON) / memory))
        return count


@dataclass(slots=True)
class Holding:
    """What one unit holds on one server."""

    book: ServerBook
    placed: Placed
    gpus: tuple[int, ...]
    cpus: float
    memory_gb: float

    @property
    def per_gpu(self) -> PerGpu:
        return self.cpus / len(self.gpus), self.memory_gb / len(self.gpus)

    def resize(self, cpus: float, memory_gb: float) -> None:
        self.book.free_cpus += self.cpus - cpus
        self.book.free_mem += self.memory_gb - memory_gb
        self.cpus, self.memory_gb = cpus, memory_gb
        self.placed.granted = None


@dataclass(slots=True)
class Placed:
    request: ResourceRequest
    profile: ResourceProfile
    holdings: list[Holding] = field(default_factory=list)
    # Its grant, once built; dropped whenever a part is resized.
    granted: ResourceGrant | None = None

    def speed(self) -> float:
        speed = self.profile.speed
        holdings = self.holdings
        if len(holdings) == 1:  # on one server: the common case
            (holding,) = holdings
            count = len(holding.gpus)
            return speed(holding.cpus / count, holding.memory_gb / count)
        return min(speed(*holding.per_gpu) for holding in holdings)

    def grant(self) -> ResourceGrant:
        granted = self.granted
        if granted is None:
            granted = self.granted = self._new_grant()
        return granted

    def _new_grant(self) -> ResourceGrant:
        holdings = self.holdings
        if len(holdings) == 1:  # on one server: the common case, built without a generator
            (h,) = holdings
            count = len(h.gpus)
            part = _new_tuple(GrantPart, (h.book.server.server_id, h.gpus, h.cpus, h.memory_gb))
            speed = self.profile.speed(h.cpus / count, h.memory_gb / count)
            return _new_tuple(ResourceGrant, ((part,), speed))
        parts = tuple(
            _new_tuple(GrantPart, (h.book.server.server_id, h.gpus, h.cpus, h.memory_gb))
            for h in holdings
        )
        return _new_tuple(ResourceGrant, (parts, self.speed()))


# A choice of GPUs: (server, which of its free GPUs).
GpuChoice = list[tuple[ServerBook, tuple[int, ...]]]


@dataclass(slots=True)
class _Take:
    """A unit placed, and what it changed: the unit its key stood for before (None: none) and
    each of its servers' free GPUs, CPUs and memory before. Taken for good (`take_for_good`):
    no unit, nothing else changed."""

    placed: Placed | None
    replaced: Placed | None
    before: list[tuple[ServerBook, list[int], float, float]]


@dataclass(slots=True)
class _Resize:
    """A unit's part resized: its CPUs and memory, and its server's free ones, before."""

    holding: Holding
    cpus: float
    memory_gb: float
    free_cpus: float
    free_mem: float


Journal = list[_Take | _Resize]


class Books:
    """The servers of one worker type while a round's units are placed."""

    def __init__(self, servers: list[ServerResources]) -> None:
        self.books = [
            ServerBook(server, list(server.gpus), server.cpus, server.memory_gb)
            for server in servers
        ]
        self.book_of_gpu = {gpu: book for book in self.books for gpu in book.server.gpus}
        self.placed: dict[UnitKey, Placed] = {}
        # Where set, every take and resize is appended here, to be undone (`undo`).
        self.journal: Journal | None = None

    def choose_gpus(
        self,
        request: ResourceRequest,
        per_gpu: Callable[[ServerBook], PerGpu] | None,
        allow_spread: bool = True,
    ) -> GpuChoice | None:
        """GPUs for a unit where each GPU also gets `per_gpu(server)` resources (None: GPUs
        only): last round's GPUs if all free, else the server that fits it most tightly, else
        the servers with most room first. None if it fits nowhere."""
        need = request.scale_factor

        def usable(book: ServerBook) -> int:
            return book.usable_gpus(per_gpu(book) if per_gpu else None)

        previous = request.previous_gpus
        if previous is not None and need == 1 and len(previous) == 1:
            # One GPU, held last round: keep it if it is free and its server has room.
            book = self.book_of_gpu.get(previous[0])
            if book is not None and previous[0] in book.free_gpus and usable(book) >= 1:
                return [(book, (previous[0],))]
        else:
            kept = self._previous_choice(request, usable)
            if kept is not None:
                return kept
        # The fitting server with fewest free GPUs (then lowest id), in one pass.
        best: ServerBook | None = None
        best_rank = (0, 0)
        for book in self.books:
            if usable(book) >= need:
                rank = (len(book.free_gpus), book.server.server_id)
                if best is None or rank < best_rank:
                    best, best_rank = book, rank
        if best is not None:
            return [(best, tuple(best.free_gpus[:need]))]
        if not allow_spread:
            return None
        choice: GpuChoice = []
        for book in sorted(self.books, key=lambda b: (-usable(b), b.server.server_id)):
            take = min(usable(book), need)
            if take > 0:
                choice.append((book, tuple(book.free_gpus[:take])))
                need -= take
            if need == 0:
                return choice
        return None

    def _previous_choice(
        self, request: ResourceRequest, usable: Callable[[ServerBook], int]
    ) -> GpuChoice | None:
        previous = request.previous_gpus
        if not previous or len(previous) != request.scale_factor:
            return None
        by_server: dict[int, list[int]] = {}
        books: dict[int, ServerBook] = {}
        for gpu in previous:
            book = self.book_of_gpu.get(gpu)
            if book is None or gpu not in book.free_gpus:
                return None
            by_server.setdefault(book.server.server_id, []).append(gpu)
            books[book.server.server_id] = book
        if any(usable(books[key]) < len(gpus) for key, gpus in by_server.items()):
            return None
        return [(books[key], tuple(gpus)) for key, gpus in by_server.items()]

    def take(
        self,
        request: ResourceRequest,
        choice: GpuChoice,
        per_gpu: Callable[[ServerBook], PerGpu],
        profile: ResourceProfile | None = None,
    ) -> Placed:
        placed = Placed(request, profile or profile_for_request(request))
        if self.journal is not None:
            self.journal.append(_Take(placed, self.placed.get(request.key), _before(choice)))
        holdings = placed.holdings
        for book, gpus in choice:
            cpus, memory = _take_from(book, gpus, per_gpu)
            holding = Holding(book, placed, gpus, cpus, memory)
            book.holdings.append(holding)
            holdings.append(holding)
        self.placed[request.key] = placed
        return placed

    def resize(self, holding: Holding, cpus: float, memory_gb: float) -> None:
        """`holding.resize`, journaled."""
        if self.journal is not None:
            book = holding.book
            self.journal.append(
                _Resize(holding, holding.cpus, holding.memory_gb, book.free_cpus, book.free_mem)
            )
        holding.resize(cpus, memory_gb)

    def undo(self, length: int) -> None:
        """Undo the journal's steps after its first `length`, last first: the books are then
        exactly as they were after those (every amount restored, not recomputed)."""
        journal = self.journal
        assert journal is not None
        while len(journal) > length:
            step = journal.pop()
            if isinstance(step, _Resize):
                holding = step.holding
                holding.cpus, holding.memory_gb = step.cpus, step.memory_gb
                holding.book.free_cpus, holding.book.free_mem = step.free_cpus, step.free_mem
                holding.placed.granted = None
                continue
            placed = step.placed
            for book, free_gpus, free_cpus, free_mem in reversed(step.before):
                if placed is not None:
                    book.holdings.pop()  # its holding: the last taken there
                book.free_gpus, book.free_cpus, book.free_mem = free_gpus, free_cpus, free_mem
            if placed is None:
                continue
            if step.replaced is None:
                del self.placed[placed.request.key]
            else:
                self.placed[placed.request.key] = step.replaced

    def take_for_good(
        self,
        choice: GpuChoice,
        per_gpu: Callable[[ServerBook], PerGpu],
        profile: ResourceProfile,
    ) -> ResourceGrant:
        """`take(...).grant()` for a unit that is never resized or looked up again (nothing
        is recorded but the free resources): placements that place each unit once."""
        if self.journal is not None:
            self.journal.append(_Take(None, None, _before(choice)))
        speed = profile.speed
        if len(choice) == 1:
            ((book, gpus),) = choice
            cpus, memory = _take_from(book, gpus, per_gpu)
            count = len(gpus)
            part = _new_tuple(GrantPart, (book.server.server_id, gpus, cpus, memory))
            return _new_tuple(ResourceGrant, ((part,), speed(cpus / count, memory / count)))
        parts = []
        for book, gpus in choice:
            cpus, memory = _take_from(book, gpus, per_gpu)
            parts.append(_new_tuple(GrantPart, (book.server.server_id, gpus, cpus, memory)))
        # The slowest part, as `Placed.speed`.
        slowest = min(speed(p.cpus / len(p.gpus), p.memory_gb / len(p.gpus)) for p in parts)
        return _new_tuple(ResourceGrant, (tuple(parts), slowest))

    def grants(self) -> dict[UnitKey, ResourceGrant]:
        return {key: placed.grant() for key, placed in self.placed.items()}


def _before(choice: GpuChoice) -> list[tuple[ServerBook, list[int], float, float]]:
    """What a take of `choice` changes, as it is before: each server's free GPUs (a copy), CPUs
    and memory."""
    return [(book, list(book.free_gpus), book.free_cpus, book.free_mem) for book, _ in choice]


def _take_from(
    book: ServerBook, gpus: tuple[int, ...], per_gpu: Callable[[ServerBook], PerGpu]
) -> PerGpu:
    """Take `gpus` (free) of `book` with `per_gpu(book)` each; the (CPUs, GB) taken."""
    _take_gpus(book, gpus)
    count = len(gpus)
    cpus, memory = per_gpu(book)
    cpus *= count
    memory *= count
    book.free_cpus -= cpus
    book.free_mem -= memory
    return cpus, memory


def _take_gpus(book: ServerBook, gpus: tuple[int, ...]) -> None:
    free = book.free_gpus
    if len(gpus) == 1 and gpus[0] in free:
        free.remove(gpus[0])
    else:
        taken = set(gpus)
        book.free_gpus = [gpu for gpu in free if gpu not in taken]


def fair_share(book: ServerBook) -> PerGpu:
    return book.fair_per_gpu


def constant(demand: PerGpu) -> Callable[[ServerBook], PerGpu]:
    """The same CPUs and memory per GPU on any server."""
    return lambda book: demand


def best_case(profile: ResourceProfile) -> Callable[[ServerBook], PerGpu]:
    return constant((profile.best_cpus_per_gpu, profile.best_mem_gb_per_gpu))


def capped_best_case(profile: ResourceProfile, gpus: int) -> Callable[[ServerBook], PerGpu]:
    """The best case, capped so the whole unit's demand fits one server; a unit larger than a
    server gets the fair share (Synergy's simulator caps a job's demand at `per_server_size`
    the same way, `jobs/workload.py` `add_synergy_profile`)."""

    best_cpus, best_mem = profile.best_cpus_per_gpu, profile.best_mem_gb_per_gpu

    def per_gpu(book: ServerBook) -> PerGpu:
        server = book.server
        if gpus > len(server.gpus):
            return book.fair_per_gpu
        # min(best, cap), spelled out: this runs for every server a unit may go to.
        cpus, memory = server.cpus / gpus, server.memory_gb / gpus
        return (cpus if cpus < best_cpus else best_cpus, memory if memory < best_mem else best_mem)

    return per_gpu
