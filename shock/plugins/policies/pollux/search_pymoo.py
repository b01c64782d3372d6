"""Pollux's search on pymoo's genetic algorithm, with Pollux's operators as pymoo operators.

A state (jobs x nodes GPU counts) is one pymoo individual, flattened to jobs * nodes
integers. Seeding, crossover, mutation and repair are the functions of `search`; pymoo
supplies the loop: binary tournaments, offspring, elitist survival of parents and children.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from pymoo.algorithms.soo.nonconvex.ga import GA
from pymoo.core.crossover import Crossover
from pymoo.core.mutation import Mutation
from pymoo.core.problem import Problem
from pymoo.core.repair import Repair
from pymoo.core.sampling import Sampling
from pymoo.core.termination import Termination
from pymoo.operators.selection.tournament import TournamentSelection

from shock.plugins.policies.pollux.search import (
    _STATE,
    SearchSpace,
    crossover,
    mutate,
    repair,
    seed_population,
)


class _Allocations(Problem):
    def __init__(self, space: SearchSpace, fitness: Callable[[np.ndarray], np.ndarray]) -> None:
        jobs, nodes = space.shape
        super().__init__(n_var=jobs * nodes, n_obj=1, xl=0, xu=int(space.node_gpus.max()))
        self.space = space
        self.fitness = fitness

    def states(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=_STATE).reshape(len(x), *self.space.shape)

    def _evaluate(self, x: np.ndarray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        out["F"] = -self.fitness(self.states(x))[:, None]


class _Seeds(Sampling):
    def __init__(self, seeds: np.ndarray) -> None:
        super().__init__()
        self.seeds = seeds

    def _do(self, problem: _Allocations, n_samples: int, *args: Any, **kwargs: Any) -> Any:
        states = seed_population(self.seeds, n_samples, problem.space, kwargs["random_state"])
        return states.reshape(n_samples, -1)


class _OnePointOverJobs(Crossover):
    def __init__(self) -> None:
        super().__init__(n_parents=2, n_offsprings=2, prob=1.0)

    def _do(self, problem: _Allocations, x: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        _, matings, n_var = x.shape
        a, b = problem.states(x[0]), problem.states(x[1])
        return crossover(a, b, kwargs["random_state"]).reshape(2, matings, n_var)


class _PolluxMutation(Mutation):
    def _do(self, problem: _Allocations, x: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        states = mutate(problem.states(x), problem.space, kwargs["random_state"])
        return states.reshape(len(x), -1)


class _ToCapacity(Repair):
    def _do(self, problem: _Allocations, x: np.ndarray, **kwargs: Any) -> Any:
        states = repair(problem.states(x), problem.space, kwargs["random_state"])
        return states.reshape(len(x), -1)


def _better_of_two(pop: Any, pairs: np.ndarray, **kwargs: Any) -> np.ndarray:
    """Binary tournament: the fitter of each pair (the first on a tie)."""
    f = pop.get("F")[:, 0]
    first, second = pairs[:, 0], pairs[:, 1]
    return np.where(f[first] <= f[second], first, second)[:, None]


class _Patience(Termination):
    """Stop after `generations`, or once `patience` (> 0) generations in a row have not
    improved the best state."""

    def __init__(self, generations: int, patience: int) -> None:
        super().__init__()
        self.generations = generations
        self.patience = patience
        self.done = -1
        self.best = np.inf
        self.stale = 0

    def _update(self, algorithm: Any) -> float:
        best = float(algorithm.opt[0].F[0])
        self.done += 1
        if self.done > 0:
            self.stale = self.stale + 1 if best >= self.best else 0
        self.best = min(self.best, best)
        if self.done >= self.generations or (self.patience and self.stale >= self.patience):
            return 1.0
        return self.done / self.generations


def search(
    seeds: np.ndarray,
    space: SearchSpace,
    fitness: Callable[[np.ndarray], np.ndarray],
    population: int,
    generations: int,
    rng: np.random.Generator,
    patience: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The final population, best first, and its fitness (higher is better)."""
    space = replace(space, base=space.base.astype(_STATE))
    problem = _Allocations(space, fitness)
    algorithm = GA(
        pop_size=population,
        sampling=_Seeds(seeds.astype(_STATE)),
        selection=TournamentSelection(func_comp=_better_of_two),
        crossover=_OnePointOverJobs(),
        mutation=_PolluxMutation(),
        repair=_ToCapacity(),
        eliminate_duplicates=False,
        output=None,
    )
    algorithm.setup(
        problem,
        termination=_Patience(generations, patience),
        seed=int(rng.integers(2**63)),
        verbose=False,
    )
    while algorithm.has_next():
        algorithm.next()
    x, f = algorithm.pop.get("X", "F")
    order = np.argsort(f[:, 0], kind="stable")
    return problem.states(x[order]), -f[order, 0]
