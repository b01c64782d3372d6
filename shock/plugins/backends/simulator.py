"""The discrete-event simulator backend.

Time moves from round boundary to round boundary: a round ends when its last scheduled job
ends its share of the round (at most one round length), or, when nothing runs, the clock
jumps to the next arrival. Jobs are admitted at round boundaries and measured from their
arrival time; a job's completion is its own exact finish time inside the round.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from shock.core.dynamics import batch_schedules, follow_schedule, whole_epochs_alone_s
from shock.core.errors import ShockError
from shock.core.events import (
    AllocationComputed,
    JobArrived,
    JobFinished,
    RoundEnded,
    RoundStarted,
    RunFinished,
    RunStarted,
)
from shock.core.hookspecs import Register, hookimpl
from shock.core.mechanism import Assignment, Mechanism, UnitKey
from shock.core.metrics import JobRecord, RunCounters, compute_metrics
from shock.core.results import RunResult
from shock.core.run import RunConfig, RunRequest
from shock.plugins.adaptation.artifact_simulator import ArtifactBatchDynamics


class _Hooks:
    """Observer hooks, called only when some plugin implements them (the loop is hot)."""

    def __init__(self, hook: Any) -> None:
        def active(name: str) -> Any:
            caller = getattr(hook, name)
            return caller if caller.get_hookimpls() else None

        self.run_started = active("run_started")
        self.job_arrived = active("job_arrived")
        self.allocation_computed = active("allocation_computed")
        self.round_started = active("round_started")
        self.round_ended = active("round_ended")
        self.job_finished = active("job_finished")
        self.run_finished = active("run_finished")


class Simulator:
    name = "simulator"
    description = "fast discrete-event simulator of the round-based mechanism"

    def run(self, request: RunRequest) -> RunResult:
        started = time.perf_counter()
        config = request.config
        round_length = config.mechanism.round_length_s
        policy = request.policy.for_run(config.seed)
        mechanism = Mechanism(
            request.cluster,
            policy,
            request.solver,
            request.placement,
            request.table,
            config.mechanism,
            prices=config.prices,
            entity_weights=config.entity_weights,
        )
        jobs = sorted(request.trace.jobs, key=lambda j: (j.arrival_time, j.job_id))
        for job in jobs:
            mechanism.check_job(job, request.trace.source)
        # Jobs whose batch size changes (Accordion, GNS); empty for a static trace.
        schedules = batch_schedules(
            jobs, request.registry, request.table, mechanism.worker_types, request.trace.source
        )
        # Shockwave's T_alone for rho (--preset shockwave), where the job's epochs are known.
        whole_epochs_alone: dict[int, float | None] = {}
        if config.rho_alone == "whole_epochs":
            whole_epochs_alone = {
                job.job_id: whole_epochs_alone_s(
                    job,
                    request.registry,
                    request.table,
                    mechanism.worker_types,
                    request.trace.source,
                )
                for job in jobs
            }
        # Shockwave's simulator's dynamics in place of the schedules (--adaptation-rules).
        artifact_rules: ArtifactBatchDynamics | None = None
        if config.adaptation_rules == "artifact-simulator":
            worker_types = mechanism.worker_types

            def has_throughput(job_type: str, scale_factor: int) -> bool:
                return any(
                    request.table.throughput(job_type, scale_factor, w) > 0 for w in worker_types
                )

            artifact_rules = ArtifactBatchDynamics(jobs, request.registry, has_throughput)
        waiting_for = {
            j.job_id
            for j in jobs
            if config.window is None or config.window[0] <= j.job_id < config.window[1]
        }
        if config.window is not None and not waiting_for:
            raise ShockError(
                f"window {config.window[0]}:{config.window[1]} holds no job of the trace"
            )
        hooks = _Hooks(request.registry.hook)
        if hooks.run_started:
            hooks.run_started(event=RunStarted(policy.name, self.name, len(waiting_for)))

        records: list[JobRecord] = []
        isolated_runtime: dict[int, float] = {}
        # (unit, steps of each member, finish time of each member, the unit's finish)
        running: list[tuple[Assignment, tuple[float, ...], tuple[float, ...], float]] = []
        next_arrival = 0
        now = jobs[0].arrival_time if jobs else 0.0
        round_start = now
        busy_gpu_seconds = 0.0
        rounds = 0
        idle_rounds = 0
        allocations_seen = 0
        overhead = default = config.preemption_overhead_s
        missed_round_rule = config.overhead_rule == "missed_round"
        by_type = config.overhead_by_job_type
        quantised = config.quantised_rounds

        while waiting_for:
            if running:
                now = max(entry[3] for entry in running)
            elif next_arrival < len(jobs):
                now = max(now, jobs[next_arrival].arrival_time)
            else:
                # No arrivals left and nothing ran: let the next round recompute at once.
                mechanism.last_reset_s = 0.0
                idle_rounds += 1
                if idle_rounds > 2:
                    stuck = ", ".join(str(j) for j in sorted(mechanism.active)[:10])
                    raise ShockError(
                        f"{policy.name} schedules none of the remaining jobs ({stuck})"
                    )

            for assignment, steps_done, finishes, unit_finish in running:
                exec_s = unit_finish - round_start
                busy_gpu_seconds += exec_s * len(assignment.gpus)
                for job_state in mechanism.credit(assignment, steps_done, exec_s):
                    job = job_state.spec
                    # A member of a pair completes at its own finish, not the pair's.
                    finish = finishes[assignment.unit.members.index(job_state)]
                    records.append(
                        JobRecord(
                            job.job_id,
                            job.arrival_time,
                            finish,
                            isolated_runtime.pop(job.job_id),
                            job.scale_factor,
                        )
                    )
                    waiting_for.discard(job.job_id)
                    if hooks.job_finished:
                        hooks.job_finished(
                            event=JobFinished(finish, job.job_id, finish - job.arrival_time)
                        )
                if artifact_rules is not None:
                    for member in assignment.unit.members:
                        if member.job_id in mechanism.active:
                            artifact_rules.apply_pending(mechanism, member)
                elif schedules:
                    for member in assignment.unit.members:
                        schedule = schedules.get(member.job_id)
                        if schedule is not None and member.job_id in mechanism.active:
                            follow_schedule(mechanism, member, schedule)
            if artifact_rules is not None:
                artifact_rules.decide(mechanism.active.values())
            if running and hooks.round_ended:
                hooks.round_ended(
                    event=RoundEnded(now, rounds, len(mechanism.active), len(records))
                )
            running = []
            round_start = now
            if not waiting_for:
                break

            while next_arrival < len(jobs) and jobs[next_arrival].arrival_time <= now:
                job = jobs[next_arrival]
                state = mechanism.admit(job)
                schedule = schedules.get(job.job_id)
                alone = whole_epochs_alone.get(job.job_id)
                if alone is None:
                    alone = (
                        schedule.isolated_runtime_s
                        if schedule is not None
                        else job.total_steps / max(state.rates)
                    )
                isolated_runtime[job.job_id] = alone
                next_arrival += 1
                if hooks.job_arrived:
                    hooks.job_arrived(
                        event=JobArrived(now, job.job_id, job.job_type, job.scale_factor)
                    )

            ran_last_round = set(mechanism.previous_round) if missed_round_rule else None
            assignments = mechanism.plan_round(now)
            if hooks.allocation_computed and mechanism.stats.allocations != allocations_seen:
                hooks.allocation_computed(
                    event=AllocationComputed(
                        now, policy.name, len(mechanism.active), mechanism.stats.solver_seconds
                    )
                )
            allocations_seen = mechanism.stats.allocations
            if not assignments:
                continue
            idle_rounds = 0
            for assignment in assignments:
                members = assignment.unit.members
                lost = 0.0
                if by_type is not None:
                    overhead = max(by_type.get(m.spec.job_type, default) for m in members)
                if overhead > 0 and _charged(
                    assignment, config, ran_last_round, rounds == 0, round_length
                ):
                    lost = min(overhead, round_length)
                if len(members) == 1:  # the common case, kept lean
                    state, rate = members[0], assignment.rates[0]
                    left = state.total_steps - state.steps_done
                    count = min(max(int(rate * (round_length - lost)), 1), left)
                    finish = now + round_length if quantised else now + lost + count / rate
                    running.append((assignment, (count,), (finish,), finish))
                    continue
                counts: list[float] = []
                finishes_of: list[float] = []
                for state, member_rate in zip(members, assignment.rates, strict=True):
                    left = state.total_steps - state.steps_done
                    count = min(max(int(member_rate * (round_length - lost)), 1), left)
                    counts.append(count)
                    finishes_of.append(
                        now + round_length if quantised else now + lost + count / member_rate
                    )
                running.append((assignment, tuple(counts), tuple(finishes_of), max(finishes_of)))
            rounds += 1
            if hooks.round_started:
                hooks.round_started(
                    event=RoundStarted(
                        now,
                        rounds,
                        tuple((a.unit.member_ids, a.worker_type, a.gpus) for a in assignments),
                    )
                )

        wall_s = time.perf_counter() - started
        if hooks.run_finished:
            hooks.run_finished(event=RunFinished(now, len(records)))
        records.sort(key=lambda r: r.job_id)
        stats = mechanism.stats
        counters = RunCounters(
            busy_gpu_seconds=busy_gpu_seconds,
            preemptions=stats.preemptions,
            lease_extensions=stats.lease_extensions,
            placements=stats.lease_opportunities,
            rounds=rounds,
            allocations=stats.allocations,
            solver_seconds=stats.solver_seconds,
        )
        unfinished = [
            (j.arrival_time, now) for j in jobs[:next_arrival] if j.job_id in mechanism.active
        ]
        metrics, rhos = compute_metrics(
            records,
            request.cluster.total_gpus,
            counters,
            wall_s,
            config.window,
            unfinished,
            trace_jobs=len(jobs) if config.rho_contention == "trace" else None,
        )
        return RunResult(
            policy=policy.name,
            backend=self.name,
            solver=request.solver.name,
            trace=request.trace.source,
            cluster=request.cluster.describe(),
            preset=config.preset,
            metrics=metrics,
            records=tuple(records),
            rhos=rhos,
            unfinished_jobs=len(jobs) - len(records),
            placement=request.placement.name,
            adaptation_rules=config.adaptation_rules,
        )


@hookimpl
def register_backends(register: Register) -> None:
    register(Simulator())


# Shockwave's simulator spares a job whose round, uncharged, would end this much early: its
# last, short round.
_SHORT_ROUND_GRACE_S = 5.0


def _charged(
    assignment: Assignment,
    config: RunConfig,
    ran_last_round: Collection[UnitKey] | None,
    first_round: bool,
    round_length: float,
) -> bool:
    """Whether the unit loses the (re)start overhead this round."""
    members = assignment.unit.members
    if ran_last_round is not None:
        # Shockwave's rule: a job that did not run in the previous round pays, except in the
        # run's first round and in a round it needs less than all of.
        needed = max(
            (m.total_steps - m.steps_done) / rate
            for m, rate in zip(members, assignment.rates, strict=True)
        )
        return (
            not first_round
            and assignment.unit.key not in ran_last_round
            and needed > round_length - _SHORT_ROUND_GRACE_S
        )
    # Resuming from a checkpoint on other GPUs than last round costs the overhead.
    return not assignment.kept_gpus and (
        config.overhead_on_first_start or any(m.steps_done > 0 for m in members)
    )
