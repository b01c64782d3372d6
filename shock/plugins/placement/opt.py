"""`opt`: Synergy's optimal placement as a MILP (Pyomo, default solver HiGHS).

For the units a round runs, choose for each one server and one CPU x memory cell (the same
cells `tune` chooses from) to maximise the units placed, then their summed speed (throughput
normalised to the fair share), under every server's free GPUs, CPUs and memory. Units larger
than any server are placed first by `tune`'s rule. A unit the MILP cannot place gets `tune`'s
rule on what is left (or waits).

The MILP of a round depends only on the units and the servers, so it is solved once per set of
units and reused while that set runs (with FIFO-like policies, most rounds). If the MILP's
solution is worse than `tune`'s (it stopped at its time limit), `tune`'s is used.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from shock.core.hookspecs import Register, hookimpl
from shock.core.policy import UnitKey
from shock.core.resource_placement import ResourceGrant, ResourceRequest, ServerResources
from shock.core.solver import SolverSpec, solve_pyomo
from shock.plugins.placement.synergy import TunePlacement, _ResourcePlacement, place_tuned
from shock.resources.books import Books, ServerBook, constant
from shock.resources.catalog import profile_for
from shock.resources.cells import Cell, candidate_cells

# Placing one more unit is worth more than any speed gain (speeds are at most ~3).
PLACEMENT_REWARD = 100.0
DEFAULT_TIME_LIMIT_S = 10.0
_CACHE_SIZE = 64
# shock's HiGHS defaults suit its LPs (interior point, no presolve); a MILP wants HiGHS' own.
_MILP_OPTIONS = {"solver": "choose", "presolve": "on", "run_crossover": "on", "mip_rel_gap": 0.0}

Choice = tuple[int, Cell]  # (server index, cell)


class OptPlacement(_ResourcePlacement):
    name = "opt"
    description = "MILP: each job's server and CPU x memory cell, max total speed (Synergy-OPT)"

    def __init__(self, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> None:
        self.solver = SolverSpec("highs", time_limit_s=time_limit_s, options=_MILP_OPTIONS)
        self._solved: OrderedDict[tuple[Any, ...], dict[UnitKey, Choice]] = OrderedDict()
        self.solves = 0

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        tuned = TunePlacement().place_with_resources(servers, requests)
        books = Books(servers)
        largest = max((len(s.gpus) for s in servers), default=0)
        for request in requests:
            if request.scale_factor > largest:
                place_tuned(books, request, allow_spread=True)
        small = [r for r in requests if r.scale_factor <= largest]
        choices = self._choices(books, small)
        for request in small:
            choice = choices.get(request.key)
            if choice is None:
                continue
            book = books.books[choice[0]]
            gpus = _gpus_on(book, request)
            cell = choice[1]
            books.take(request, [(book, gpus)], constant((cell.cpus_per_gpu, cell.mem_gb_per_gpu)))
        for request in small:
            if request.key not in books.placed:
                place_tuned(books, request, allow_spread=True)
        grants = books.grants()
        if _score(tuned) > _score(grants) + 1e-9:
            return tuned
        return grants

    def _choices(self, books: Books, requests: list[ResourceRequest]) -> dict[UnitKey, Choice]:
        signature = (
            tuple((b.server, len(b.free_gpus), b.free_cpus, b.free_mem) for b in books.books),
            tuple(sorted((str(r.key), r.scale_factor, r.job_type) for r in requests)),
        )
        cached = self._solved.get(signature)
        if cached is None:
            cached = self._solve(books.books, requests)
            self._solved[signature] = cached
            if len(self._solved) > _CACHE_SIZE:
                self._solved.popitem(last=False)
        return cached

    def _solve(
        self, books: list[ServerBook], requests: list[ResourceRequest]
    ) -> dict[UnitKey, Choice]:
        import pyomo.environ as pyo

        self.solves += 1
        options: list[tuple[int, int, Cell]] = []  # (request index, server index, cell)
        for r, request in enumerate(requests):
            profile = profile_for(request.job_type)
            n = request.scale_factor
            for s, book in enumerate(books):
                if len(book.free_gpus) < n:
                    continue
                for cell in candidate_cells(profile, book.fair_per_gpu):
                    if (
                        cell.cpus_per_gpu * n <= book.free_cpus + 1e-9
                        and cell.mem_gb_per_gpu * n <= book.free_mem + 1e-9
                    ):
                        options.append((r, s, cell))
        if not options:
            return {}
        model = pyo.ConcreteModel()
        model.x = pyo.Var(range(len(options)), domain=pyo.Binary)
        x = model.x
        model.objective = pyo.Objective(
            expr=sum(
                (PLACEMENT_REWARD + cell.speed) * x[i] for i, (_, _, cell) in enumerate(options)
            ),
            sense=pyo.maximize,
        )
        by_request: dict[int, list[int]] = {}
        by_server: dict[int, list[int]] = {}
        for i, (r, s, _) in enumerate(options):
            by_request.setdefault(r, []).append(i)
            by_server.setdefault(s, []).append(i)
        model.once = pyo.ConstraintList()
        for indices in by_request.values():
            model.once.add(sum(x[i] for i in indices) <= 1)
        model.capacity = pyo.ConstraintList()
        for s, indices in by_server.items():
            book = books[s]
            size = [requests[options[i][0]].scale_factor for i in indices]
            model.capacity.add(
                sum(n * x[i] for n, i in zip(size, indices, strict=True)) <= len(book.free_gpus)
            )
            model.capacity.add(
                sum(
                    n * options[i][2].cpus_per_gpu * x[i]
                    for n, i in zip(size, indices, strict=True)
                )
                <= book.free_cpus + 1e-9
            )
            model.capacity.add(
                sum(
                    n * options[i][2].mem_gb_per_gpu * x[i]
                    for n, i in zip(size, indices, strict=True)
                )
                <= book.free_mem + 1e-9
            )
        solve_pyomo(model, self.solver)
        chosen: dict[UnitKey, Choice] = {}
        for i, (r, s, cell) in enumerate(options):
            if (pyo.value(x[i]) or 0.0) > 0.5:
                chosen[requests[r].key] = (s, cell)
        return chosen


def _gpus_on(book: ServerBook, request: ResourceRequest) -> tuple[int, ...]:
    """Last round's GPUs where they are all free on this server, else the first free ones."""
    previous = request.previous_gpus
    if previous and len(previous) == request.scale_factor and set(previous) <= set(book.free_gpus):
        return previous
    return tuple(book.free_gpus[: request.scale_factor])


def _score(grants: dict[UnitKey, ResourceGrant]) -> float:
    return sum(PLACEMENT_REWARD + grant.speed for grant in grants.values())


@hookimpl
def register_placements(register: Register) -> None:
    register(OptPlacement())
