"""Sia (SOSP'23): each job gets one (GPU type, nodes, GPUs) configuration, or none, chosen by
an integer program over every job's goodput on every configuration.

Configurations of a worker type with nodes of `g` GPUs: 1, 2, 4, ... GPUs (powers of two
below `g`) on one node, then k whole nodes (k g GPUs) for k = 1 .. its nodes. A job's
goodput G[j, c] on configuration c of type w is its one-GPU throughput there, T[j, w], times
its goodput speedup on c's nodes and GPUs (the goodput model of its Pollux application, at
the batch size best for c; linear in the GPUs for a job without one). Each job's row is
normalised by its smallest positive entry, so that its worst configuration counts 1; a
configuration other than the job's current one is discounted by the restart factor
(shock.goodput.restarts), and G floored at 1e-4. With fairness exponent p (default -0.5) and
A = min(G^p, 3000):

    p < 0:  minimise  sum_j w_j sum_c A[j, c] x[j, c] + lambda_n (N - sum_jc x[j, c])
    p > 0:  maximise  sum_j w_j sum_c A[j, c] x[j, c] - lambda_n (N - sum_jc x[j, c])
    s.t.    sum_c x[j, c] <= 1                               (one configuration per job)
            sum_j sum_{c of type w} gpus_c x[j, c] <= capacity_w  (per worker type)
            x binary; x[j, c] = 0 where the job cannot use c (its batch limits)

lambda_n > 1 makes leaving a job out cost more than its worst configuration (A <= 1 when p <
0). Solved as a MILP on HiGHS by default (`solve_matrix_milp`; any MILP solver through Pyomo).

The allocation's `elastic` grants carry each job's (type, nodes, GPUs, batch size); its
`fractions` give a job on type w the share gpus / scale factor (at most 1), which an engine
that runs jobs at their trace's scale factor can realise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    ElasticGrant,
    MatrixLP,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    hookimpl,
    solve_matrix_milp,
    typed_options,
)
from shock.goodput.restarts import RestartLedger, restart_factor
from shock.goodput.speedup import GoodputTable, application_of, epoch_of, table_for

# Sia's restart penalties (seconds) measured on its physical cluster, by application.
RESTART_PENALTY_S = {
    "deepspeech2": 25.0,
    "imagenet": 250.0,
    "cifar10": 30.0,
    "bert": 120.0,
    "yolov3": 45.0,
}
_CLIP = 3000.0
_ZERO_GAIN = 1e-4


@dataclass(frozen=True, slots=True)
class SiaOptions:
    # Fairness exponent of the power mean (negative: fairer); not 0.
    p: float = -0.5
    # Weight of each job left without GPUs (must exceed 1 for p < 0).
    lambda_n: float = 1.1
    # GPUs per node of every worker type.
    gpus_per_node: int = 4
    # Restart cost (s) of jobs whose application has no measured one.
    restart_penalty_s: float = 30.0

    def __post_init__(self) -> None:
        if self.p == 0:
            raise ValueError("sia's fairness exponent p must not be 0")
        if self.gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")


@dataclass(frozen=True, slots=True)
class Config:
    worker: int  # column of the worker type
    num_nodes: int
    gpus: int


def configurations(capacity: np.ndarray, gpus_per_node: int) -> tuple[Config, ...]:
    """Every configuration of every worker type (see the module docstring)."""
    configs: list[Config] = []
    for w, total in enumerate(capacity):
        total = int(total)
        nodes = -(-total // gpus_per_node)
        size = 1
        while size < gpus_per_node and size <= total:
            configs.append(Config(w, 1, size))
            size *= 2
        for k in range(1, nodes + 1):
            if k * gpus_per_node <= total:
                configs.append(Config(w, k, k * gpus_per_node))
    return tuple(configs)


def penalty_of(job_type: str, default_s: float) -> float:
    name = application_of(job_type)
    return RESTART_PENALTY_S.get(name, default_s) if name else default_s


class Sia(Policy):
    name = "sia"
    description = "goodput-optimised configurations per job on heterogeneous GPUs (Sia, MILP)"
    problem_class = ProblemClass.MILP
    reallocate_every_round = True

    def __init__(self, options: SiaOptions | None = None) -> None:
        self.options = options or SiaOptions()
        self.ledger = RestartLedger()

    def with_options(self, values: Mapping[str, str]) -> Sia:
        return Sia(typed_options(self.options, values, self.name))

    def for_run(self, seed: int) -> Sia:
        return Sia(self.options)

    def snapshot(self) -> dict[str, Any]:
        return self.ledger.snapshot(encode=lambda c: [c.worker, c.num_nodes, c.gpus])

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.ledger = RestartLedger.from_snapshot(snapshot, decode=lambda v: Config(*map(int, v)))

    def goodputs(self, problem: PolicyInput, configs: tuple[Config, ...]) -> np.ndarray:
        """G[j, c]: job j's goodput on configuration c (0 where it cannot use c)."""
        gpn = self.options.gpus_per_node
        max_nodes = max((c.num_nodes for c in configs), default=1)
        worker = np.array([c.worker for c in configs], dtype=int)
        nodes = np.array([c.num_nodes for c in configs], dtype=int)
        gpus = np.array([c.gpus for c in configs], dtype=int)
        result = np.zeros((len(problem.jobs), len(configs)))
        for j, job in enumerate(problem.jobs):
            epoch = epoch_of(job.job_type, job.steps_done, job.total_steps)
            table = table_for(job.job_type, epoch, max_nodes, gpn)
            one_gpu = float(table.goodput[1, 1]) or 1.0
            per_type = problem.throughputs[j].astype(float)
            if not np.any(per_type > 0):
                per_type = np.ones_like(per_type)  # no throughputs: its model alone decides
            usable = gpus <= table.max_gpus
            result[j] = np.where(usable, per_type[worker] * table.at(nodes, gpus) / one_gpu, 0.0)
        return result

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        m, n = len(keys), len(problem.worker_types)
        self.ledger.forget_all_but(keys)
        if not keys:
            return Allocation.empty(problem.worker_types)
        configs = configurations(problem.capacity, self.options.gpus_per_node)
        goodput = self.goodputs(problem, configs)
        chosen = self._solve(problem, configs, goodput, solver)
        fractions = np.zeros((m, n))
        elastic: dict[int | tuple[int, int], ElasticGrant] = {}
        for j, job in enumerate(problem.jobs):
            config = chosen[j]
            self.ledger.record(job.job_id, config)
            if config is None:
                continue
            fractions[j, config.worker] = min(1.0, config.gpus / max(job.scale_factor, 1))
            elastic[job.job_id] = grant_for(
                job.job_type,
                job.steps_done,
                job.total_steps,
                problem.worker_types[config.worker],
                config,
                self.options.gpus_per_node,
                max(c.num_nodes for c in configs),
            )
        return Allocation(keys, problem.worker_types, fractions, elastic=elastic)

    def utilities(
        self, problem: PolicyInput, configs: tuple[Config, ...], goodput: np.ndarray
    ) -> np.ndarray:
        """A[j, c]: normalised, restart-discounted goodput raised to p (0 where unusable)."""
        opts = self.options
        utility = np.zeros_like(goodput)
        for j, job in enumerate(problem.jobs):
            row = goodput[j]
            positive = row > 0
            if not positive.any():
                continue
            row = row / row[positive].min()
            current = self.ledger.current.get(job.job_id)
            penalty = penalty_of(job.job_type, opts.restart_penalty_s)
            age = problem.now - job.arrival_time
            if current is not None and age >= penalty:
                factor = restart_factor(age, self.ledger.restarts.get(job.job_id, 0), penalty)
                keep = np.array([c == current for c in configs])
                row = np.where(keep, row, row * factor)
            # A discount to (almost) nothing makes a configuration worthless, not free: Sia
            # floors goodputs at 1e-4 before raising them to p.
            usable = goodput[j] > 0
            floored = np.maximum(np.where(usable, row, 1.0), _ZERO_GAIN)
            utility[j] = np.where(usable, np.minimum(np.power(floored, opts.p), _CLIP), 0.0)
        return utility

    def _solve(
        self,
        problem: PolicyInput,
        configs: tuple[Config, ...],
        goodput: np.ndarray,
        solver: SolverSpec,
    ) -> list[Config | None]:
        opts = self.options
        m = len(problem.jobs)
        weights = problem.priority_weights
        utility = self.utilities(problem, configs, goodput)
        # Columns: the usable (job, config) pairs. Cost (minimised) per column.
        rows_j, cols_c = np.nonzero(goodput > 0)
        if len(rows_j) == 0:
            return [None] * m
        a = utility[rows_j, cols_c] * weights[rows_j]
        cost = a - opts.lambda_n if opts.p < 0 else -(a + opts.lambda_n)
        workers = np.array([configs[c].worker for c in cols_c])
        gpus = np.array([configs[c].gpus for c in cols_c], dtype=float)
        num_types = len(problem.worker_types)
        # Row r < m: job r's one-configuration row; row m + w: worker type w's GPUs.
        k = len(rows_j)
        index = np.empty(2 * k, dtype=np.int32)
        value = np.empty(2 * k)
        index[0::2] = rows_j
        value[0::2] = 1.0
        index[1::2] = m + workers
        value[1::2] = gpus
        lp = MatrixLP(
            cost=cost,
            col_lower=np.zeros(k),
            col_upper=np.ones(k),
            row_lower=np.full(m + num_types, -np.inf),
            row_upper=np.concatenate([np.ones(m), problem.capacity.astype(float)]),
            a_start=np.arange(0, 2 * k + 1, 2, dtype=np.int32),
            a_index=index,
            a_value=value,
        )
        x = solve_matrix_milp(lp, np.ones(k, dtype=bool), solver)
        chosen: list[Config | None] = [None] * m
        for col in np.nonzero(x > 0.5)[0]:
            chosen[rows_j[col]] = configs[cols_c[col]]
        return chosen


def grant_for(
    job_type: str,
    steps_done: float,
    total_steps: int,
    worker_type: str,
    config: Config,
    gpus_per_node: int,
    max_nodes: int,
) -> ElasticGrant:
    """The grant of a configuration, with the batch size the job's goodput model picks."""
    if application_of(job_type) is None:
        return ElasticGrant(worker_type, config.gpus, config.num_nodes)
    table: GoodputTable = table_for(
        job_type, epoch_of(job_type, steps_done, total_steps), max_nodes, gpus_per_node
    )
    atomic = int(table.atomic_bsz[config.num_nodes, config.gpus])
    accum = int(table.accum_steps[config.num_nodes, config.gpus])
    return ElasticGrant(
        worker_type,
        config.gpus,
        config.num_nodes,
        batch_size=config.gpus * atomic * (accum + 1),
        atomic_batch_size=atomic,
        accumulation_steps=accum,
    )


@hookimpl
def register_policies(register: Register) -> None:
    register(Sia())
