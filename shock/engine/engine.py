"""The engine: the one scheduling loop every backend drives.

Round after round: admit the jobs that arrived, let the mechanism re-allocate when due and
plan the round, charge (re)start overheads, hand the plan to the executor, then credit what
the executor reports, apply batch-size dynamics and fire the observer events. The engine owns
all state (jobs, progress, mechanism counters, policy state, records) and knows no backend:
the simulator and the real clusters differ only in their executor.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from shock.core.adaptation import BatchSizeRules
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
from shock.core.executor import (
    BatchSizeOrder,
    ColumnarExecutor,
    ColumnProgress,
    Executor,
    Intake,
    MeasuredPairRate,
    MeasuredRate,
    OpenExecutor,
    PlannedUnit,
    RoundColumns,
    RoundPlan,
    RoundReport,
)
from shock.core.model import Cluster, JobSpec, model_family_of
from shock.core.policy import UnitKey
from shock.core.results import JobRecord, RunCounters, RunResult
from shock.core.run import RunConfig, RunRequest
from shock.core.throughputs import JobKey
from shock.engine.dynamics import BatchSchedule, batch_schedules, whole_epochs_alone_s
from shock.engine.engine_state import EngineCounters, RestoredRun, restore, snapshot
from shock.engine.epochs import steps_per_epoch
from shock.engine.measured_throughputs import ThroughputEstimates
from shock.engine.mechanism import Mechanism
from shock.engine.metrics import compute_metrics
from shock.engine.throughput_estimator import UnknownTypeRates
from shock.engine.timeline_recorder import TimelineRecorder
from shock.engine.units import (
    ASSIGNED_COLUMN,
    ASSIGNED_GPUS,
    ASSIGNED_GRANT,
    ASSIGNED_RATES,
    ASSIGNED_UNIT,
    Assignment,
    JobState,
    MechanismStats,
)

_log = logging.getLogger(__name__)

# Shockwave's simulator spares a job whose round, uncharged, would end this much early: its
# last, short round.
_SHORT_ROUND_GRACE_S = 5.0
# A measured rate this far from the one the policy last saw asks for a new allocation.
_RATE_CHANGE_REALLOCATES = 0.2
# Rounds in a row with nothing to run and nothing left to arrive before the run gives up:
# the first re-plan at once; the later ones a round later, since a policy may weigh time
# itself (Pollux discounts any allocation of a job that has just arrived to nothing).
_IDLE_ROUNDS_ALLOWED = 2
_IDLE_ROUNDS_WAITED = 3
# Objects allocated between young garbage collections while the loop runs (Python's default
# is 700). A round of a large cluster makes tens of thousands of short-lived objects; with the
# default, every round's plan survives two collections, is promoted to the oldest generation
# and soon triggers a full collection of the whole heap, which then takes over half the run.
# With this many, a round's objects are gone before a collection sees them.
_YOUNG_COLLECTION_THRESHOLD = 100_000
# Builds a named tuple without its Python-level __new__: plans are made for every unit of
# every round, and this is a third of the cost.
_new_tuple = tuple.__new__
_FIRST_RATE = itemgetter(0)
_SLOT = attrgetter("slot")


@dataclass(frozen=True, slots=True)
class _ColumnRound:
    """What the engine keeps of a round it planned as columns, to credit it."""

    jobs: list[JobState]
    slots: np.ndarray  # each job's row of the mechanism's counters
    columns: np.ndarray  # its worker type's column
    gpus: np.ndarray  # its gang's size


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


class Engine:
    def __init__(self, request: RunRequest, executor: Executor, backend_name: str) -> None:
        self.request = request
        self.executor = executor
        self.backend_name = backend_name
        self.config: RunConfig = request.config
        self.capabilities = executor.capabilities
        self.policy = request.policy.for_run(self.config.seed)
        self.jobs: tuple[JobSpec, ...] = tuple(
            sorted(request.trace.jobs, key=lambda j: (j.arrival_time, j.job_id))
        )
        self.hooks = _Hooks(request.registry.hook)
        # Rates a measuring executor reported (smoothed already, so each replaces the last);
        # they replace the table's, which is a prior.
        self.rates = ThroughputEstimates(prior=request.table, smoothing=1.0)
        if self.capabilities.measures_rates:
            # Job types the table lacks start from Gavel's estimator, not a flat default.
            self.rates.fallback = UnknownTypeRates(request.table, request.cluster.worker_types)
        # Co-located rates a measuring executor reported: (first, second, worker type) ->
        # (first's, second's) steps/s; they replace the table's pairs likewise.
        self.pair_rates: dict[tuple[JobKey, JobKey, str], tuple[float, float]] = {}
        self.mechanism: Mechanism | None = None
        self.stats_base = MechanismStats()  # counters of mechanisms replaced by a resize
        self.records: list[JobRecord] = []
        self.isolated_runtime: dict[int, float] = {}
        self.next_arrival = 0
        self.rounds = 0
        self.busy_gpu_seconds = 0.0
        self.waiting_for: set[int] = set()
        self.schedules: dict[int, BatchSchedule] = {}
        self.whole_epochs_alone: dict[int, float | None] = {}
        self.rules: BatchSizeRules | None = None
        self._by_id = {job.job_id: job for job in self.jobs}
        self.now = 0.0  # the engine's time as of its last decision
        # An open executor (a service): jobs arrive and are cancelled while it runs, and the
        # run ends when the executor says so, not when the last job finished.
        self.open: OpenExecutor | None = (
            executor if self.capabilities.accepts_submissions else None  # type: ignore[assignment]
        )
        self.cancelled: set[int] = set()
        self.timeline: TimelineRecorder | None = None  # set once the cluster is known
        # An executor that takes rounds as columns gets those it can (see _plans_columns).
        self.columnar: ColumnarExecutor | None = None
        nothing = np.zeros(0, np.intp)
        self._column_round = _ColumnRound([], nothing, nothing, nothing)  # the last one planned
        if self.capabilities.columnar_rounds:
            if not isinstance(executor, ColumnarExecutor):
                raise ShockError(
                    f"backend '{backend_name}' declares columnar rounds but its executor has "
                    "no run_round_columns"
                )
            self.columnar = executor

    # Set-up.

    def _build_mechanism(self, cluster: Cluster) -> Mechanism:
        table = self.request.table
        if self.capabilities.measures_rates:
            # The mechanism's own table: measurements are written into it.
            keys = {(j.job_type, j.scale_factor) for j in self.jobs}
            keys |= {(job_type, scale) for job_type, scale, _ in self.rates.measured}
            table = self.rates.table(sorted(keys), cluster.worker_types)
            if self.capabilities.measures_pair_rates:
                table.pairs = {key: dict(rates) for key, rates in self.request.table.pairs.items()}
                for (first, second, worker_type), rates in self.pair_rates.items():
                    table.pairs.setdefault((first, second), {})[worker_type] = rates
        prices = self.config.prices
        if prices is not None and any(w not in prices for w in cluster.worker_types):
            prices = None
        mechanism = Mechanism(
            cluster,
            self.policy,
            self.request.solver,
            self.request.placement,
            table,
            self.config.mechanism,
            prices=prices,
            entity_weights=self.config.entity_weights,
        )
        mechanism.elastic.restart_s = self.config.preemption_overhead_s
        return mechanism

    def _prepare(self, cluster: Cluster) -> Mechanism:
        mechanism = self._build_mechanism(cluster)
        self.mechanism = mechanism
        self.timeline = TimelineRecorder(cluster)
        registry = self.request.registry
        self._prepare_jobs(mechanism, self.jobs)
        if self.capabilities.simulates_jobs:
            rules = registry.get("adaptation rules", self.config.adaptation_rules)
            self.rules = rules.for_run(
                self.jobs, self.schedules, registry, mechanism.table, mechanism.worker_types
            )
        window = self.config.window
        self.waiting_for = {
            j.job_id for j in self.jobs if window is None or window[0] <= j.job_id < window[1]
        }
        if window is not None and not self.waiting_for:
            raise ShockError(f"window {window[0]}:{window[1]} holds no job of the trace")
        return mechanism

    def _prepare_jobs(self, mechanism: Mechanism, jobs: tuple[JobSpec, ...]) -> None:
        """Check jobs against the cluster and work out their batch-size schedules and T_alone."""
        source = self.request.trace.source
        registry = self.request.registry
        table = mechanism.table
        worker_types = mechanism.worker_types
        for job in jobs:
            mechanism.check_job(job, source)
        # Jobs whose batch size changes (Accordion, GNS); empty for a static trace.
        self.schedules.update(batch_schedules(jobs, registry, table, worker_types, source))
        if self.config.rho_alone == "whole_epochs":
            # Shockwave's T_alone for rho, where the job's epochs are known (a dynamic job's
            # pattern as its schedule drew it).
            for job in jobs:
                schedule = self.schedules.get(job.job_id)
                pattern = None if schedule is None else schedule.batch_sizes
                self.whole_epochs_alone[job.job_id] = whole_epochs_alone_s(
                    job, registry, table, worker_types, source, pattern
                )

    # The loop.

    def run(self) -> RunResult:
        started = time.perf_counter()
        executor = self.executor
        try:
            mechanism = self._prepare(executor.start(self.request, self.jobs))
            if self.capabilities.durable:
                saved = executor.load_state()
                if saved is not None:
                    mechanism = self._restore(mechanism, saved)
            if self.hooks.run_started:
                self.hooks.run_started(
                    event=RunStarted(
                        self.policy.name,
                        self.backend_name,
                        len(self.waiting_for),
                        self.config.window,
                    )
                )
            with _fewer_young_collections():
                now = self._loop(executor.clock())
        finally:
            executor.stop()
        wall_s = time.perf_counter() - started
        if self.hooks.run_finished:
            self.hooks.run_finished(event=RunFinished(now, len(self.records)))
        return self._result(self.mechanism or mechanism, now, wall_s)

    def _loop(self, now: float) -> float:
        executor = self.executor
        hooks = self.hooks
        timeline = self.timeline
        assert timeline is not None
        plan: RoundPlan | RoundColumns | None = None
        planned: list[Assignment] = []
        idle_rounds = 0
        allocations_seen = 0
        round_length = self.config.mechanism.round_length_s
        # A resumed run with jobs admitted plans its next round at once, as the uninterrupted
        # run would have, instead of first idling until the next arrival.
        plan_at_once = self.mechanism is not None and bool(self.mechanism.active)
        while self.waiting_for or self.open is not None:
            mechanism = self.mechanism
            assert mechanism is not None
            if plan_at_once:
                plan_at_once = False
            elif plan is not None:
                if isinstance(plan, RoundColumns):
                    assert self.columnar is not None
                    progress = self.columnar.run_round_columns(plan)
                    now = progress.end_s
                    self._apply_columns(progress, plan)
                else:
                    report = executor.run_round(plan)
                    now = report.end_s
                    self._apply(report, planned, plan)
                self.now = now
                self._save()
                if hooks.round_ended:
                    hooks.round_ended(
                        event=RoundEnded(now, self.rounds, len(mechanism.active), len(self.records))
                    )
                plan = None
                if not self.waiting_for and self.open is None:
                    break
            elif self.next_arrival < len(self.jobs):
                executor.idle_until(self.jobs[self.next_arrival].arrival_time)
                now = max(now, executor.clock())
            elif not self.capabilities.simulates_jobs or (
                self.open is not None and not mechanism.active
            ):
                # A real cluster can still change (workers join, jobs' runs end), an open one
                # gets jobs submitted: wait a round for it, re-planning from scratch, however
                # long (a run timeout, or the service stopping, ends it).
                if not idle_rounds and mechanism.active:
                    _log.warning(
                        "%s schedules none of the %d remaining jobs on this cluster: waiting",
                        self.policy.name, len(mechanism.active),
                    )  # fmt: skip
                idle_rounds += 1
                mechanism.last_reset_s = 0.0
                executor.idle_until(now + round_length)
                now = executor.clock()
            else:
                # No arrivals left and nothing ran: let the next round recompute, at once at
                # first, then a round later.
                mechanism.last_reset_s = 0.0
                idle_rounds += 1
                if idle_rounds > _IDLE_ROUNDS_ALLOWED + _IDLE_ROUNDS_WAITED:
                    stuck = ", ".join(str(j) for j in sorted(mechanism.active)[:10])
                    raise ShockError(
                        f"{self.policy.name} schedules none of the remaining jobs ({stuck})"
                    )
                if idle_rounds > _IDLE_ROUNDS_ALLOWED:
                    executor.idle_until(now + round_length)
                    now = max(now, executor.clock())

            if self.open is not None:
                intake = self.open.intake()
                if intake is None:
                    break  # the service stops
                if intake.arrived or intake.cancelled:
                    self._take_intake(mechanism, intake)
            changed = executor.cluster_changed()
            if changed is not None:
                mechanism = self._resize(changed)
            self._admit_arrived(mechanism, now)

            ran_last_round = (
                set(mechanism.previous_round)
                if self.config.overhead_rule == "missed_round"
                else None
            )
            assignments = mechanism.plan_round(now)
            # Counted over the run: a resize starts a mechanism with counters at zero.
            allocations = self.stats_base.allocations + mechanism.stats.allocations
            if hooks.allocation_computed and allocations != allocations_seen:
                solve_s = self.stats_base.solver_seconds + mechanism.stats.solver_seconds
                hooks.allocation_computed(
                    event=AllocationComputed(now, self.policy.name, len(mechanism.active), solve_s)
                )
            allocations_seen = allocations
            if not assignments:
                continue
            idle_rounds = 0
            self.rounds += 1
            planned = assignments
            timeline.round_planned(
                now,
                len(mechanism.active),
                self.stats_base.solver_seconds + mechanism.stats.solver_seconds,
            )
            if mechanism.allocation.elastic is not None:
                timeline.batch_sizes_used(now, mechanism.elastic.batch_sizes)
            if self._plans_columns(mechanism):
                plan = self._plan_columns(assignments, ran_last_round, now)
            else:
                plan = RoundPlan(
                    self.rounds,
                    now,
                    now + round_length,
                    self._plan_units(assignments, ran_last_round),
                    self._batch_size_orders(mechanism),
                )
            self.now = now
            if hooks.round_started:
                hooks.round_started(
                    event=RoundStarted(
                        now,
                        self.rounds,
                        tuple((a.unit.member_ids, a.worker_type, a.gpus) for a in assignments),
                    )
                )
        return now

    def _take_intake(self, mechanism: Mechanism, intake: Intake) -> None:
        """Submitted jobs join the arrivals (in arrival order, after those admitted);
        cancelled ones leave the mechanism, or the arrivals, without a record."""
        cancelled = set(intake.cancelled)
        known = [
            job
            for job in intake.arrived
            if job.job_id not in self._by_id and job.job_id not in cancelled
        ]
        for job in known:
            self._ensure_rates(mechanism, job.job_type, job.scale_factor)
        self._prepare_jobs(mechanism, tuple(known))
        admitted = self.jobs[: self.next_arrival]
        pending = [j for j in self.jobs[self.next_arrival :] if j.job_id not in cancelled]
        pending.extend(known)
        pending.sort(key=lambda j: (j.arrival_time, j.job_id))
        self.jobs = admitted + tuple(pending)
        for job in known:
            self._by_id[job.job_id] = job
            self.waiting_for.add(job.job_id)
        for job_id in cancelled:
            if job_id in mechanism.active:
                mechanism.withdraw(job_id)
                self.isolated_runtime.pop(job_id, None)
            if job_id in self.waiting_for:
                self.waiting_for.discard(job_id)
                self.cancelled.add(job_id)

    def _admit_arrived(self, mechanism: Mechanism, now: float) -> None:
        jobs = self.jobs
        timeline = self.timeline
        assert timeline is not None
        while self.next_arrival < len(jobs) and jobs[self.next_arrival].arrival_time <= now:
            job = jobs[self.next_arrival]
            state = mechanism.admit(job)
            timeline.job_admitted(job)
            alone = self.whole_epochs_alone.get(job.job_id)
            if alone is None:
                schedule = self.schedules.get(job.job_id)
                alone = (
                    schedule.isolated_runtime_s
                    if schedule is not None
                    else job.total_steps / max(state.rates)
                )
            self.isolated_runtime[job.job_id] = alone
            self.next_arrival += 1
            if self.hooks.job_arrived:
                self.hooks.job_arrived(
                    event=JobArrived(now, job.job_id, job.job_type, job.scale_factor)
                )

    def _plans_columns(self, mechanism: Mechanism) -> bool:
        """Whether this round goes to the executor as columns: it takes them, every unit is
        a job alone, no adaptation rule looks at each job after its run, and the overhead is
        charged as lost time (not as fewer steps)."""
        return (
            self.columnar is not None
            and self.rules is None
            and not mechanism.pairs
            and self.config.overhead_effect != "fewer_steps"
        )

    def _overheads(
        self, assignments: list[Assignment], ran_last_round: Collection[UnitKey] | None
    ) -> list[float] | None:
        """The (re)start time each unit loses this round; None when no unit can lose any. A
        restart longer than a round loses whole rounds until it is over, while the unit keeps
        its GPUs (Shockwave's rule: at most the round)."""
        config = self.config
        default = config.preemption_overhead_s
        by_type = config.overhead_by_job_type
        if default <= 0 and by_type is None:
            return None
        round_length = config.mechanism.round_length_s
        first_round = self.rounds == 1
        assert self.mechanism is not None
        restart_left = self.mechanism.restart_left
        lost = []
        for assignment in assignments:
            overhead = default
            if by_type is not None:
                members = assignment.unit.members
                # A job type's own cost, else its model family's (a preset's per-application
                # costs), else the default.
                overhead = max(
                    by_type.get(
                        m.spec.job_type, by_type.get(model_family_of(m.spec.job_type), default)
                    )
                    for m in members
                )
            charged = overhead > 0 and _charged(
                assignment, config, ran_last_round, first_round, round_length
            )
            if ran_last_round is not None:  # Shockwave's rule: within the round
                lost.append(min(overhead, round_length) if charged else 0.0)
                continue
            # A restart longer than a round goes on into the next rounds while the unit
            # keeps its GPUs (a move starts it afresh).
            key = assignment.unit.key
            if charged:
                left = overhead
            elif assignment.kept_gpus:
                left = restart_left.get(key, 0.0)
            else:
                left = 0.0
            part = min(left, round_length)
            if left > part:
                restart_left[key] = left - part
            elif key in restart_left:
                del restart_left[key]
            lost.append(part)
        return lost

    def _plan_units(
        self, assignments: list[Assignment], ran_last_round: Collection[UnitKey] | None
    ) -> tuple[PlannedUnit, ...]:
        overheads = self._overheads(assignments, ran_last_round)
        units: list[PlannedUnit] = []
        append = units.append
        for position, assignment in enumerate(assignments):
            members = assignment.unit.members
            lost = 0.0 if overheads is None else overheads[position]
            if len(members) == 1:  # the common case, kept lean
                job = members[0]
                append(
                    _new_tuple(
                        PlannedUnit,
                        (
                            (job.job_id,),
                            (job.spec.job_type,),
                            assignment.worker_type,
                            assignment.gpus,
                            assignment.rates,
                            (job.total_steps - job.steps_done,),
                            lost,
                            assignment.kept_gpus,
                            assignment.grant,
                        ),
                    )
                )
                continue
            append(
                PlannedUnit(
                    tuple(m.job_id for m in members),
                    tuple(m.spec.job_type for m in members),
                    assignment.worker_type,
                    assignment.gpus,
                    assignment.rates,
                    tuple(m.total_steps - m.steps_done for m in members),
                    lost,
                    assignment.kept_gpus,
                    assignment.grant,
                )
            )
        return tuple(units)

    def _plan_columns(
        self,
        assignments: list[Assignment],
        ran_last_round: Collection[UnitKey] | None,
        now: float,
    ) -> RoundColumns:
        """The round as columns (every unit a job alone, see `_plans_columns`)."""
        mechanism = self.mechanism
        assert mechanism is not None
        count = len(assignments)
        jobs: list[JobState] = list(map(ASSIGNED_UNIT, assignments))
        slots = np.fromiter(map(_SLOT, jobs), np.intp, count)
        self._column_round = _ColumnRound(
            jobs,
            slots,
            np.fromiter(map(ASSIGNED_COLUMN, assignments), np.intp, count),
            np.fromiter(map(len, map(ASSIGNED_GPUS, assignments)), np.intp, count),
        )
        counters = mechanism.counters
        overheads = self._overheads(assignments, ran_last_round)
        return RoundColumns(
            self.rounds,
            now,
            now + self.config.mechanism.round_length_s,
            counters.job_id[slots],
            np.fromiter(map(_FIRST_RATE, map(ASSIGNED_RATES, assignments)), np.float64, count),
            counters.total_steps[slots] - counters.steps_done[slots],
            np.zeros(count) if overheads is None else np.array(overheads, dtype=np.float64),
            tuple(map(ASSIGNED_GRANT, assignments)) if mechanism.resource_aware else (),
        )

    def _batch_size_orders(self, mechanism: Mechanism) -> tuple[BatchSizeOrder, ...]:
        """For executors whose jobs do not carry their adaptation out themselves: the batch
        size each job's schedule wants at its progress, where it differs from its own."""
        if self.capabilities.simulates_jobs or not self.schedules:
            return ()
        native = self.capabilities.native_adaptations
        orders = []
        for job_id, schedule in self.schedules.items():
            state = mechanism.active.get(job_id)
            if state is None or state.spec.mode in native:
                continue
            current = state.spec.batch_size
            if current is None:
                continue
            epochs_done = state.steps_done / steps_per_epoch(schedule.model, current)
            wanted = schedule.batch_size_at(epochs_done)
            if wanted != current:
                orders.append(BatchSizeOrder(job_id, wanted))
        return tuple(orders)

    # What the executor reported.

    def _apply(self, report: RoundReport, planned: list[Assignment], plan: RoundPlan) -> None:
        mechanism = self.mechanism
        assert mechanism is not None
        if report.rates:
            self._observe_rates(mechanism, report.rates)
        if report.pair_rates:
            self._observe_pair_rates(mechanism, report.pair_rates)
        for change in report.batch_size_changes:
            self._change_batch_size(mechanism, change.job_id, change.job_type, change.total_steps)
        rules = self.rules
        active = mechanism.active
        # Summed unit by unit, in plan order, so totals are reproducible to the last digit.
        busy = self.busy_gpu_seconds
        credit = mechanism.credit
        for assignment, progress, unit in zip(planned, report.units, plan.units, strict=True):
            busy += progress.exec_s * len(assignment.gpus)
            members = assignment.unit.members
            if len(members) == 1:  # the common case, kept lean
                job = members[0]
                if job.job_id not in active:
                    continue  # it finished off-plan (a completion reported late)
                if credit(assignment, progress.steps[0], progress.exec_s, unit.overhead_s):
                    self._finished(job, progress.stopped_s[0])
                elif rules is not None:
                    rules.after_run(mechanism, job)
                continue
            if not all(m.job_id in active for m in members):
                continue
            for job_state in credit(assignment, progress.steps, progress.exec_s, unit.overhead_s):
                # A member of a pair completes at its own finish, not the pair's.
                self._finished(job_state, progress.stopped_s[members.index(job_state)])
            if rules is not None:
                for member in members:
                    if member.job_id in active:
                        rules.after_run(mechanism, member)
        for stray in report.stray:
            state = active.get(stray.job_id)
            if state is None:
                continue
            last = mechanism.previous_round.get(state.key)
            assignment = last or Assignment(
                state, 0, mechanism.worker_types[0], (), (state.rates[0],), False
            )
            if last is not None and last.unit is not state:
                assignment = assignment._replace(unit=state)
            for job_state in mechanism.credit(assignment, stray.steps, 0.0):
                self._finished(job_state, stray.stopped_s)
        if rules is not None:
            rules.at_round_end(mechanism)
        self.busy_gpu_seconds = busy
        timeline = self.timeline
        assert timeline is not None
        timeline.round_ran(planned, report.units, mechanism.worker_types)
        if self.schedules or report.batch_size_changes:
            # Only jobs whose batch size may change are looked at (none in a static trace).
            schedules = self.schedules
            timeline.batch_sizes_seen(
                report.end_s,
                (m for a in planned for m in a.unit.members if m.job_id in schedules),
                report.batch_size_changes,
            )

    def _apply_columns(self, progress: ColumnProgress, plan: RoundColumns) -> None:
        """`_apply` for a round planned as columns: the same sums, in the same order."""
        mechanism = self.mechanism
        assert mechanism is not None and self.timeline is not None
        planned = self._column_round
        jobs, columns, gpus = planned.jobs, planned.columns, planned.gpus
        if len(progress.exec_s) != len(jobs):
            raise ValueError(f"{len(jobs)} units planned, progress for {len(progress.exec_s)}")
        exec_s = progress.exec_s
        # Summed unit by unit, in plan order (accumulate adds in order, unlike sum).
        busy = np.concatenate(([self.busy_gpu_seconds], exec_s * gpus))
        self.busy_gpu_seconds = float(np.add.accumulate(busy)[-1])
        finished = mechanism.credit_jobs(
            jobs, planned.slots, columns, progress.steps, exec_s, plan.overhead_s
        )
        stopped = progress.stopped_s
        for position in finished:
            self._finished(jobs[position], float(stopped[position]))
        self.timeline.jobs_ran(
            columns, gpus, plan.job_ids, exec_s, stopped, mechanism.worker_types, lambda: jobs
        )
        if self.schedules:
            schedules = self.schedules
            self.timeline.batch_sizes_seen(
                progress.end_s, (job for job in jobs if job.job_id in schedules)
            )

    def _finished(self, state: JobState, finish: float) -> None:
        job = state.spec
        self.records.append(
            JobRecord(
                job.job_id,
                job.arrival_time,
                finish,
                self.isolated_runtime.pop(job.job_id),
                job.scale_factor,
            )
        )
        self.waiting_for.discard(job.job_id)
        if self.hooks.job_finished:
            self.hooks.job_finished(
                event=JobFinished(finish, job.job_id, finish - job.arrival_time)
            )

    def _observe_rates(self, mechanism: Mechanism, reported: Iterable[MeasuredRate]) -> None:
        """Measured rates replace the table's: the mechanism plans with them, and the policy
        re-solves when one moved a lot. All of a round's reports are folded in first, then
        the active jobs are visited once."""
        if not self.capabilities.measures_rates:
            return
        changed: dict[tuple[str, int], list[tuple[int, float]]] = {}
        columns = {w: i for i, w in enumerate(mechanism.worker_types)}
        for rate in reported:
            if rate.steps_per_s <= 0:
                continue
            key = (rate.job_type, rate.scale_factor, rate.worker_type)
            value = self.rates.observe(*key, rate.steps_per_s)
            column = columns.get(rate.worker_type)
            if column is None:
                continue
            mechanism.table.set(*key, value)
            changed.setdefault((rate.job_type, rate.scale_factor), []).append((column, value))
        if not changed:
            return
        prior = self.request.table
        for (job_type, scale_factor), folded in changed.items():
            if prior.has(job_type, scale_factor):
                continue
            # A type the table lacks: what was measured moves its estimates elsewhere too.
            measured = {column for column, _ in folded}
            for column, worker_type in enumerate(mechanism.worker_types):
                if column in measured or self.rates.reports(job_type, scale_factor, worker_type):
                    continue
                value = self.rates.estimate(job_type, scale_factor, worker_type)
                mechanism.table.set(job_type, scale_factor, worker_type, value)
                folded.append((column, value))
        for state in mechanism.active.values():
            updates = changed.get((state.spec.job_type, state.scale_factor))
            if updates is None:
                continue
            for column, value in updates:
                before = state.rates[column]
                if before == value:
                    continue
                state.rates[column] = value
                if before <= 0 or abs(value - before) / before > _RATE_CHANGE_REALLOCATES:
                    mechanism.need_allocation = True

    def _observe_pair_rates(
        self, mechanism: Mechanism, reported: Iterable[MeasuredPairRate]
    ) -> None:
        """Measured co-located rates replace the table's pair (in the order measured: a
        table may hold two measurements of a pair, one per order) and those of the pairs the
        mechanism tracks in that order."""
        if not self.capabilities.measures_pair_rates:
            return
        columns = {w: i for i, w in enumerate(mechanism.worker_types)}
        for rate in reported:
            first = (rate.first_type, rate.scale_factor)
            second = (rate.second_type, rate.scale_factor)
            rates = (rate.first_steps_per_s, rate.second_steps_per_s)
            self.pair_rates[(first, second, rate.worker_type)] = rates
            mechanism.table.pairs.setdefault((first, second), {})[rate.worker_type] = rates
            column = columns.get(rate.worker_type)
            if column is None:
                continue
            if first == second:  # identical jobs are interchangeable (see `_new_pair`)
                rates = ((rates[0] + rates[1]) / 2,) * 2
            for pair in mechanism.pairs.values():
                one, two = pair.members
                if (one.spec.job_type, two.spec.job_type) != (rate.first_type, rate.second_type):
                    continue
                if pair.scale_factor != rate.scale_factor:
                    continue
                before = pair.rates[column]
                pair.pair_rates[column] = rates
                pair.rates[column] = min(rates)
                if before <= 0 or abs(min(rates) - before) / before > _RATE_CHANGE_REALLOCATES:
                    mechanism.need_allocation = True

    def _change_batch_size(
        self,
        mechanism: Mechanism,
        job_id: int,
        job_type: str,
        total_steps: int,
    ) -> None:
        """A real job switched batch size: from now on it is that batch size's job type
        (measured rates, else the prior table's, as for any type)."""
        state = mechanism.active.get(job_id)
        if state is None:
            return
        self._ensure_rates(mechanism, job_type, state.scale_factor)
        mechanism.change_job_type(state, job_type, total_steps, state.steps_done)

    def _ensure_rates(self, mechanism: Mechanism, job_type: str, scale_factor: int) -> None:
        """Put a job type in the mechanism's table (it may be new to it)."""
        if not self.capabilities.measures_rates:
            return
        for worker_type in mechanism.worker_types:
            rate = self.rates.estimate(job_type, scale_factor, worker_type)
            mechanism.table.set(job_type, scale_factor, worker_type, rate)

    # A changed cluster.

    def _resize(self, cluster: Cluster) -> Mechanism:
        """A mechanism for the cluster as it is now: the engine's state restored into it, so
        jobs keep their progress, batch size and time counters and the allocation clock goes
        on, exactly as after a crash."""
        old = self.mechanism
        assert old is not None
        # Through JSON, as a journal would keep it: the policy gets its memory back as data,
        # sharing nothing with its live state.
        state = json.loads(json.dumps(self.snapshot()))
        base, stats = self.stats_base, old.stats
        base.preemptions += stats.preemptions
        base.lease_extensions += stats.lease_extensions
        base.lease_opportunities += stats.lease_opportunities
        base.allocations += stats.allocations
        base.solver_seconds += stats.solver_seconds
        new = self._build_mechanism(cluster)
        if self.timeline is not None:
            self.timeline.cluster_changed(cluster)
        if not self.capabilities.measures_rates:
            new.table = old.table
        self._restore_into(new, state)
        new.need_allocation = True  # the cluster changed: the old shares were for the old one
        self.mechanism = new
        return new

    # Durability.

    def snapshot(self) -> dict[str, Any]:
        """The engine's whole state, as one JSON document (see engine_state.py)."""
        mechanism = self.mechanism
        assert mechanism is not None
        counters = self.counters()
        stats = MechanismStats(
            counters.preemptions,
            counters.lease_extensions,
            counters.placements,
            counters.allocations,
            counters.solver_seconds,
        )
        return snapshot(
            self.now,
            mechanism,
            EngineCounters(self.rounds, self.busy_gpu_seconds, stats),
            self.records,
            self.isolated_runtime,
            {key: value for key, (value, _) in self.rates.measured.items()},
            self.policy,
        )

    def _save(self) -> None:
        if self.capabilities.durable:
            self.executor.save_state(self.snapshot())

    def _restore_into(self, mechanism: Mechanism, document: dict[str, Any]) -> RestoredRun:
        """The saved jobs admitted to `mechanism` with their progress and counters, its clock
        set, and the policy given its memory back."""
        for saved in document.get("jobs", ()):
            job = self._by_id.get(int(saved["id"]))
            if job is not None:
                self._ensure_rates(mechanism, saved["job_type"], job.scale_factor)
        fresh = self.request.policy.for_run(self.config.seed)
        restored, policy = restore(document, mechanism, self._by_id, self.policy, fresh)
        self.policy = mechanism.policy = policy
        return restored

    def _restore(self, mechanism: Mechanism, document: dict[str, Any]) -> Mechanism:
        """Go on from a saved state: its jobs, counters, records and measured rates."""
        restored = self._restore_into(mechanism, document)
        self.rounds = restored.counters.rounds
        self.busy_gpu_seconds = restored.counters.busy_gpu_seconds
        self.stats_base = restored.counters.stats
        self.records = restored.records
        self.isolated_runtime = restored.isolated_runtime
        for (job_type, scale, worker_type), value in restored.measured.items():
            self.rates.observe(job_type, scale, worker_type, value)
        while (
            self.next_arrival < len(self.jobs)
            and self.jobs[self.next_arrival].job_id in restored.admitted
        ):
            self.next_arrival += 1
        self.waiting_for -= {r.job_id for r in self.records}
        return mechanism

    # Results.

    def counters(self) -> RunCounters:
        mechanism = self.mechanism
        stats = MechanismStats() if mechanism is None else mechanism.stats
        base = self.stats_base
        return RunCounters(
            busy_gpu_seconds=self.busy_gpu_seconds,
            preemptions=base.preemptions + stats.preemptions,
            lease_extensions=base.lease_extensions + stats.lease_extensions,
            placements=base.lease_opportunities + stats.lease_opportunities,
            rounds=self.rounds,
            allocations=base.allocations + stats.allocations,
            solver_seconds=base.solver_seconds + stats.solver_seconds,
        )

    def _result(self, mechanism: Mechanism, now: float, wall_s: float) -> RunResult:
        records = sorted(self.records, key=lambda r: r.job_id)
        unfinished = [
            (j.arrival_time, now)
            for j in self.jobs[: self.next_arrival]
            if j.job_id in mechanism.active
        ]
        metrics, rhos = compute_metrics(
            records,
            mechanism.cluster.total_gpus,
            self.counters(),
            wall_s,
            self.config.window,
            unfinished,
            trace_jobs=len(self.jobs) if self.config.rho_contention == "trace" else None,
        )
        return RunResult(
            policy=self.policy.name,
            backend=self.backend_name,
            solver=self.request.solver.name,
            trace=self.request.trace.source,
            cluster=mechanism.cluster.describe(),
            preset=self.config.preset,
            metrics=metrics,
            records=tuple(records),
            rhos=rhos,
            unfinished_jobs=len(self.jobs) - len(records) - len(self.cancelled),
            placement=self.request.placement.name,
            adaptation_rules=(
                self.config.adaptation_rules if self.capabilities.simulates_jobs else "harness"
            ),
            timeline=None if self.timeline is None else self.timeline.timeline(),
        )


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


@contextmanager
def _fewer_young_collections() -> Iterator[None]:
    """Python's garbage collector, tuned for the loop's churn (restored after it)."""
    saved = gc.get_threshold()
    gc.set_threshold(max(saved[0], _YOUNG_COLLECTION_THRESHOLD), *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def run_engine(request: RunRequest, executor: Executor, backend_name: str) -> RunResult:
    return Engine(request, executor, backend_name).run()
