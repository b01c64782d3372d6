"""The shockwave policy: plan T rounds ahead for fairness and efficiency of dynamic jobs.

Every round the mechanism asks the policy for the round's order. The policy keeps each job's
batch-size history (the modes it has been seen at, and epochs done at each), predicts its
remaining run time (Dirichlet predictor) and its projected finish-time fairness rho, and
re-plans (planner.py) on arrivals, on completions and every few rounds. A plan gives each job
a number of rounds in the window; each round, jobs with rounds left run first (those planned
for every round left of the window, then the others, highest rho first),
and every other job follows by rho so idle GPUs are filled (work-conserving).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from shock.core.epochs import datasets, job_type_with_batch_size, steps_per_epoch
from shock.core.errors import SolverError
from shock.core.hookspecs import Register, hookimpl
from shock.core.model import batch_size_of, model_family_of
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob, ProblemClass
from shock.core.policy_options import typed_options
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable
from shock.plugins.policies.shockwave.options import ShockwaveOptions
from shock.plugins.policies.shockwave.planner import PlanJob, PlanProblem, solve_plan
from shock.plugins.policies.shockwave.predictor import (
    ModeObservations,
    attained_alone_s,
    calibration_factor,
    observations_from,
    predicted_remaining_s,
)


@dataclass(slots=True)
class _JobHistory:
    """What the policy has seen of one job."""

    epoch_duration_by_mode: dict[int, float]  # table epoch duration at each candidate mode
    epochs_by_mode: dict[int, float] = field(default_factory=dict)
    last_mode: int | None = None
    last_epochs_done: float = 0.0


@dataclass(frozen=True, slots=True)
class JobOutlook:
    """One job's state as the policy sees it this round."""

    job_id: int
    gpus: int
    progress: float
    progress_per_round: float
    remaining_s: float
    rho: float


@dataclass(slots=True)
class ShockwaveStats:
    plans: int = 0
    plans_with_ftf_constraint: int = 0
    plans_failed: int = 0  # solver found no plan in time: the round goes by rho only


def _epoch_steps(job: PolicyJob, batch_size: int | None) -> float:
    """Steps per epoch; a job of unknown dataset counts as one epoch."""
    model = model_family_of(job.job_type)
    if batch_size is None or datasets().samples(model) is None:
        return float(max(job.total_steps, 1))
    return float(steps_per_epoch(model, batch_size))


def _candidate_modes(
    job: PolicyJob, batch_size: int | None, table: ThroughputTable | None, measured: float
) -> dict[int, float]:
    """Epoch duration (s, alone, fastest type) at every batch size the job could move to:
    its current one and every larger one of its model in the table."""
    steps = _epoch_steps(job, batch_size)
    if batch_size is None or table is None:
        return {batch_size or 0: steps / measured if measured > 0 else math.inf}
    model = model_family_of(job.job_type)
    modes: dict[int, float] = {}
    for (job_type, scale_factor), per_type in table.isolated.items():
        if scale_factor != job.scale_factor or not job_type.startswith(model + " "):
            continue
        size = batch_size_of(job_type)
        rate = max(per_type.values(), default=0.0)
        if size is None or size < batch_size or rate <= 0:
            continue
        if job_type != job_type_with_batch_size(model, size):
            continue
        modes[size] = _epoch_steps(job, size) / rate
    if batch_size not in modes:
        modes[batch_size] = steps / measured if measured > 0 else math.inf
    return modes


class Shockwave(Policy):
    name = "shockwave"
    description = (
        "Shockwave: T-round plan maximising FTF-weighted Nash social welfare of predicted "
        "progress of dynamic jobs, minus k x the longest predicted remaining time"
    )
    problem_class = ProblemClass.MILP
    reallocate_every_round = True
    partitionable = False

    def __init__(self, options: ShockwaveOptions | None = None) -> None:
        self.options = options or ShockwaveOptions()
        self.history: dict[int, _JobHistory] = {}
        self.quota: dict[int, int] = {}  # rounds left for each job in the current plan
        self.rounds_since_plan = 0
        self.planned_jobs: frozenset[int] = frozenset()
        self.last_outlook: dict[int, JobOutlook] = {}
        self.stats = ShockwaveStats()

    def for_run(self, seed: int) -> Shockwave:
        return Shockwave(self.options)

    def with_options(self, values: Mapping[str, str]) -> Shockwave:
        return Shockwave(typed_options(self.options, values, self.name))

    # Observing jobs.

    def _observe(self, problem: PolicyInput) -> None:
        for index, job in enumerate(problem.jobs):
            batch_size = batch_size_of(job.job_type)
            measured = float(problem.throughputs[index].max(initial=0.0))
            history = self.history.get(job.job_id)
            if history is None:
                history = _JobHistory(_candidate_modes(job, batch_size, problem.table, measured))
                self.history[job.job_id] = history
            mode = batch_size or 0
            if mode not in history.epoch_duration_by_mode:  # a mode outside the table
                history.epoch_duration_by_mode[mode] = _epoch_steps(job, batch_size) / max(
                    measured, 1e-12
                )
            epochs_done = job.steps_done / _epoch_steps(job, batch_size)
            if history.last_mode is not None:
                gained = max(0.0, epochs_done - history.last_epochs_done)
                before = history.epochs_by_mode.get(history.last_mode, 0.0)
                history.epochs_by_mode[history.last_mode] = before + gained
            history.last_mode = mode
            history.last_epochs_done = epochs_done
        gone = set(self.history) - {job.job_id for job in problem.jobs}
        for job_id in gone:
            del self.history[job_id]

    def _outlook(self, problem: PolicyInput, round_length: float) -> list[JobOutlook]:
        options = self.options
        total_gpus = float(problem.capacity.sum())
        contention = max(1.0, len(problem.jobs) / max(total_gpus, 1.0))
        outlook = []
        for index, job in enumerate(problem.jobs):
            history = self.history[job.job_id]
            batch_size = batch_size_of(job.job_type)
            steps = _epoch_steps(job, batch_size)
            total_epochs = job.total_steps / steps
            epochs_done = min(job.steps_done / steps, total_epochs)
            measured = float(problem.throughputs[index].max(initial=0.0))
            table_duration = history.epoch_duration_by_mode[batch_size or 0]
            calibration = calibration_factor(steps / table_duration, measured)
            observations: ModeObservations = observations_from(
                history.epoch_duration_by_mode, history.epochs_by_mode
            )
            remaining = predicted_remaining_s(
                observations, total_epochs - epochs_done, options.prior_epochs, calibration
            )
            alone = attained_alone_s(observations) * calibration + remaining
            elapsed = problem.now - job.arrival_time
            rho = (elapsed + remaining) / (alone * contention) if alone > 0 else 1.0
            epoch_s = steps / measured if measured > 0 else math.inf
            outlook.append(
                JobOutlook(
                    job_id=job.job_id,
                    gpus=job.scale_factor,
                    progress=epochs_done / total_epochs if total_epochs > 0 else 1.0,
                    progress_per_round=round_length / epoch_s / total_epochs,
                    remaining_s=remaining,
                    rho=rho,
                )
            )
        return outlook

    # Planning.

    def _plan(
        self, outlook: list[JobOutlook], capacity: int, round_length: float, spec: SolverSpec
    ) -> float | None:
        """Solve a new plan and set the quotas from it; return its objective (None if the
        solver found no plan)."""
        options = self.options
        share_jobs = max(len(outlook), 1)
        jobs = []
        for job in outlook:
            unfair = job.rho > options.rho_threshold
            fair_rounds = math.ceil(
                options.num_rounds * min(1.0, capacity / (share_jobs * job.gpus))
            )
            jobs.append(
                PlanJob(
                    job_id=job.job_id,
                    gpus=job.gpus,
                    progress=job.progress,
                    progress_per_round=job.progress_per_round,
                    remaining_s=job.remaining_s,
                    weight=job.rho**options.lambda_ if unfair else 1.0,
                    ftf_min_rounds=fair_rounds if unfair and options.ftf_constraint else 0,
                )
            )
        problem = PlanProblem(
            tuple(jobs), options.num_rounds, capacity, round_length, options.k, options.log_pieces
        )
        plan_spec = replace(
            spec,
            time_limit_s=spec.time_limit_s or options.time_limit_s,
            mip_gap=spec.mip_gap if spec.mip_gap is not None else options.mip_gap,
        )
        self.stats.plans += 1
        try:
            plan = solve_plan(problem, plan_spec, try_ftf=options.ftf_constraint)
        except SolverError:
            self.stats.plans_failed += 1
            self.quota = {}
            return None
        self.stats.plans_with_ftf_constraint += plan.ftf_enforced
        self.quota = {job_id: plan.rounds_of(job_id) for job_id in plan.job_ids}
        return plan.objective

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        options = self.options
        round_length = options.round_length_s or problem.round_length_s or 120.0
        capacity = int(problem.capacity.sum())
        self._observe(problem)
        outlook = self._outlook(problem, round_length)
        self.last_outlook = {job.job_id: job for job in outlook}
        job_ids = frozenset(job.job_id for job in outlook)
        self.rounds_since_plan += 1
        objective = None
        if job_ids != self.planned_jobs or self.rounds_since_plan >= options.replan_every_rounds:
            objective = self._plan(outlook, capacity, round_length, solver)
            self.planned_jobs = job_ids
            self.rounds_since_plan = 0
        by_priority = sorted(outlook, key=lambda job: (-job.rho, job.job_id))
        # Jobs planned for every round left in the window come first (replans would otherwise
        # defer a low-rho job's rounds for ever), then the planned jobs by rho.
        rounds_left = max(options.num_rounds - self.rounds_since_plan, 1)
        planned = sorted(
            (job for job in by_priority if self.quota.get(job.job_id, 0) > 0),
            key=lambda job: self.quota[job.job_id] < rounds_left,
        )
        left = capacity
        planned_now: list[int] = []
        for job in planned:
            if job.gpus <= left:
                left -= job.gpus
                planned_now.append(job.job_id)
                self.quota[job.job_id] -= 1
        chosen = set(planned_now)
        order = (*planned_now, *(job.job_id for job in by_priority if job.job_id not in chosen))
        keys = tuple(job.job_id for job in problem.jobs)
        fractions = np.zeros((len(keys), len(problem.worker_types)))
        for row, job_id in enumerate(keys):
            if job_id in chosen:
                fractions[row, int(np.argmax(problem.throughputs[row]))] = 1.0
        return Allocation(keys, problem.worker_types, fractions, objective, order)


@hookimpl
def register_policies(register: Register) -> None:
    register(Shockwave())
