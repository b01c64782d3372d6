"""The `themis` policy: finish-time fairness through leases and partial-allocation auctions.

Each call (every round) the arbiter takes back expired leases and those of jobs that left,
offers the freed whole GPUs to the ceil((1 - f) n) jobs with the worst finish-time fairness
rho, runs a partial-allocation auction among those that hold no lease (`auction.py`), leases
each winner the fraction of its bundle it keeps, and leases what is left (withheld shares,
unsold GPUs, GPU remainders) to waiting jobs, worst rho first, so no GPU idles while a job
that can use it waits. The allocation is the lease book: x[j, w] = j's leased fraction of w.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shock.api import (
    Allocation,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    by_job,
    fair_share_runtime,
    finish_time_ratio,
    hookimpl,
    job_keyed,
    typed_options,
)
from shock.plugins.policies.themis.auction import AuctionResult, Bid, exact_spec, run_auction
from shock.plugins.policies.themis.leases import SHARE_EPS, Lease, LeaseBook
from shock.plugins.policies.themis.options import ThemisOptions

# A leftover share smaller than this is not worth a lease (rounding of hidden payments).
MIN_LEFTOVER_SHARE = 1e-6


@dataclass(frozen=True, slots=True)
class AuctionRecord:
    now: float
    offered_gpus: int
    bidders: int
    winners: int
    solves: int  # n + 1: the full problem and one per winner
    solve_seconds: float


@dataclass
class AuctionLog:
    """Where a run's auctions are recorded (benchmarks read their solve times from it)."""

    records: list[AuctionRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class JobView:
    """What the arbiter knows of one job this call."""

    elapsed_s: float  # since arrival
    remaining_steps: float
    alone_s: float  # T_alone: whole job alone on its fastest type
    best_rate: float  # its steps/s on its fastest type
    contention: float  # N_avg over its life so far

    def rho(self, rate: float, total_gpus: int, wait_s: float = 0.0) -> float:
        """Its rho if it runs at `rate` steps/s from now (after `wait_s`) until it ends."""
        if rate <= 0:
            return math.inf
        finish = self.elapsed_s + wait_s + self.remaining_steps / rate
        return float(finish_time_ratio(finish, self.alone_s, self.contention, total_gpus))

    def rho_waiting(self, lease_s: float, total_gpus: int) -> float:
        """Its rho if it wins nothing now: it waits a lease, then runs at a 1/N_avg share."""
        fair_rest = fair_share_runtime(
            self.remaining_steps / self.best_rate, self.contention, total_gpus
        )
        finish = self.elapsed_s + lease_s + float(fair_rest)
        return float(finish_time_ratio(finish, self.alone_s, self.contention, total_gpus))


class Themis(Policy):
    name = "themis"
    description = (
        "Themis: GPUs leased to the jobs with the worst finish-time fairness by "
        "partial-allocation auctions (proportional fair, strategy-proof), leftovers to waiting jobs"
    )
    problem_class = ProblemClass.MILP
    # The arbiter looks at its leases every round; it only auctions GPUs that came free.
    reallocate_every_round = True
    # Leases are cluster-wide: the arbiter must see every GPU.
    partitionable = False

    def __init__(self, options: ThemisOptions | None = None, log: AuctionLog | None = None):
        self.options = options or ThemisOptions()
        self.log = log
        self.leases = LeaseBook()
        # Integral over time of the number of jobs in the system, per job since its arrival.
        self.contention_integral: dict[int, float] = {}
        self.last_now: float | None = None
        self.last_count = 0

    def for_run(self, seed: int) -> Themis:
        return Themis(self.options, self.log)

    def with_options(self, values: Mapping[str, str]) -> Themis:
        return Themis(typed_options(self.options, values, self.name), self.log)

    def snapshot(self) -> dict[str, Any]:
        return {
            "leases": self.leases.to_json(),
            "contention": by_job(self.contention_integral),
            "last_now": self.last_now,
            "last_count": self.last_count,
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.leases = LeaseBook.from_json(snapshot["leases"])
        self.contention_integral = job_keyed(snapshot["contention"], float)
        last_now = snapshot["last_now"]
        self.last_now = None if last_now is None else float(last_now)
        self.last_count = int(snapshot["last_count"])

    # The arbiter.

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        job_ids = tuple(j.job_id for j in problem.jobs)
        self.leases.release(problem.now, job_ids)
        views = self._observe(problem)
        total_gpus = round(float(problem.capacity.sum()))
        now_rho = self._current_rhos(problem, views, total_gpus)
        free = problem.capacity - self.leases.held_gpus(problem.worker_types)
        offered = np.floor(free + 1e-9).clip(min=0)
        result = AuctionResult()
        if offered.sum() >= 1:
            bids = self._bids(problem, views, now_rho, offered, total_gpus)
            if bids:
                spec = exact_spec(
                    solver, self.options.mip_gap, self.options.time_limit_s or None
                )
                result = run_auction(bids, offered, spec)
                if self.log is not None:
                    self.log.records.append(
                        AuctionRecord(
                            problem.now, int(offered.sum()), len(bids), len(result.bundles),
                            result.solves, result.solve_seconds,
                        )
                    )  # fmt: skip
                self._lease_winners(problem, result)
        self._lease_leftovers(problem, now_rho, set(result.bundles))
        fractions = self.leases.fractions(job_ids, problem.worker_types)
        return Allocation(job_ids, problem.worker_types, fractions, objective=result.welfare_gain)

    def offered_jobs(self, rhos: Mapping[int, float]) -> list[int]:
        """The ceil((1 - f) n) jobs with the worst rho (at least one), worst first; ties by id."""
        ranked = sorted(rhos, key=lambda j: (-rhos[j], j))
        count = max(1, math.ceil((1.0 - self.options.fairness_knob) * len(ranked) - 1e-9))
        return ranked[:count]

    def _observe(self, problem: PolicyInput) -> dict[int, JobView]:
        """Update each job's contention integral and return what the arbiter knows of it."""
        now, count = problem.now, len(problem.jobs)
        integral = self.contention_integral
        step = 0.0 if self.last_now is None else max(0.0, now - self.last_now)
        live: dict[int, float] = {}
        for job in problem.jobs:
            if job.job_id in integral:
                live[job.job_id] = integral[job.job_id] + self.last_count * step
            else:  # new: the jobs in the system now stand for its time since arrival
                live[job.job_id] = count * max(0.0, now - job.arrival_time)
        self.contention_integral = live
        self.last_now, self.last_count = now, count
        runnable = problem.throughputs * (problem.capacity > 0)
        views: dict[int, JobView] = {}
        for row, job in enumerate(problem.jobs):
            best = float(runnable[row].max()) if runnable.shape[1] else 0.0
            if best <= 0:
                continue  # it runs nowhere here: no rho, no lease
            elapsed = max(0.0, now - job.arrival_time)
            views[job.job_id] = JobView(
                elapsed_s=elapsed,
                remaining_steps=max(0.0, job.total_steps - job.steps_done),
                alone_s=job.total_steps / best,
                best_rate=best,
                contention=live[job.job_id] / elapsed if elapsed > 0 else float(count),
            )
        return views

    def _current_rhos(
        self, problem: PolicyInput, views: Mapping[int, JobView], total_gpus: int
    ) -> dict[int, float]:
        """Each job's rho if what it holds now (its leases) carried it to the end; a job that
        holds nothing is projected to wait a lease and then get a fair share."""
        held = self.leases.fractions(tuple(j.job_id for j in problem.jobs), problem.worker_types)
        rates = (held * problem.throughputs).sum(axis=1)
        rhos: dict[int, float] = {}
        for row, job in enumerate(problem.jobs):
            view = views.get(job.job_id)
            if view is None:
                continue
            if rates[row] > 0:
                rhos[job.job_id] = view.rho(float(rates[row]), total_gpus)
            else:
                rhos[job.job_id] = view.rho_waiting(self.options.lease_s, total_gpus)
        return rhos

    def _bids(
        self,
        problem: PolicyInput,
        views: Mapping[int, JobView],
        now_rho: Mapping[int, float],
        offered: np.ndarray,
        total_gpus: int,
    ) -> list[Bid]:
        """The bids of the offered jobs that hold no lease: rho with a gang of each type that
        has enough offered GPUs, and rho if they win nothing."""
        holders = self.leases.holders()
        rows = {j.job_id: r for r, j in enumerate(problem.jobs)}
        bids = []
        for job_id in self.offered_jobs(now_rho):
            if job_id in holders:
                continue
            job, view = problem.jobs[rows[job_id]], views[job_id]
            if view.remaining_steps <= 0:
                continue
            rho_with = {
                w: view.rho(float(problem.throughputs[rows[job_id], w]), total_gpus)
                for w in range(len(problem.worker_types))
                if problem.throughputs[rows[job_id], w] > 0 and job.scale_factor <= offered[w]
            }
            if rho_with:
                bids.append(
                    Bid(job_id, job.scale_factor, now_rho[job_id], rho_with)
                )
        return bids

    def _lease_winners(self, problem: PolicyInput, result: AuctionResult) -> None:
        scale = {j.job_id: j.scale_factor for j in problem.jobs}
        expires = problem.now + self.options.lease_s
        for job_id, column in result.bundles.items():
            kept = result.kept[job_id]
            self.leases.grant(
                Lease(
                    job_id, problem.worker_types[column], kept, kept * scale[job_id],
                    problem.now, expires, "auction",
                )
            )  # fmt: skip

    def _lease_leftovers(
        self, problem: PolicyInput, now_rho: Mapping[int, float], winners: set[int]
    ) -> None:
        """Lease every free GPU share to jobs that can use it: jobs holding nothing first,
        worst rho first, then jobs with part of a gang's time; this auction's winners last
        (their withheld share goes back to them only if no other job can use it)."""
        pool = problem.capacity - self.leases.held_gpus(problem.worker_types)
        if pool.max(initial=0.0) <= SHARE_EPS:
            return
        job_ids = tuple(j.job_id for j in problem.jobs)
        rows = self.leases.fractions(job_ids, problem.worker_types).sum(axis=1)
        holders = self.leases.holders()

        def order(row: int) -> tuple[int, int, float, int]:
            job_id = job_ids[row]
            return (job_id in winners, job_id in holders, -now_rho[job_id], job_id)

        candidates = sorted((r for r in range(len(job_ids)) if job_ids[r] in now_rho), key=order)
        expires = problem.now + self.options.lease_s
        for row in candidates:
            job = problem.jobs[row]
            if job.total_steps - job.steps_done <= 0:
                continue
            for column in np.argsort(-problem.throughputs[row], kind="stable"):
                room = 1.0 - rows[row]
                if room <= MIN_LEFTOVER_SHARE:
                    break
                if problem.throughputs[row, column] <= 0:
                    continue
                if job.scale_factor > problem.capacity[column]:
                    continue
                share = min(room, pool[column] / job.scale_factor)
                if share <= MIN_LEFTOVER_SHARE:
                    continue
                self.leases.grant(
                    Lease(
                        job.job_id, problem.worker_types[column], share,
                        share * job.scale_factor, problem.now, expires, "leftover",
                    )
                )  # fmt: skip
                pool[column] -= share * job.scale_factor
                rows[row] += share
            if pool.max(initial=0.0) <= SHARE_EPS:
                return


@hookimpl
def register_policies(register: Register) -> None:
    register(Themis())
