"""`opt`: Synergy's optimal placement as a MILP (Pyomo, default solver HiGHS).

For the units a round runs, choose for each one server and one CPU x memory cell (the same
cells `tune` chooses from) to maximise the units placed, then their summed speed (throughput
normalised to the fair share), under every server's free GPUs, CPUs and memory. Units larger
than any server are placed first by `tune`'s rule. A unit the MILP cannot place gets `tune`'s
rule on what is left (or waits).

The MILP of a round depends only on the units and the servers, so it is solved once per set of
units and reused while that set runs (with FIFO-like policies, most rounds). It starts from
`tune`'s placement and stops at 0.5 s or a 0.1% gap; if its solution is still worse than
`tune`'s, `tune`'s is used.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from shock.api import (
    Register,
    ResourceGrant,
    ResourceRequest,
    ServerResources,
    SolverError,
    UnitKey,
    hookimpl,
    quiet_highs_banner,
)
from shock.plugins.placement.synergy import (
    TunePlacement,
    _ResourcePlacement,
    nominal_best_speed,
    place_tuned,
)
from shock.resources.books import Books, ServerBook, capped_best_case, constant
from shock.resources.catalog import profile_for_request
from shock.resources.cells import Cell, candidate_cells

# Placing one more unit is worth more than any speed gain (speeds are at most ~3).
PLACEMENT_REWARD = 100.0
DEFAULT_TIME_LIMIT_S = 0.5
# Within 0.1% of the best summed speed: proving the last 0.1% costs seconds per round.
DEFAULT_GAP = 1e-3
_CACHE_SIZE = 64

Choice = tuple[int, Cell]  # (server index, cell)

# Units of one model, size and resource request are interchangeable.
ClassKey = tuple[str, int, tuple[float | None, float | None] | None]


class OptPlacement(_ResourcePlacement):
    name = "opt"
    description = "MILP: each job's server and CPU x memory cell, max total speed (Synergy-OPT)"

    def __init__(
        self, time_limit_s: float = DEFAULT_TIME_LIMIT_S, relative_gap: float = DEFAULT_GAP
    ) -> None:
        self.time_limit_s = time_limit_s
        self.relative_gap = relative_gap
        self._solved: OrderedDict[tuple[Any, ...], dict[UnitKey, Choice]] = OrderedDict()
        self.solves = 0

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        tuned = TunePlacement().place_with_resources(servers, requests)
        if len(tuned) == len(requests) and _score(tuned) >= _upper_bound(requests) - 1e-9:
            return tuned  # every unit already at its fastest: nothing to optimise
        books = Books(servers)
        largest = max((len(s.gpus) for s in servers), default=0)
        for request in requests:
            if request.scale_factor > largest:
                place_tuned(books, request)
        small = [r for r in requests if r.scale_factor <= largest]
        self._place_optimised(books, small, tuned)
        for request in small:
            if request.key not in books.placed:
                place_tuned(books, request)
        grants = books.grants()
        if _score(tuned) > _score(grants) + 1e-9:
            return tuned
        return grants

    def optimised(
        self,
        servers: list[ServerResources],
        requests: list[ResourceRequest],
        start: dict[UnitKey, ResourceGrant] | None = None,
    ) -> dict[UnitKey, ResourceGrant]:
        """The MILP's own placement, before any rule of `tune`'s: grants for the units it
        places on one server each (units larger than every server are left out), optionally
        starting from the placement `start`."""
        books = Books(servers)
        largest = max((len(s.gpus) for s in servers), default=0)
        self._place_optimised(books, [r for r in requests if r.scale_factor <= largest], start)
        return books.grants()

    def _place_optimised(
        self,
        books: Books,
        requests: list[ResourceRequest],
        start: dict[UnitKey, ResourceGrant] | None,
    ) -> None:
        """Take, in `books`, the server and cell the MILP chose for each unit it places."""
        choices = self._choices(books, requests, start)
        for request in requests:
            choice = choices.get(request.key)
            if choice is None:
                continue
            book = books.books[choice[0]]
            gpus = _gpus_on(book, request)
            cell = choice[1]
            books.take(request, [(book, gpus)], constant((cell.cpus_per_gpu, cell.mem_gb_per_gpu)))

    def nominal_speed(self, job_type: str, scale_factor: int, server: ServerResources) -> float:
        return nominal_best_speed(job_type, scale_factor, server)

    def _choices(
        self,
        books: Books,
        requests: list[ResourceRequest],
        start: dict[UnitKey, ResourceGrant] | None,
    ) -> dict[UnitKey, Choice]:
        signature = (
            tuple((b.server, len(b.free_gpus), b.free_cpus, b.free_mem) for b in books.books),
            tuple(
                sorted((str(r.key), r.scale_factor, r.job_type, str(r.demand)) for r in requests)
            ),
        )
        cached = self._solved.get(signature)
        if cached is None:
            cached = self._solve(books.books, requests, start)
            self._solved[signature] = cached
            if len(self._solved) > _CACHE_SIZE:
                self._solved.popitem(last=False)
        return cached

    def _solve(
        self,
        books: list[ServerBook],
        requests: list[ResourceRequest],
        start: dict[UnitKey, ResourceGrant] | None = None,
    ) -> dict[UnitKey, Choice]:
        """Place every unit if the MILP can, maximising the summed speed; else (GPUs too
        fragmented) as many units as possible first."""
        try:
            return self._solve_milp(books, requests, start, place_all=True)
        except SolverError:
            return self._solve_milp(books, requests, start, place_all=False)

    def _solve_milp(
        self,
        books: list[ServerBook],
        requests: list[ResourceRequest],
        start: dict[UnitKey, ResourceGrant] | None,
        place_all: bool,
    ) -> dict[UnitKey, Choice]:
        """Units of one model and size are interchangeable, so the MILP counts them: z[c, s, k]
        units of class c on server s with cell k. Identical servers are ordered by GPUs used
        (any solution can be permuted into that order), which removes their symmetry."""
        import pyomo.environ as pyo

        self.solves += 1
        classes: dict[ClassKey, list[ResourceRequest]] = {}
        for request in requests:
            key = (request.job_type, request.scale_factor, request.demand)
            classes.setdefault(key, []).append(request)
        class_keys = list(classes)
        options: list[tuple[int, int, Cell]] = []  # (class index, server index, cell)
        for c, (_job_type, n, _demand) in enumerate(class_keys):
            profile = profile_for_request(classes[class_keys[c]][0])
            for s, book in enumerate(books):
                if len(book.free_gpus) < n:
                    continue
                capped = capped_best_case(profile, n)(book)
                for cell in candidate_cells(profile, book.fair_per_gpu, capped):
                    if (
                        cell.cpus_per_gpu * n <= book.free_cpus + 1e-9
                        and cell.mem_gb_per_gpu * n <= book.free_mem + 1e-9
                    ):
                        options.append((c, s, cell))
        if not options:
            return {}
        model = pyo.ConcreteModel()
        model.z = pyo.Var(range(len(options)), domain=pyo.NonNegativeIntegers)
        z = model.z
        for i, (c, _, _) in enumerate(options):
            z[i].setub(len(classes[class_keys[c]]))
        reward = 0.0 if place_all else PLACEMENT_REWARD
        model.objective = pyo.Objective(
            expr=sum((reward + cell.speed) * z[i] for i, (_, _, cell) in enumerate(options)),
            sense=pyo.maximize,
        )
        by_class: dict[int, list[int]] = {}
        by_server: dict[int, list[int]] = {}
        for i, (c, s, _) in enumerate(options):
            by_class.setdefault(c, []).append(i)
            by_server.setdefault(s, []).append(i)
        model.counts = pyo.ConstraintList()
        for c in range(len(class_keys)):
            placed = sum(z[i] for i in by_class.get(c, []))
            wanted = len(classes[class_keys[c]])
            model.counts.add(placed == wanted if place_all else placed <= wanted)
        model.capacity = pyo.ConstraintList()
        gpus_used = {}
        for s, indices in by_server.items():
            book = books[s]
            size = [class_keys[options[i][0]][1] for i in indices]
            gpus_used[s] = sum(n * z[i] for n, i in zip(size, indices, strict=True))
            cpus = sum(
                n * options[i][2].cpus_per_gpu * z[i] for n, i in zip(size, indices, strict=True)
            )
            memory = sum(
                n * options[i][2].mem_gb_per_gpu * z[i] for n, i in zip(size, indices, strict=True)
            )
            model.capacity.add(gpus_used[s] <= len(book.free_gpus))
            model.capacity.add(cpus <= book.free_cpus + 1e-9)
            model.capacity.add(memory <= book.free_mem + 1e-9)
        model.symmetry = pyo.ConstraintList()
        for s, t in _identical_neighbours(books):
            if s in gpus_used and t in gpus_used:
                model.symmetry.add(gpus_used[s] >= gpus_used[t])
        if start is not None:
            _warm_start(model, options, classes, books, start)
        self._run_highs(model)
        # Hand the chosen slots out in priority order, fastest cells first.
        slots: dict[int, list[tuple[int, Cell]]] = {}
        for i, (c, s, cell) in enumerate(options):
            count = round(pyo.value(z[i]) or 0.0)
            slots.setdefault(c, []).extend([(s, cell)] * count)
        chosen: dict[UnitKey, Choice] = {}
        for c, members in enumerate(classes.values()):
            ranked = sorted(slots.get(c, []), key=lambda slot: -slot[1].speed)
            for request, slot in zip(members, ranked, strict=False):
                chosen[request.key] = slot
        return chosen

    def _run_highs(self, model: Any) -> None:
        """HiGHS through Pyomo's persistent interface, which takes a MIP start (`tune`'s
        placement); at the time limit the best solution found is used."""
        from pyomo.contrib.appsi.base import TerminationCondition
        from pyomo.contrib.appsi.solvers import Highs

        quiet_highs_banner()
        solver = Highs()
        solver.config.warmstart = True
        solver.config.time_limit = self.time_limit_s
        solver.config.load_solution = False
        solver.highs_options = {"mip_rel_gap": self.relative_gap, "presolve": "on"}
        result = solver.solve(model)
        usable = result.termination_condition is TerminationCondition.optimal or (
            result.termination_condition is TerminationCondition.maxTimeLimit
            and result.best_feasible_objective is not None
        )
        if not usable:
            raise SolverError(f"opt placement MILP ended with {result.termination_condition}")
        result.solution_loader.load_vars()


def _warm_start(
    model: Any,
    options: list[tuple[int, int, Cell]],
    classes: dict[ClassKey, list[ResourceRequest]],
    books: list[ServerBook],
    start: dict[UnitKey, ResourceGrant],
) -> None:
    """Set z to a known placement (`tune`'s) where every unit maps onto an option: one server
    and a cell no larger and no slower than what it got. Otherwise give no start."""
    server_index = {book.server.server_id: s for s, book in enumerate(books)}
    option_cells: dict[tuple[int, int], list[tuple[int, Cell]]] = {}
    for i, (c, s, cell) in enumerate(options):
        option_cells.setdefault((c, s), []).append((i, cell))
    counts = [0] * len(options)
    for c, members in enumerate(classes.values()):
        for request in members:
            grant = start.get(request.key)
            if grant is None or len(grant.parts) != 1:
                return
            part = grant.parts[0]
            n = len(part.gpus)
            matches = [
                i
                for i, cell in option_cells.get((c, server_index[part.server_id]), [])
                if cell.cpus_per_gpu * n <= part.cpus + 1e-9
                and cell.mem_gb_per_gpu * n <= part.memory_gb + 1e-9
                and cell.speed >= grant.speed - 1e-9
            ]
            if not matches:
                return
            counts[matches[0]] += 1
    for i, count in enumerate(counts):
        model.z[i].value = count


def _identical_neighbours(books: list[ServerBook]) -> list[tuple[int, int]]:
    """Pairs of servers (in a fixed order) with the same free GPUs, CPUs and memory."""
    by_state: dict[tuple[int, float, float, float, float], list[int]] = {}
    for index, book in enumerate(books):
        state = (
            len(book.free_gpus),
            book.free_cpus,
            book.free_mem,
            book.server.cpus / len(book.server.gpus),
            book.server.memory_gb / len(book.server.gpus),
        )
        by_state.setdefault(state, []).append(index)
    return [(group[k], group[k + 1]) for group in by_state.values() for k in range(len(group) - 1)]


def _gpus_on(book: ServerBook, request: ResourceRequest) -> tuple[int, ...]:
    """Last round's GPUs where they are all free on this server, else the first free ones."""
    previous = request.previous_gpus
    if previous and len(previous) == request.scale_factor and set(previous) <= set(book.free_gpus):
        return previous
    return tuple(book.free_gpus[: request.scale_factor])


def _upper_bound(requests: list[ResourceRequest]) -> float:
    """Every unit placed at its best-case speed."""
    return sum(PLACEMENT_REWARD + profile_for_request(r).speedup for r in requests)


def _score(grants: dict[UnitKey, ResourceGrant]) -> float:
    return sum(PLACEMENT_REWARD + grant.speed for grant in grants.values())


@hookimpl
def register_placements(register: Register) -> None:
    register(OptPlacement())
