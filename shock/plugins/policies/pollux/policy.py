"""Pollux (OSDI'21): co-adapt each job's GPUs and batch size to maximise a fair mean of the
jobs' goodput speedups, on a cluster of one GPU type.

Each round, for the active jobs (ordered by attained service, then arrival) and the nodes of
`gpus_per_node` GPUs the worker type's capacity makes, Pollux searches allocation matrices
A (jobs x nodes GPU counts; shock.plugins.policies.pollux.search) for the highest

    FITNESS(A) = ( 1/J sum_j (SPEEDUP_j(A_j) + 1e-3)^p )^(1/p),    p = -1 by default

    SPEEDUP_j(A_j) = goodput_j(nodes used, GPUs) / goodput_j(fair share) x nodes / GPUs
                     x restart factor, where A_j differs from the job's current allocation

goodput_j at the batch size best for that placement (shock.goodput; a job whose type names no
Pollux application scales linearly), the fair share being ceil(GPUs / J) GPUs, and the
restart factor max(age - restarts x 30 s, 0) / (age + 30 s) (shock.goodput.restarts). A job
may use at most min(2 x the most GPUs it has had (at least 1), 64, what its batch limits
allow) GPUs, on at most 16 nodes, as Pollux explores a job's scalability step by step.

The allocation's `elastic` grants carry each job's GPUs, nodes and batch size; its
`fractions` give each job gpus / scale factor (at most 1) of its worker type, which an engine
that runs jobs at their trace's scale factor can realise.

Options: `p`, `population` (100), `generations` (100), `gpus_per_node` (4),
`restart_penalty_s` (30), `max_gpus_per_job` (64), `worker_type` (the type it schedules;
default the one with the most GPUs: on a heterogeneous cluster the other types stay idle, use
`sia` there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    ElasticGrant,
    Policy,
    PolicyInput,
    Register,
    SolverSpec,
    generator_state,
    hookimpl,
    set_generator_state,
    typed_options,
)
from shock.goodput.progress import curve, fixed_batch_configuration
from shock.goodput.restarts import RestartLedger, restart_factor
from shock.goodput.speedup import application_of, epoch_of, table_for
from shock.plugins.policies.pollux.limits import FIXED_BATCH, MAX_GPUS, worker_column
from shock.plugins.policies.pollux.search import SearchSpace, search

_MAX_NODES_PER_JOB = 16


@dataclass(frozen=True, slots=True)
class PolluxOptions:
    # Power-mean exponent (negative: fairer); 0 is the geometric mean.
    p: float = -1.0
    population: int = 100
    generations: int = 100
    gpus_per_node: int = 4
    restart_penalty_s: float = 30.0
    max_gpus_per_job: int = 64
    # The worker type to schedule (Pollux knows one); empty: the one with the most GPUs.
    worker_type: str = ""
    # Stop a round's search once this many generations in a row found nothing better
    # (0: always run every generation, as Pollux does).
    patience: int = 0

    def __post_init__(self) -> None:
        if self.population < 2 or self.generations < 0 or self.patience < 0:
            raise ValueError("pollux needs population >= 2, generations >= 0, patience >= 0")
        if self.gpus_per_node < 1 or self.max_gpus_per_job < 1:
            raise ValueError("gpus_per_node and max_gpus_per_job must be at least 1")


def node_sizes(capacity: int, gpus_per_node: int) -> np.ndarray:
    """The worker type's GPUs as nodes of `gpus_per_node` (the last one may be smaller)."""
    full, rest = divmod(int(capacity), gpus_per_node)
    return np.array([gpus_per_node] * full + ([rest] if rest else []), dtype=int)


def power_mean(values: np.ndarray, p: float, axis: int = -1) -> np.ndarray:
    if p == 0:
        return np.exp(np.mean(np.log(np.maximum(values, 1e-3)), axis=axis))
    return np.mean((values + 1e-3) ** p, axis=axis) ** (1.0 / p)


class Pollux(Policy):
    name = "pollux"
    description = "goodput-adaptive GPUs and batch sizes by genetic search (Pollux, one GPU type)"
    reallocate_every_round = True

    def __init__(self, options: PolluxOptions | None = None, seed: int = 0) -> None:
        self.options = options or PolluxOptions()
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.ledger = RestartLedger()
        # job id -> its GPUs per node (the current allocation), and the most GPUs it has had.
        self.placements: dict[int, np.ndarray] = {}
        self.most_gpus: dict[int, int] = {}
        # The last round's final population, with the job ids of its rows.
        self.population: np.ndarray | None = None
        self.population_jobs: tuple[int, ...] = ()
        # GPU-seconds each job has held (Pollux orders jobs by it), counted from its grants
        # up to the last allocation, then.
        self.attained: dict[int, float] = {}
        self.last_now: float | None = None

    def with_options(self, values: Mapping[str, str]) -> Pollux:
        return Pollux(typed_options(self.options, values, self.name), self.seed)

    def for_run(self, seed: int) -> Pollux:
        return Pollux(self.options, seed)

    def snapshot(self) -> dict[str, Any]:
        population = None if self.population is None else self.population.tolist()
        return {
            "ledger": self.ledger.snapshot(encode=list),
            "placements": {str(j): p.tolist() for j, p in self.placements.items()},
            "most_gpus": {str(j): n for j, n in self.most_gpus.items()},
            "population": population,
            "population_jobs": list(self.population_jobs),
            "rng": generator_state(self.rng),
            "attained": {str(j): v for j, v in self.attained.items()},
            "last_now": self.last_now,
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.ledger = RestartLedger.from_snapshot(snapshot["ledger"], decode=tuple)
        self.placements = {
            int(j): np.array(p, dtype=int) for j, p in snapshot["placements"].items()
        }
        self.most_gpus = {int(j): int(n) for j, n in snapshot["most_gpus"].items()}
        population = snapshot["population"]
        self.population = None if population is None else np.array(population, dtype=int)
        self.population_jobs = tuple(int(j) for j in snapshot["population_jobs"])
        set_generator_state(self.rng, snapshot["rng"])
        self.attained = {int(j): float(v) for j, v in snapshot["attained"].items()}
        last = snapshot["last_now"]
        self.last_now = None if last is None else float(last)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        opts = self.options
        column = worker_column(problem, opts.worker_type, self.name)
        all_ids = tuple(job.job_id for job in problem.jobs)
        self.ledger.forget_all_but(all_ids)
        self._count_attained(problem.now, all_ids)
        if not all_ids:
            return Allocation.empty(problem.worker_types)
        nodes = node_sizes(int(problem.capacity[column]), opts.gpus_per_node)
        if len(nodes) == 0:
            empty = np.zeros((len(all_ids), len(problem.worker_types)))
            return Allocation(all_ids, problem.worker_types, empty, elastic={})
        order = sorted(
            range(len(problem.jobs)),
            key=lambda j: (
                self.attained.get(problem.jobs[j].job_id, 0.0),
                problem.jobs[j].arrival_time,
                problem.jobs[j].job_id,
            ),
        )
        jobs = [problem.jobs[j] for j in order]
        ids = tuple(job.job_id for job in jobs)
        num_nodes, total = len(nodes), int(nodes.sum())
        tables = [
            table_for(
                job.job_type,
                epoch_of(job.job_type, job.steps_done, job.total_steps),
                num_nodes,
                opts.gpus_per_node,
            )
            for job in jobs
        ]
        goodput = np.stack([t.goodput for t in tables])  # jobs x nodes+1 x gpus+1
        fair = math.ceil(total / len(jobs))
        base_goodput = np.array([t.base_goodput(fair) for t in tables])
        max_gpus = np.array(
            [
                min(
                    max(2 * self.most_gpus.get(job.job_id, 0), 1),
                    opts.max_gpus_per_job,
                    t.max_gpus,
                    total,
                    MAX_GPUS.get(application_of(job.job_type) or "", total),
                )
                for job, t in zip(jobs, tables, strict=True)
            ]
        )
        base = np.zeros((len(jobs), num_nodes), dtype=int)
        for row, job in enumerate(jobs):
            placed = self.placements.get(job.job_id)
            if placed is not None and len(placed) == num_nodes:
                base[row] = placed
        ages = np.array([problem.now - job.arrival_time for job in jobs])
        factors = np.array(
            [
                restart_factor(age, self.ledger.restarts.get(job.job_id, 0), opts.restart_penalty_s)
                for age, job in zip(ages, jobs, strict=True)
            ]
        )
        space = SearchSpace(nodes, max_gpus, base, _MAX_NODES_PER_JOB)
        rows = np.arange(len(jobs))

        def fitness(states: np.ndarray) -> np.ndarray:
            used_nodes = np.count_nonzero(states, axis=2)
            gpus = states.sum(axis=2)
            speedup = goodput[rows[None, :], used_nodes, gpus] / base_goodput[None, :]
            scaled = speedup * num_nodes / total
            moved = np.any(states != base[None], axis=2)
            scaled = np.where(moved, scaled * factors[None, :], scaled)
            result: np.ndarray = power_mean(scaled, opts.p)
            return result

        seeds = self._seeds(ids, num_nodes)
        states, _ = search(
            seeds, space, fitness, opts.population, opts.generations, self.rng, opts.patience
        )
        self.population, self.population_jobs = states, ids
        best = states[0]
        return self._allocation(problem, column, jobs, best, tables, all_ids)

    def _count_attained(self, now: float, live: tuple[int, ...]) -> None:
        """Add the GPU-seconds each job held since the last allocation (its grant then)."""
        if self.last_now is not None:
            elapsed = max(now - self.last_now, 0.0)
            for job_id, placed in self.placements.items():
                self.attained[job_id] = self.attained.get(job_id, 0.0) + elapsed * placed.sum()
        self.last_now = now
        keep = set(live)
        self.attained = {j: v for j, v in self.attained.items() if j in keep}

    def _seeds(self, ids: tuple[int, ...], num_nodes: int) -> np.ndarray:
        """The last population re-indexed to this round's jobs (new jobs get no GPUs)."""
        if self.population is None or self.population.shape[2] != num_nodes:
            return np.zeros((0, len(ids), num_nodes), dtype=int)
        where = {job_id: row for row, job_id in enumerate(self.population_jobs)}
        seeds = np.zeros((len(self.population), len(ids), num_nodes), dtype=int)
        for row, job_id in enumerate(ids):
            if job_id in where:
                seeds[:, row] = self.population[:, where[job_id]]
        return seeds

    def _allocation(
        self,
        problem: PolicyInput,
        column: int,
        jobs: list,
        best: np.ndarray,
        tables: list,
        all_ids: tuple[int, ...],
    ) -> Allocation:
        position = {job_id: row for row, job_id in enumerate(all_ids)}
        fractions = np.zeros((len(all_ids), len(problem.worker_types)))
        elastic: dict[int | tuple[int, int], ElasticGrant] = {}
        worker = problem.worker_types[column]
        for row, job in enumerate(jobs):
            gpus = int(best[row].sum())
            used = int(np.count_nonzero(best[row]))
            self.ledger.record(job.job_id, tuple(int(v) for v in best[row]) if gpus else None)
            if gpus == 0:
                self.placements.pop(job.job_id, None)
                continue
            self.placements[job.job_id] = best[row].copy()
            self.most_gpus[job.job_id] = max(self.most_gpus.get(job.job_id, 0), gpus)
            fractions[position[job.job_id], column] = min(1.0, gpus / max(job.scale_factor, 1))
            layout = tuple(int(v) for v in best[row])
            name = application_of(job.job_type)
            if name is None:
                elastic[job.job_id] = ElasticGrant(worker, gpus, used, node_gpus=layout)
                continue
            atomic = int(tables[row].atomic_bsz[used, gpus])
            accum = int(tables[row].accum_steps[used, gpus])
            if name in FIXED_BATCH:
                fixed = fixed_batch_configuration(curve(name).limits, used, gpus, FIXED_BATCH[name])
                atomic, accum = fixed.atomic_bsz, fixed.accum_steps
            elastic[job.job_id] = ElasticGrant(
                worker,
                gpus,
                used,
                batch_size=gpus * atomic * (accum + 1),
                atomic_batch_size=atomic,
                accumulation_steps=accum,
                node_gpus=layout,
            )
        live = set(all_ids)
        self.placements = {j: p for j, p in self.placements.items() if j in live}
        self.most_gpus = {j: n for j, n in self.most_gpus.items() if j in live}
        return Allocation(all_ids, problem.worker_types, fractions, elastic=elastic)


@hookimpl
def register_policies(register: Register) -> None:
    register(Pollux())
