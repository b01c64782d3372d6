"""Sia (SOSP'23): each job gets one (GPU type, nodes, GPUs) configuration, or none, chosen by
an integer program over every job's goodput on every configuration.

G[j, c] is job j's goodput on configuration c (shock.plugins.policies.sia.goodput). Each
job's row is normalised by its smallest positive entry, so that its worst configuration
counts 1; a configuration other than the job's current one is multiplied by the restart
factor

    r_j = max(age_j - restarts_j x penalty_j, 0) / (age_j + penalty_j)   (1 while age_j < penalty_j)

(age: seconds since it arrived; penalty: its application's measured restart cost), and G
floored at 1e-4. With fairness exponent p (default -0.5) and A = min(round(G^p, 2), 3000):

    p < 0:  minimise  sum_j w_j sum_c A[j, c] x[j, c] + lambda_n (N - sum_jc x[j, c])
    p > 0:  maximise  sum_j w_j sum_c A[j, c] x[j, c] - lambda_n (N - sum_jc x[j, c])
    s.t.    sum_c x[j, c] <= 1                                   (one configuration per job)
            sum_j sum_{c of type w} gpus_c x[j, c] <= capacity_w (per worker type)
            x[j, current_j] = 1  while job j is still restoring from its last change
            x binary; x[j, c] = 0 where the job cannot use c (its limits)

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
    InputError,
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
from shock.goodput.profiles import SiaProfiles, read_profiles
from shock.goodput.speedup import GoodputTable, application_of, epoch_of, table_for
from shock.plugins.policies.sia.goodput import (
    GoodputEstimator,
    configurations,
    gpus_per_node_of,
    measured_table,
)
from shock.plugins.policies.sia.state import Config, SiaLedger

# Sia's restart penalties (seconds) measured on its physical cluster, by application: they
# price a move in the restart factor.
RESTART_PENALTY_S = {
    "deepspeech2": 25.0,
    "imagenet": 250.0,
    "cifar10": 30.0,
    "bert": 120.0,
    "yolov3": 45.0,
}
# Seconds a (re)started job spends checkpointing and restoring in Sia's simulator, by
# application (30 s for others): a job keeps its configuration until they have passed.
RESTORE_S = {
    "cifar10": 50.0,
    "deepspeech2": 25.0,
    "bert": 120.0,
    "yolov3": 80.0,
    "imagenet": 250.0,
    "ncf": 15.0,
}
# Options that were the policy's and are the run's now: the profiles define the simulated
# jobs' speed, which is no policy's to say.
_RUN_INPUTS = {"profiles": "--goodput-profiles PATH", "calibrate": "--no-goodput-calibration"}
_CLIP = 3000.0
_ZERO_GAIN = 1e-4


def parse_node_gpus(text: str) -> dict[str, int]:
    """`"a100:8,rtx2080ti:8"` -> {"a100": 8, "rtx2080ti": 8}."""
    result: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, count = item.partition(":")
        if not sep or not name.strip() or not count.strip().isdigit() or int(count) < 1:
            raise ValueError(
                f"node_gpus: '{item}' is not TYPE:GPUS (e.g. a100:8,t4:4) with GPUS >= 1"
            )
        result[name.strip()] = int(count)
    return result


@dataclass(frozen=True, slots=True)
class SiaOptions:
    # Fairness exponent of the power mean (negative: fairer); not 0.
    p: float = -0.5
    # Weight of each job left without GPUs (must exceed 1 for p < 0).
    lambda_n: float = 1.1
    # GPUs per node of every worker type not named in node_gpus.
    gpus_per_node: int = 4
    # GPUs per node by worker type, e.g. "a100:8,rtx2080ti:8,t4:4".
    node_gpus: str = ""
    # Restart cost (s) of jobs whose application has no measured one.
    restart_penalty_s: float = 30.0
    # Sia's bootstrapping: a job's model exists only where it ran, it starts on one GPU and
    # grows to at most twice the GPUs it has run on. Off: every model is known from the start.
    explore: bool = True
    # Keep a job's configuration while it restores from its last change (Sia's simulator).
    pin_restarting: bool = True
    # Largest configuration (GPUs).
    max_gpus: int = 64

    def __post_init__(self) -> None:
        if self.p == 0:
            raise ValueError("sia's fairness exponent p must not be 0")
        if self.gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")
        if self.max_gpus < 1:
            raise ValueError("max_gpus must be at least 1")
        parse_node_gpus(self.node_gpus)


def profiles_of(problem: PolicyInput) -> SiaProfiles | None:
    """The run's measured per-GPU-type profiles (`--goodput-profiles`), if it has them."""
    folder = problem.goodput_profiles
    return read_profiles(folder) if folder else None


def penalty_of(job_type: str, default_s: float) -> float:
    name = application_of(job_type)
    return RESTART_PENALTY_S.get(name, default_s) if name else default_s


def restore_of(job_type: str) -> float:
    name = application_of(job_type)
    return RESTORE_S.get(name, 30.0) if name else 30.0


def restart_factor(age_s: float, restarts: int, penalty_s: float) -> float:
    """Sia's discount on a configuration other than the current one (1: none)."""
    if penalty_s <= 0 or age_s < penalty_s:
        return 1.0
    return max(age_s - restarts * penalty_s, 0.0) / (age_s + penalty_s)


class Sia(Policy):
    name = "sia"
    description = "goodput-optimised configurations per job on heterogeneous GPUs (Sia, MILP)"
    problem_class = ProblemClass.MILP
    reallocate_every_round = True

    def __init__(self, options: SiaOptions | None = None) -> None:
        self.options = options or SiaOptions()
        self.ledger = SiaLedger()
        self.node_gpus = parse_node_gpus(self.options.node_gpus)

    def with_options(self, values: Mapping[str, str]) -> Sia:
        for key, flag in _RUN_INPUTS.items():
            if key in values:
                raise InputError(
                    f"the measured profiles are the run's, not the policy's: use {flag}",
                    field=f"--policy-option {key}",
                )
        return Sia(typed_options(self.options, values, self.name))

    def for_run(self, seed: int) -> Sia:
        return Sia(self.options)

    def snapshot(self) -> dict[str, Any]:
        return self.ledger.snapshot()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.ledger = SiaLedger.from_snapshot(snapshot)

    def gpus_per_node(self, worker_types: tuple[str, ...]) -> list[int]:
        return gpus_per_node_of(worker_types, self.node_gpus, self.options.gpus_per_node)

    def configurations(self, problem: PolicyInput) -> tuple[Config, ...]:
        per_node = self.gpus_per_node(problem.worker_types)
        return configurations(problem.capacity, per_node, self.options.max_gpus)

    def goodputs(self, problem: PolicyInput, configs: tuple[Config, ...]) -> np.ndarray:
        """G[j, c]: job j's goodput on configuration c (0 where it cannot use c)."""
        return GoodputEstimator(
            problem,
            configs,
            self.gpus_per_node(problem.worker_types),
            self.ledger,
            profiles_of(problem),
            self.options.explore,
            self.options.max_gpus,
        ).matrix()

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(job.job_id for job in problem.jobs)
        m, n = len(keys), len(problem.worker_types)
        self.ledger.forget_all_but(keys)
        if not keys:
            return Allocation.empty(problem.worker_types)
        configs = self.configurations(problem)
        goodput = self.goodputs(problem, configs)
        chosen = self._solve(problem, configs, goodput, solver)
        fractions = np.zeros((m, n))
        elastic: dict[int | tuple[int, int], ElasticGrant] = {}
        per_node = self.gpus_per_node(problem.worker_types)
        for j, job in enumerate(problem.jobs):
            config = chosen[j]
            self.ledger.record(job.job_id, config, problem.now)
            if config is None:
                continue
            fractions[j, config.worker] = min(1.0, config.gpus / max(job.scale_factor, 1))
            elastic[job.job_id] = self._grant(problem, job.job_type, j, config, per_node)
        return Allocation(keys, problem.worker_types, fractions, elastic=elastic)

    def _grant(
        self,
        problem: PolicyInput,
        job_type: str,
        j: int,
        config: Config,
        per_node: list[int],
    ) -> ElasticGrant:
        """The grant of a configuration, with the batch size the job's goodput model picks on
        that GPU type."""
        job = problem.jobs[j]
        worker_type = problem.worker_types[config.worker]
        gpn = per_node[config.worker]
        nodes = max(1, -(-self.options.max_gpus // gpn))
        table: GoodputTable | None = None
        profiles = profiles_of(problem)
        name = application_of(job_type)
        if profiles is not None and name is not None:
            suffix = profiles.suffix_for(worker_type)
            app = profiles.applications.get(name)
            if app is not None and suffix is not None and suffix in app.by_suffix:
                epoch = min(
                    app.max_epochs - 1,
                    int(app.max_epochs * max(job.steps_done, 0.0) / max(job.total_steps, 1)),
                )
                table = measured_table(profiles, name, suffix, epoch, gpn, nodes)
        if table is None and name is not None:
            epoch = epoch_of(job_type, job.steps_done, job.total_steps)
            table = table_for(job_type, epoch, nodes, gpn)
        if table is None:
            return ElasticGrant(worker_type, config.gpus, config.num_nodes)
        atomic = int(table.atomic_bsz[config.num_nodes, config.gpus])
        accum = int(table.accum_steps[config.num_nodes, config.gpus])
        if atomic < 1:
            return ElasticGrant(worker_type, config.gpus, config.num_nodes)
        return ElasticGrant(
            worker_type,
            config.gpus,
            config.num_nodes,
            batch_size=config.gpus * atomic * (accum + 1),
            atomic_batch_size=atomic,
            accumulation_steps=accum,
        )

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
            if current is not None:
                penalty = penalty_of(job.job_type, opts.restart_penalty_s)
                age = problem.now - job.arrival_time
                factor = restart_factor(age, self.ledger.restarts.get(job.job_id, 0), penalty)
                keep = np.array([c == current for c in configs])
                row = np.where(keep, row, row * factor)
            # A discount to (almost) nothing makes a configuration worthless, not free: Sia
            # floors goodputs at 1e-4 before raising them to p.
            floored = np.maximum(np.where(positive, row, 1.0), _ZERO_GAIN)
            powered = np.minimum(np.round(np.power(floored, opts.p), 2), _CLIP)
            utility[j] = np.where(positive, powered, 0.0)
        return utility

    def pinned(self, problem: PolicyInput, configs: tuple[Config, ...]) -> dict[int, int]:
        """Row -> configuration index of jobs still restoring after their last change."""
        if not self.options.pin_restarting:
            return {}
        index = {c: i for i, c in enumerate(configs)}
        pins = {}
        for j, job in enumerate(problem.jobs):
            current = self.ledger.current.get(job.job_id)
            if current in index and self.ledger.restarting(
                job.job_id, problem.now, restore_of(job.job_type)
            ):
                pins[j] = index[current]
        used = np.zeros(len(problem.worker_types))
        for c in pins.values():
            used[configs[c].worker] += configs[c].gpus
        # Pins that no longer fit (the cluster shrank) give way: the solver decides afresh.
        return pins if bool(np.all(used <= problem.capacity)) else {}

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
        usable = goodput > 0
        pins = self.pinned(problem, configs)
        for j, c in pins.items():
            usable[j, c] = True  # a restoring job keeps its GPUs even if its model changed
            if utility[j, c] == 0:
                utility[j, c] = 1.0
        # Columns: the usable (job, config) pairs. Cost (minimised) per column.
        rows_j, cols_c = np.nonzero(usable)
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
        lower = np.zeros(k)
        for j, c in pins.items():
            lower[(rows_j == j) & (cols_c == c)] = 1.0
        lp = MatrixLP(
            cost=cost,
            col_lower=lower,
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


@hookimpl
def register_policies(register: Register) -> None:
    register(Sia())
