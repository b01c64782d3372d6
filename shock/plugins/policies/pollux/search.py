"""Pollux's search over allocation matrices: a genetic algorithm on (jobs x nodes) GPU counts.

A state is an integer matrix: state[j, k] GPUs of node k for job j. The population of the
previous round seeds the next one (re-indexed to the current jobs), so the search continues
where it stopped instead of starting over; the current allocation joins the seeds. Each
generation mates parents chosen by binary tournament, mutates and repairs the children, and
keeps the best `population` states of parents and children together (elitist). The
operators are Pollux's:

- crossover: one cut point over the jobs; each child takes the rows above the cut from one
  parent and the rest from the other;
- mutation: a job's row is reset to its current allocation (probability 0.1); some of a
  job's entries are zeroed (for a tenth of the jobs, each entry with probability 0.1); on each
  node with free GPUs about one job's entry grows to a random count up to the node's size
  (any job with probability 1 / jobs, one already on the node with 1 / its jobs there);
- repair, in this order: at most one distributed (multi-node) job per node, the first in the
  jobs' order keeping it; at most `max_gpus[j]` GPUs and `max_nodes` nodes per job (nodes
  visited in random order); node capacities, filled in the jobs' order (earlier jobs first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

_RESET_PROB = 0.1
_ZERO_ROW_PROB = 0.1
_ZERO_ENTRY_PROB = 0.1
_STATE = np.int16


@dataclass(frozen=True)
class SearchSpace:
    """The fixed parts of one round's problem."""

    node_gpus: np.ndarray  # GPUs of each node
    max_gpus: np.ndarray  # per job
    base: np.ndarray  # the current allocation (jobs x nodes)
    max_nodes: int = 16

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.max_gpus), len(self.node_gpus))


def crossover(parents_a: np.ndarray, parents_b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Two children per pair, cut at a random job."""
    pairs, jobs, _ = parents_a.shape
    cut = rng.integers(0, jobs + 1, size=(pairs, 1, 1))
    above = np.arange(jobs)[None, :, None] < cut
    return np.concatenate(
        [np.where(above, parents_a, parents_b), np.where(above, parents_b, parents_a)]
    )


def mutate(states: np.ndarray, space: SearchSpace, rng: np.random.Generator) -> np.ndarray:
    pop, jobs, _ = states.shape
    reset = rng.random((pop, jobs), dtype=np.float32) < _RESET_PROB
    states = np.where(reset[:, :, None], space.base[None].astype(states.dtype), states)
    rows = np.nonzero(rng.random((pop, jobs), dtype=np.float32) < _ZERO_ROW_PROB)
    if len(rows[0]):
        picked = states[rows]
        picked[rng.random(picked.shape, dtype=np.float32) < _ZERO_ENTRY_PROB] = 0
        states[rows] = picked
    node_gpus = space.node_gpus.astype(states.dtype)
    free = node_gpus[None, :] - states.sum(axis=1, dtype=states.dtype)  # pop x nodes
    # On each node with free GPUs, about one job grows: any job with probability 1 / jobs,
    # and one of the jobs already there with probability 1 / those jobs.
    has_free = free > 0  # pop x nodes
    p_free = np.where(has_free, np.float32(1.0 / jobs), np.float32(0.0))[:, None, :]
    used = (states > 0) & has_free[:, None, :]
    p_used = used / np.maximum(used.sum(axis=1, keepdims=True, dtype=np.int32), 1).astype(
        np.float32
    )
    grow = rng.random(states.shape, dtype=np.float32) < p_free + p_used - p_free * p_used
    where = np.nonzero(grow)
    if len(where[0]):
        high = node_gpus[where[2]] + 1
        states[where] = rng.integers(np.minimum(states[where], high - 1), high)
    return states


def repair(states: np.ndarray, space: SearchSpace, rng: np.random.Generator) -> np.ndarray:
    dtype = states.dtype
    positive = states > 0
    # One distributed job per node: later distributed jobs lose that node.
    distributed = positive.sum(axis=2, dtype=np.int32) > 1
    on_node = positive & distributed[:, :, None]
    states = np.where((np.cumsum(on_node, axis=1, dtype=np.int32) > 1) & on_node, 0, states)
    states = states.astype(dtype, copy=False)
    # Per-job GPU and node limits, nodes taken in a random order (only rows over a limit).
    over = (states.sum(axis=2, dtype=np.int32) > space.max_gpus[None, :]) | (
        np.count_nonzero(states, axis=2) > space.max_nodes
    )
    rows = np.nonzero(over)
    if len(rows[0]):
        picked = states[rows]  # rows x nodes
        order = np.argsort(rng.random(picked.shape), axis=1)
        shuffled = np.take_along_axis(picked, order, axis=1)
        limit = space.max_gpus[rows[1]][:, None]
        shuffled = np.diff(np.minimum(np.cumsum(shuffled, axis=1), limit), axis=1, prepend=0)
        shuffled = np.where(np.cumsum(shuffled > 0, axis=1) <= space.max_nodes, shuffled, 0)
        states[rows] = np.take_along_axis(shuffled, np.argsort(order, axis=1), axis=1)
    # Node capacities, earlier jobs first.
    filled = np.minimum(
        np.cumsum(states, axis=1, dtype=dtype), space.node_gpus.astype(dtype)[None, None, :]
    )
    result = filled.copy()
    result[:, 1:] -= filled[:, :-1]
    return result


def seed_population(
    seeds: np.ndarray, size: int, space: SearchSpace, rng: np.random.Generator
) -> np.ndarray:
    """`size` repaired states: the seeds (the current allocation first), then mutants of them."""
    population = np.concatenate([space.base[None], seeds])[:size]
    while len(population) < size:
        picks = population[rng.integers(0, len(population), size=size - len(population))]
        population = np.concatenate([population, mutate(picks, space, rng)])
    return repair(population, space, rng)


def search(
    seeds: np.ndarray,
    space: SearchSpace,
    fitness: Callable[[np.ndarray], np.ndarray],
    population: int,
    generations: int,
    rng: np.random.Generator,
    patience: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The final population, best first, and its fitness (higher is better). With
    `patience` > 0 the search stops early once that many generations in a row have not
    improved the best state."""
    # Small integers: GPU counts per node fit in 16 bits, and the arrays move faster.
    space = replace(space, base=space.base.astype(_STATE))
    states = seed_population(seeds.astype(_STATE), population, space, rng)
    scores = fitness(states)
    best, stale = float(scores.max()), 0
    for _ in range(generations):
        pairs = max(1, population // 2)
        a = _tournament(scores, pairs, rng)
        b = _tournament(scores, pairs, rng)
        children = repair(mutate(crossover(states[a], states[b], rng), space, rng), space, rng)
        child_scores = fitness(children)
        pool = np.concatenate([states, children])
        pool_scores = np.concatenate([scores, child_scores])
        keep = np.argsort(-pool_scores, kind="stable")[:population]
        states, scores = pool[keep], pool_scores[keep]
        if patience > 0:
            stale = stale + 1 if scores[0] <= best else 0
            best = max(best, float(scores[0]))
            if stale >= patience:
                break
    return states, scores


def _tournament(scores: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    first = rng.integers(0, len(scores), size=count)
    second = rng.integers(0, len(scores), size=count)
    return np.where(scores[first] >= scores[second], first, second)
