"""Elastic jobs in the engine: grants resize jobs, progress follows goodput, restarts cost.

A scripted elastic policy hands the engine one list of grants per round; the tests check the
placement (capacity, node layouts, kept GPUs), the restart overhead (charged once per change),
progress credited at the goodput of the placement and batch size, the timeline's GPU counts
and batch sizes, and snapshot/restore of the grants.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, ElasticGrant, Policy, PolicyInput, UnitKey
from shock.core.results import RunResult
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.trace import Trace
from shock.engine.cluster_spec import parse_cluster
from shock.engine.engine import Engine
from shock.engine.engine_state import EngineCounters, restore, snapshot
from shock.engine.mechanism import Mechanism
from shock.engine.runner import RunOptions, build_request
from shock.goodput.progress import Configuration, curve, fixed_batch_configuration
from shock.plugins.backends.simulator import SimulatedExecutor
from shock.plugins.traces.pollux import PolluxTraces

CIFAR = "cifar10 (batch size 128)"
ROUND = 60.0


class Scripted(Policy):
    """Grants per round from a script (the last entry repeats); job ids map to grants."""

    name = "scripted"
    description = "test: fixed grants per round"
    reallocate_every_round = True

    def __init__(self, script: Sequence[Mapping[int, ElasticGrant]]) -> None:
        self.script = list(script)
        self.calls = 0

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        grants = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        ids = tuple(j.job_id for j in problem.jobs)
        elastic: dict[UnitKey, ElasticGrant] = {j: g for j, g in grants.items() if j in ids}
        fractions = np.zeros((len(ids), len(problem.worker_types)))
        return Allocation(ids, problem.worker_types, fractions, elastic=elastic)


def grant(gpus: int, nodes: int = 1, batch: int | None = None, **extra: Any) -> ElasticGrant:
    return ElasticGrant("t4", gpus, nodes, batch_size=batch, **extra)


def cifar_job(job_id: int = 0, steps: int | None = None, arrival: float = 0.0) -> JobSpec:
    total = steps if steps is not None else 39_000
    return JobSpec(job_id, CIFAR, total, scale_factor=1, arrival_time=arrival, elastic=True)


def simulate(
    jobs: list[JobSpec], policy: Policy, overhead_s: float = 30.0, cluster: str = "pollux-64"
) -> RunResult:
    registry = default_registry()
    trace = Trace(tuple(jobs), "test", format="pollux")
    options = RunOptions(
        policy="fifo",
        cluster=cluster,
        round_length_s=ROUND,
        preemption_overhead_s=overhead_s,
        overhead_on_first_start=True,
        throughputs=None,
    )
    request = build_request(options, registry, trace=trace)
    table = PolluxTraces().default_throughputs(trace, request.cluster.worker_types, request.table)
    request = replace(request, policy=policy, table=table)
    return Engine(request, SimulatedExecutor(), "simulator").run()


def mechanism(script: Sequence[Mapping[int, ElasticGrant]]) -> Mechanism:
    cluster = parse_cluster("t4=64", 4)
    trace = Trace((cifar_job(),), "test", format="pollux")
    table = PolluxTraces().default_throughputs(trace, cluster.worker_types, None)  # type: ignore[arg-type]
    placement = default_registry().get("placement", "first_fit")
    return Mechanism(
        cluster,
        Scripted(script),
        SolverSpec(),
        placement,
        table,
        MechanismConfig(round_length_s=ROUND),
    )


def test_a_job_grows_and_shrinks_with_its_grants_on_the_nodes_named() -> None:
    mech = mechanism([{0: grant(1)}, {0: grant(8, 2, node_gpus=(0, 4, 4))}, {0: grant(2)}])
    mech.admit(cifar_job())
    sizes = []
    servers_used = []
    for index in range(3):
        (assignment,) = mech.plan_round(index * ROUND)
        sizes.append(len(assignment.gpus))
        servers_used.append({g // 4 for g in assignment.gpus})
        mech.credit(assignment, 10.0, ROUND)
    assert sizes == [1, 8, 2]
    assert servers_used[1] == {1, 2}  # the grant's nodes: the second and third server


def test_a_job_keeps_its_gpus_while_its_grant_stays_and_restarts_only_on_a_change() -> None:
    script = [{0: grant(4)}] * 3 + [{0: grant(8, 2)}] * 3 + [{0: grant(2)}]
    result = simulate([cifar_job(steps=10**6)], Scripted(script), overhead_s=30.0)
    assert result.timeline is not None
    gpus = [s.gpus for s in result.timeline.jobs[0].segments]
    assert gpus == [4, 8, 2]
    # Two changes (grow, shrink); every other round keeps its GPUs (a lease extension).
    assert result.metrics.preemptions == 2
    assert result.metrics.lease_extension_share == pytest.approx(
        1 - 2 / (result.metrics.rounds - 1)
    )


def test_restart_cost_is_charged_exactly_once_per_change() -> None:
    # Four GPUs throughout: first on the first server, moved to the second in round 3, back
    # to the first in round 6 (the same placement and batch size, so the same goodput).
    first, second = grant(4, batch=512, node_gpus=(4,)), grant(4, batch=512, node_gpus=(0, 4))
    script = [{0: first}] * 2 + [{0: second}] * 3 + [{0: first}]
    job = cifar_job(steps=10**6)
    free = simulate([job], Scripted(script), overhead_s=0.0)
    charged = simulate([job], Scripted(script), overhead_s=30.0)
    # The first start and the two moves: three restarts of 30 s each, nothing else.
    delay = charged.records[0].completion_s - free.records[0].completion_s
    assert delay == pytest.approx(90.0, abs=0.5)
    assert charged.metrics.preemptions == free.metrics.preemptions == 2


def test_progress_follows_goodput_epoch_by_epoch() -> None:
    training = curve("cifar10")
    config = Configuration(1, 4, 128, 0)
    made, used = training.advance(0.0, config, 600.0)
    assert used == pytest.approx(600.0)
    assert training.epoch_at(made) > 10  # many epochs crossed
    # Slower than the first epoch's goodput all the way (efficiency falls as noise grows)
    # and faster than the last epoch's.
    rates = [training.goodput(config, e) for e in range(training.epoch_at(made) + 1)]
    assert min(rates) * 600 - 1e-6 <= made <= max(rates) * 600 + 1e-6
    assert len(set(rates)) > 1  # each epoch its own goodput
    # Epoch boundaries are where the validation runs put them.
    assert training.epoch_at(training.epoch_ends[0]) == 1
    assert training.epoch_at(training.epoch_ends[0] - 1e-9) == 0
    # Running to the end stops at the target.
    made, used = training.advance(training.target - 1.0, config, 3600.0)
    assert made == pytest.approx(1.0)
    assert used < 3600.0


def test_a_job_finishes_when_its_goodput_reaches_the_target() -> None:
    training = curve("cifar10")
    config = fixed_batch_configuration(training.limits, 1, 4, 512)
    job = cifar_job(steps=10**6)
    # However many steps the job has, they stand for its whole target progress.
    result = simulate([job], Scripted([{0: grant(4, batch=512)}]), overhead_s=30.0)
    _, seconds = training.advance(0.0, config, 10**9)
    # The first start loses 30 s; rates are a round's mean, so the finish is close to exact.
    assert result.records[0].completion_s == pytest.approx(30.0 + seconds, rel=0.02)


def test_timeline_records_gpu_counts_and_batch_sizes_over_time() -> None:
    script = [{0: grant(2, batch=256)}] * 2 + [{0: grant(4, batch=1024)}]
    result = simulate([cifar_job(steps=10**6)], Scripted(script), overhead_s=0.0)
    assert result.timeline is not None
    job = result.timeline.jobs[0]
    assert [s.gpus for s in job.segments][:2] == [2, 4]
    sizes = [size for _, size in job.batch_sizes]
    assert sizes[:3] == [128, 256, 1024]  # the trace's, then each grant's


def test_a_job_not_marked_elastic_keeps_its_scale_factor() -> None:
    rigid = JobSpec(0, CIFAR, 10**7, scale_factor=2, elastic=False)
    mech = mechanism([{0: grant(8, 2)}])
    mech.admit(rigid)
    (assignment,) = mech.plan_round(0.0)
    assert len(assignment.gpus) == 2
    mech2 = mechanism([{0: grant(1)}])
    mech2.admit(rigid)
    assert mech2.plan_round(0.0) == []  # fewer GPUs than it needs: it waits


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 5), st.integers(1, 20), st.integers(0, 3)), max_size=6),
        min_size=1,
        max_size=5,
    )
)
def test_capacity_is_never_exceeded_and_no_gpu_is_given_twice(
    rounds: list[list[tuple[int, int, int]]],
) -> None:
    # Grants of any size, some with node layouts that overlap or do not fit.
    script = []
    for entries in rounds:
        grants: dict[int, ElasticGrant] = {}
        for job_id, gpus, first_node in entries:
            layout = (0,) * first_node + (min(gpus, 4),) if gpus <= 4 else ()
            grants[job_id] = grant(gpus, max(1, -(-gpus // 4)), node_gpus=layout)
        script.append(grants)
    cluster = parse_cluster("t4=16", 4)  # 4 servers of 4
    mech = Mechanism(
        cluster,
        Scripted(script),
        SolverSpec(),
        default_registry().get("placement", "first_fit"),
        PolluxTraces().default_throughputs(
            Trace(tuple(cifar_job(j) for j in range(6)), "t", format="pollux"),
            cluster.worker_types,
            None,  # type: ignore[arg-type]
        ),
        MechanismConfig(round_length_s=ROUND),
    )
    for job_id in range(6):
        mech.admit(replace(cifar_job(job_id), job_type=CIFAR))
    for index in range(len(script)):
        assignments = mech.plan_round(index * ROUND)
        used = [g for a in assignments for g in a.gpus]
        assert len(used) == len(set(used)), "a GPU given twice"
        assert len(used) <= 16
        for a in assignments:
            wanted = script[index][a.job.job_id]
            assert len(a.gpus) == wanted.gpus  # never resized behind the policy's back
            assert a.rate > 0
            mech.credit(a, 1.0, ROUND)


def test_snapshot_and_restore_carry_the_grants() -> None:
    mech = mechanism([{0: grant(8, 2, batch=1024, node_gpus=(4, 4))}])
    mech.admit(cifar_job())
    (assignment,) = mech.plan_round(0.0)
    mech.credit(assignment, 100.0, ROUND)
    counters = EngineCounters(1, 0.0, mech.stats)
    saved = snapshot(ROUND, mech, counters, [], {}, {}, mech.policy)
    document = json.loads(json.dumps(saved))
    fresh = mechanism([{0: grant(1)}])
    restore(document, fresh, {0: cifar_job()}, fresh.policy, fresh.policy)
    assert fresh.allocation.elastic == mech.allocation.elastic
    # The restored run plans its next round on the same GPUs, as the original would.
    fresh.need_allocation = False
    again = fresh.elastic.plan(fresh.allocation.elastic or {}, fresh.active, fresh.previous_round)
    assert again[0].gpus == assignment.gpus and again[0].kept_gpus
