"""The shockwave policy: plan T rounds ahead for fairness and efficiency of dynamic jobs.

Follows Shockwave's scheduler (scheduler/shockwave.py and its simulator's use of it), except
where docs/shockwave.md lists a deviation (calibration by speed per batch size, rho from
arrival: both options give back the artifact's):

- every job has an epoch profile (profile.py) and epoch progress; its remaining run time is
  the Dirichlet posterior of predictor.py, its profiled durations calibrated by its measured
  speed (`calibration`);
- when jobs arrive or finish, each job's finish time at a uniform share is re-estimated and
  appended to its series; its fair-finish target is the series' momentum average;
- a plan (planner.py) is solved when jobs arrive or finish, after `replan_every_rounds`
  rounds, or when the window runs out: first with every job held to its target (FTF); if
  that is infeasible, without it and with each job's log utility weighted by its priority
  rho^lambda (rho = (now + remaining / share - arrival) / (target - arrival), above
  rho_max), its rounds ranked by priority;
- each round runs the jobs the plan has for it, then fills idle GPUs with the other jobs,
  longest predicted remaining run time first (work-conserving).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    Policy,
    PolicyInput,
    PolicyJob,
    ProblemClass,
    Register,
    SolverError,
    SolverSpec,
    batch_size_of,
    by_job,
    hookimpl,
    job_keyed,
    typed_options,
)
from shock.plugins.policies.shockwave.options import ShockwaveOptions
from shock.plugins.policies.shockwave.planner import Plan, PlanJob, PlanProblem, solve_plan
from shock.plugins.policies.shockwave.predictor import (
    Measurement,
    RoundRun,
    calibration_factor,
    momentum_average,
    posterior_remaining_s,
    uniform_share,
)
from shock.plugins.policies.shockwave.profile import build_profile, epoch_steps, samples_per_epoch
from shock.plugins.policies.shockwave.records import JobHistory, plan_from_json, plan_to_json


@dataclass(frozen=True, slots=True)
class JobOutlook:
    """One job's state as the policy sees it this round."""

    job_id: int
    gpus: int
    epochs_done: int
    remaining_s: float
    epoch_s: float  # mean epoch duration so far (the plan's run time per planned epoch)
    target_s: float  # fair-finish target (momentum average of the estimates)
    rho: float  # (now + remaining / share) / target
    priority: float


@dataclass(slots=True)
class ShockwaveStats:
    plans: int = 0
    plans_with_ftf_constraint: int = 0
    plans_failed: int = 0  # no plan in the time limit: the round is filled by remaining time
    rankings_by_greedy: int = 0  # the ranking MILP found nothing; greedy placed the rounds


class Shockwave(Policy):
    name = "shockwave"
    description = (
        "Shockwave: T-round plan maximising the (priority-weighted) Nash welfare of epoch "
        "progress minus k x the longest remaining time, held to finish-time fairness"
    )
    problem_class = ProblemClass.MILP
    reallocate_every_round = True
    partitionable = False

    def __init__(self, options: ShockwaveOptions | None = None) -> None:
        self.options = options or ShockwaveOptions()
        self.tracked: dict[int, JobHistory] = {}
        self.plan: Plan | None = None
        self.plan_round = 0  # the plan's round index for the coming round
        self.rounds_run = 0  # rounds planned so far: Shockwave re-plans every 8th, whatever
        self.planned_jobs: frozenset[int] = frozenset()
        self.estimated_jobs: frozenset[int] = frozenset()
        self.last_outlook: dict[int, JobOutlook] = {}
        self.stats = ShockwaveStats()

    def for_run(self, seed: int) -> Shockwave:
        return Shockwave(self.options)

    def snapshot(self) -> dict[str, Any]:
        return {
            "jobs": by_job({j: record.to_json() for j, record in self.tracked.items()}),
            "plan": None if self.plan is None else plan_to_json(self.plan),
            "plan_round": self.plan_round,
            "rounds_run": self.rounds_run,
            "planned_jobs": sorted(self.planned_jobs),
            "estimated_jobs": sorted(self.estimated_jobs),
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.tracked = job_keyed(snapshot["jobs"], JobHistory.from_json)
        plan = snapshot["plan"]
        self.plan = None if plan is None else plan_from_json(plan)
        self.plan_round = int(snapshot["plan_round"])
        self.rounds_run = int(snapshot["rounds_run"])
        self.planned_jobs = frozenset(int(j) for j in snapshot["planned_jobs"])
        self.estimated_jobs = frozenset(int(j) for j in snapshot["estimated_jobs"])

    def with_options(self, values: Mapping[str, str]) -> Shockwave:
        return Shockwave(typed_options(self.options, values, self.name))

    # Observing jobs.

    def _track(self, problem: PolicyInput, round_length: float) -> None:
        """Start tracking new jobs; record the speed of those that ran in the last round."""
        for index, job in enumerate(problem.jobs):
            rate = float(problem.throughputs[index].max(initial=0.0))
            epochs = _epochs_done(job)
            tracked = self.tracked.get(job.job_id)
            if tracked is None:
                profile = build_profile(job, problem.table, problem.worker_types, rate)
                tracked = JobHistory(profile, problem.now, samples_per_epoch(job))
                self.tracked[job.job_id] = tracked
            elif epochs > tracked.last_epochs + 1e-12:  # it ran: what its calibration reads
                if self.options.calibration == "running":
                    run = RoundRun(epochs - tracked.last_epochs, tracked.last_batch_size)
                    tracked.speed.add(run, round_length, tracked.profile)
                elif self.options.calibration == "artifact":
                    tracked.measurements.append(
                        Measurement(problem.now, tracked.last_rate, tracked.last_batch_size)
                    )
            tracked.last_epochs = epochs
            tracked.last_rate = rate
            tracked.last_batch_size = batch_size_of(job.job_type) or 0
        active = {job.job_id for job in problem.jobs}
        for job_id in set(self.tracked) - active:
            del self.tracked[job_id]

    def _recalibrate(self) -> None:
        """Shockwave re-calibrates a job's epoch durations whenever it predicts its remaining
        run time, which its simulator does when it plans."""
        method = self.options.calibration
        for tracked in self.tracked.values():
            if method == "artifact":
                tracked.calibration = calibration_factor(
                    tracked.calibration,
                    tracked.measurements,
                    tracked.profile.durations_s,
                    tracked.samples_per_epoch,
                )
            elif method == "running":
                tracked.calibration = tracked.speed.factor(tracked.calibration)

    def _outlook(self, problem: PolicyInput) -> list[JobOutlook]:
        options = self.options
        gpus = float(problem.capacity.sum())
        share = uniform_share(gpus, len(problem.jobs))
        now = problem.now
        ids = frozenset(job.job_id for job in problem.jobs)
        reestimate = ids != self.estimated_jobs
        progress: list[tuple[int, float, float]] = []
        for job in problem.jobs:
            tracked = self.tracked[job.job_id]
            epochs_done = min(math.floor(_epochs_done(job) + 1e-9), tracked.profile.epochs)
            calibration = tracked.calibration
            remaining = posterior_remaining_s(tracked.profile, epochs_done, calibration)
            if reestimate:
                done = tracked.profile.done_s(epochs_done) * calibration
                estimate = tracked.admitted_s + (done + remaining) / share
                tracked.finish_estimates.append((now, estimate))
            epoch_s = tracked.profile.mean_epoch_s(epochs_done) * calibration
            progress.append((epochs_done, remaining, epoch_s))
        self.estimated_jobs = ids
        outlook = []
        for job, (epochs_done, remaining, epoch_s) in zip(problem.jobs, progress, strict=True):
            target = momentum_average(
                self.tracked[job.job_id].finish_estimates, now, options.momentum
            )
            rho = self._rho(now, remaining / share, target, job.arrival_time)
            outlook.append(
                JobOutlook(
                    job.job_id,
                    job.scale_factor,
                    epochs_done,
                    remaining,
                    epoch_s,
                    target,
                    rho,
                    self._priority(rho, remaining, problem.round_length_s or 120.0),
                )
            )
        return outlook

    def _origin(self, arrival: float) -> float:
        """Where rho's durations start: the job's arrival (finish-time fairness's rho), or
        time 0 with `rho_since_arrival=false` (Shockwave's artifact: a late job's rho then
        barely moves)."""
        return arrival if self.options.rho_since_arrival else 0.0

    def _rho(self, now: float, left_at_share: float, target: float, arrival: float) -> float:
        """Projected finish over the fair-finish target, both measured from `_origin`."""
        origin = self._origin(arrival)
        if target - origin <= 0:
            return 1.0
        return (now - origin + left_at_share) / (target - origin)

    def _ftf_slack(self, target: float, arrival: float, window_end: float) -> float:
        """Time the job may still be short of its target at the window's end with rho held
        to rho_max (measured from `_origin`)."""
        origin = self._origin(arrival)
        return origin + self.options.rho_max * (target - origin) - window_end

    def _priority(self, rho: float, remaining_s: float, round_length: float) -> float:
        """Shockwave's weight of a job's log utility when the FTF constraint is relaxed."""
        options = self.options
        if rho <= options.rho_max:
            return 1.0
        power = options.near_done_power if remaining_s < round_length else options.lambda_
        # rho^power in logs, capped (rho^100 overflows the solver's numeric range)
        return math.exp(min(power * math.log(rho), math.log(options.max_priority)))

    # Planning.

    def _solve(
        self,
        problem: PolicyInput,
        outlook: list[JobOutlook],
        round_length: float,
        spec: SolverSpec,
    ) -> Plan | None:
        options = self.options
        capacity = int(problem.capacity.sum())
        share = uniform_share(float(capacity), len(outlook))
        window_end = problem.now + options.num_rounds * round_length
        jobs = []
        for job, seen in zip(problem.jobs, outlook, strict=True):
            tracked = self.tracked[job.job_id]
            jobs.append(
                PlanJob(
                    job_id=job.job_id,
                    gpus=job.scale_factor,
                    epochs=float(tracked.profile.epochs),
                    epochs_done=float(seen.epochs_done),
                    epoch_s=seen.epoch_s,
                    remaining_s=seen.remaining_s,
                    priority=seen.priority,
                    ftf_slack_s=self._ftf_slack(seen.target_s, job.arrival_time, window_end)
                    * share,
                )
            )
        plan_problem = PlanProblem(
            tuple(jobs),
            options.num_rounds,
            capacity,
            round_length,
            options.k,
            options.bases(),
            options.log_origin,
        )
        plan_spec = replace(
            spec,
            time_limit_s=spec.time_limit_s or options.time_limit_s,
            mip_gap=spec.mip_gap if spec.mip_gap is not None else options.mip_gap,
        )
        self.stats.plans += 1
        try:
            plan = solve_plan(plan_problem, plan_spec, options.ftf_constraint, options.ranking)
        except SolverError:
            self.stats.plans_failed += 1
            return None
        self.stats.plans_with_ftf_constraint += plan.ftf_enforced
        self.stats.rankings_by_greedy += not plan.ranked_by_milp
        return plan

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        options = self.options
        round_length = options.round_length_s or problem.round_length_s or 120.0
        self._track(problem, round_length)
        ids = frozenset(job.job_id for job in problem.jobs)
        periodic = self.rounds_run > 0 and self.rounds_run % options.replan_every_rounds == 0
        replan = (
            self.plan is None
            or ids != self.planned_jobs
            or periodic
            or self.plan_round >= options.num_rounds
        )
        if replan:
            self._recalibrate()
        outlook = self._outlook(problem)
        self.last_outlook = {job.job_id: job for job in outlook}
        objective = None
        if replan:
            self.plan = self._solve(problem, outlook, round_length, solver)
            self.planned_jobs = ids
            self.plan_round = 0
            objective = self.plan.objective if self.plan is not None else None
        planned: list[int] = []
        if self.plan is not None:
            column = self.plan.rounds[:, self.plan_round]
            planned = [
                job_id
                for job_id, runs in zip(self.plan.job_ids, column, strict=True)
                if runs > 0.5 and job_id in ids
            ]
        self.plan_round += 1
        self.rounds_run += 1
        # Idle GPUs go to the other jobs, longest predicted remaining run time first.
        chosen = set(planned)
        fill = sorted(
            (job for job in outlook if job.job_id not in chosen),
            key=lambda job: (-job.remaining_s, job.job_id),
        )
        order = (*planned, *(job.job_id for job in fill))
        return self._allocation(problem, order, objective)

    @staticmethod
    def _allocation(
        problem: PolicyInput, order: tuple[int, ...], objective: float | None
    ) -> Allocation:
        """The round's order, and a time fraction of 1 for the jobs it fits (gangs whole),
        each on its fastest worker type with room left."""
        keys = tuple(job.job_id for job in problem.jobs)
        row_of = {key: row for row, key in enumerate(keys)}
        gpus = {job.job_id: job.scale_factor for job in problem.jobs}
        left = problem.capacity.astype(int)
        fractions = np.zeros((len(keys), len(problem.worker_types)))
        for job_id in order:
            row = row_of[job_id]
            rates = problem.throughputs[row]
            for column in np.argsort(-rates, kind="stable"):
                if rates[column] > 0 and gpus[job_id] <= left[column]:
                    left[column] -= gpus[job_id]
                    fractions[row, column] = 1.0
                    break
        return Allocation(keys, problem.worker_types, fractions, objective, order)


def _epochs_done(job: PolicyJob) -> float:
    """Epochs done, fractional: steps done over steps per epoch at the current batch size."""
    return job.steps_done / epoch_steps(job)


@hookimpl
def register_policies(register: Register) -> None:
    register(Shockwave())
