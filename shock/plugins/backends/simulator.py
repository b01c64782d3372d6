"""The discrete-event simulator backend: the engine's executor on virtual time.

Time moves from round boundary to round boundary: a round ends when its last scheduled job
ends its share of the round (at most one round length), or, when nothing runs, the clock
jumps to the next arrival. A job runs at the rate the engine planned with, less the
(re)start overhead the engine charged; a job's completion is its own exact finish inside the
round (Synergy's semantics, `quantised_rounds`: at the round's end, every round full length).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from shock.api import (
    Cluster,
    ColumnProgress,
    ExecutorCapabilities,
    JobSpec,
    MeasuredPairRate,
    MeasuredRate,
    PlannedUnit,
    Register,
    RoundColumns,
    RoundPlan,
    RoundReport,
    RunRequest,
    RunResult,
    ThroughputTable,
    UnitProgress,
    check_throughputs_known,
    hookimpl,
    run_engine,
)

# Builds a named tuple without its Python-level __new__ (one per unit per round).
_new_tuple = tuple.__new__


class SimulatedExecutor:
    """Progress computed analytically: steps = rate x (round length - overhead), whole steps,
    at least one, at most what the job has left."""

    capabilities = ExecutorCapabilities(simulates_jobs=True, columnar_rounds=True)

    def __init__(self) -> None:
        self.now = 0.0
        self.quantised = False
        self.fewer_steps = False

    def start(self, request: RunRequest, jobs: tuple[JobSpec, ...]) -> Cluster:
        self.quantised = request.config.quantised_rounds
        self.fewer_steps = request.config.overhead_effect == "fewer_steps"
        self.now = jobs[0].arrival_time if jobs else 0.0
        return request.cluster

    def clock(self) -> float:
        return self.now

    def run_round(self, plan: RoundPlan) -> RoundReport:
        start = plan.start_s
        round_length = plan.end_s - start
        quantised = self.quantised
        units: list[UnitProgress] = []
        append = units.append
        end = start
        for unit in plan.units:
            lost = unit.overhead_s
            if lost and self.fewer_steps:
                progress = _with_fewer_steps(unit, start, round_length, lost)
                append(progress)
                end = max(end, start + progress.exec_s)
                continue
            if len(unit.job_ids) == 1:  # the common case, kept lean (no min/max calls)
                rate = unit.rates[0]
                left = unit.steps_left[0]
                count: float = int(rate * (round_length - lost))
                if count < 1:
                    count = 1
                if count > left:
                    # A job with no steps left (more done than its total, see
                    # ArtifactBatchDynamics) does nothing.
                    count = left if left > 0 else 0
                finish = plan.end_s if quantised else start + lost + count / rate
                append(_new_tuple(UnitProgress, ((count,), (finish,), finish - start)))
                if finish > end:
                    end = finish
                continue
            counts = []
            finishes = []
            for rate, left in zip(unit.rates, unit.steps_left, strict=True):
                count = max(min(max(int(rate * (round_length - lost)), 1), left), 0)
                counts.append(count)
                finishes.append(plan.end_s if quantised else start + lost + count / rate)
            unit_finish = max(finishes)
            append(UnitProgress(tuple(counts), tuple(finishes), unit_finish - start))
            end = max(end, unit_finish)
        self.now = end
        return RoundReport(end, tuple(units))

    def run_round_columns(self, plan: RoundColumns) -> ColumnProgress:
        """`run_round` for jobs alone, element by element in the same arithmetic."""
        if self.fewer_steps and plan.overhead_s.any():
            raise ValueError("rounds with Shockwave's overhead effect are planned as units")
        start = plan.start_s
        round_length = plan.end_s - start
        rates, left, lost = plan.rates, plan.steps_left, plan.overhead_s
        # Whole steps (int() truncates, as np.trunc), at least one, at most what is left
        # (none where nothing is).
        count = np.maximum(np.trunc(rates * (round_length - lost)), 1.0)
        count = np.where(left > 0, np.minimum(count, left), 0.0)
        # (start + lost) + count / rate, as Python evaluates it unit by unit.
        finish = np.full(len(count), plan.end_s) if self.quantised else start + lost + count / rates
        end = max(start, float(finish.max())) if len(finish) else start
        self.now = end
        return ColumnProgress(end, count, finish, finish - start)

    def idle_until(self, time_s: float) -> None:
        self.now = max(self.now, time_s)

    def cluster_changed(self) -> Cluster | None:
        return None

    def stop(self) -> None:
        return None

    def save_state(self, state: dict[str, Any]) -> None:
        return None  # not durable: a simulation is simply run again

    def load_state(self) -> dict[str, Any] | None:
        return None


def _with_fewer_steps(
    unit: PlannedUnit, start: float, round_length: float, lost: float
) -> UnitProgress:
    """Shockwave's simulator: each member holds its GPUs for as long as its planned steps
    (a round's worth, or what it has left) take at its rate, t, and does (t - lost) / t of
    them, truncated to whole steps (none, when fewer than one is left after the loss). A
    member with no steps left does nothing."""
    counts = []
    finishes = []
    for rate, left in zip(unit.rates, unit.steps_left, strict=True):
        planned = min(max(int(rate * round_length), 1), left)
        if planned <= 0:
            counts.append(0)
            finishes.append(start)
            continue
        held = planned / rate
        counts.append(int(planned * ((held - lost) / held)))
        finishes.append(start + held)
    unit_finish = max(finishes)
    return UnitProgress(tuple(counts), tuple(finishes), unit_finish - start)


class OracleSimulatedExecutor(SimulatedExecutor):
    """The simulator when the policy sees estimated throughputs: jobs run at the measured
    table's rates (the oracle), not at the engine's estimates, and every round reports the
    rates they ran at, as a real cluster's executor reports what its jobs measured. Job
    types the oracle lacks run at the engine's rate (nothing truer is known)."""

    capabilities = ExecutorCapabilities(
        simulates_jobs=True, measures_rates=True, measures_pair_rates=True
    )

    def __init__(self, oracle: ThroughputTable) -> None:
        super().__init__()
        self.oracle = oracle
        self.server_of_gpu: list[int] = []
        self.placement_sensitive = False

    def start(self, request: RunRequest, jobs: tuple[JobSpec, ...]) -> Cluster:
        cluster = super().start(request, jobs)
        # GPU ids run over the servers in order (as the engine numbers them).
        self.server_of_gpu = [
            server.server_id for server in cluster.servers() for _ in range(server.num_gpus)
        ]
        self.placement_sensitive = request.config.mechanism.placement_sensitive
        return cluster

    def _spread(self, gpus: tuple[int, ...]) -> bool:
        """A gang across servers runs at the table's unconsolidated rate, where it has one."""
        servers = self.server_of_gpu
        return (
            self.placement_sensitive and len(gpus) > 1 and len({servers[g] for g in gpus}) > 1
        )

    def run_round(self, plan: RoundPlan) -> RoundReport:
        oracle = self.oracle
        progress: list[UnitProgress] = []
        rates: dict[tuple[str, int, str], MeasuredRate] = {}
        pairs: dict[tuple[str, str, int, str], MeasuredPairRate] = {}
        end = plan.start_s
        for unit in plan.units:
            size = len(unit.gpus) or 1
            worker_type = unit.worker_type
            if len(unit.job_types) == 1:
                job_type = unit.job_types[0]
                if self._spread(unit.gpus):
                    worker_type = f"{worker_type}_unconsolidated"
                true = oracle.throughput(job_type, size, worker_type) or oracle.throughput(
                    job_type, size, unit.worker_type
                )
                if true > 0:
                    unit = unit._replace(rates=(true,))
                    rates[(job_type, size, worker_type)] = MeasuredRate(
                        job_type, size, worker_type, true
                    )
            elif all((t, size) in oracle.isolated for t in unit.job_types):
                first, second = unit.job_types
                true_pair = oracle.pair_throughput((first, size), (second, size), worker_type)
                pairs[(first, second, size, worker_type)] = MeasuredPairRate(
                    first, second, size, worker_type, *true_pair
                )
                if min(true_pair) <= 0:
                    # A pair that makes no progress together (Gavel's [0, 0]): nothing done,
                    # the GPUs held for the round.
                    progress.append(
                        UnitProgress((0, 0), (plan.end_s, plan.end_s), plan.end_s - plan.start_s)
                    )
                    end = max(end, plan.end_s)
                    continue
                if first == second:
                    # Two jobs of one type are interchangeable: the mechanism gives each the
                    # mean of the two measurements, and so do the oracle's runs.
                    true_pair = ((true_pair[0] + true_pair[1]) / 2,) * 2
                unit = unit._replace(rates=true_pair)
            done = super().run_round(replace(plan, units=(unit,))).units[0]
            progress.append(done)
            end = max(end, plan.start_s + done.exec_s)
        self.now = end
        return RoundReport(
            end, tuple(progress), rates=tuple(rates.values()), pair_rates=tuple(pairs.values())
        )


class Simulator:
    name = "simulator"
    description = "fast discrete-event simulator of the round-based mechanism"
    simulates_jobs = True  # batch sizes follow the run's adaptation rules

    def executor(self, request: RunRequest) -> SimulatedExecutor:
        if request.oracle is not None:
            return OracleSimulatedExecutor(request.oracle)
        return SimulatedExecutor()

    def run(self, request: RunRequest) -> RunResult:
        # A job type without rates stops here, naming its line and how to estimate it.
        check_throughputs_known(request.trace, request.table, request.cluster.worker_types)
        return run_engine(request, self.executor(request), self.name)


@hookimpl
def register_backends(register: Register) -> None:
    register(Simulator())
