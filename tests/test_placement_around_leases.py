"""A placement that places around leases (`places_around_leases`) lets the mechanism keep the
leases itself and ask only for the other units, on the GPUs left: every round must come out
exactly as when the placement is asked for every unit, and a placement that hands out a GPU a
kept unit holds must still be caught."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.placement import Placement, PlacementRequest
from shock.core.plugins import default_registry
from shock.core.policy import UnitKey
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.engine.allocation_check import PluginOutputError, placed_in_order
from shock.engine.cluster_spec import parse_cluster
from shock.engine.mechanism import Mechanism
from shock.engine.units import Assignment
from shock.plugins.placement.consolidated import ConsolidatedPlacement, FirstFitPlacement

ROUND = 360.0
TABLE = default_throughputs()
WORKER_TYPES = ("v100", "p100", "k80")
JOB_KEYS = sorted(k for k in TABLE.isolated if k[1] in (1, 2, 4))


class PlainConsolidated(ConsolidatedPlacement):
    """The same placement, asked for every unit of every round (no shortcut applies)."""

    extends_leases = False
    places_around_leases = False


class PlainFirstFit(FirstFitPlacement):
    """Gavel's placement, asked for every unit of every round (also when all stay)."""

    extends_leases = False


# Each placement with its plain twin.
TWINS: list[tuple[Placement, Placement]] = [
    (ConsolidatedPlacement(), PlainConsolidated()),
    (FirstFitPlacement(), PlainFirstFit()),
]


def _mechanism(placement: Placement, cluster: str, policy: str) -> Mechanism:
    return Mechanism(
        parse_cluster(cluster, 4),
        default_registry().get("policy", policy).for_run(0),
        SolverSpec(),
        placement,
        TABLE,
        MechanismConfig(round_length_s=ROUND, seed=1),
    )


def _round(mechanism: Mechanism, now: float, rate_changes: list[tuple[int, float]]) -> list:
    """One round: plan, then credit what ran; then the measured rates change (as the
    engine's do in cluster mode, without touching last round's assignments)."""
    assignments = mechanism.plan_round(now)
    # Each at the unit's rates there now (what `_rates_on` says, one unit at a time).
    assert all(a.rates == mechanism._rates_on(a.unit, a.column, a.gpus) for a in assignments)
    for assignment in assignments:
        steps = [
            min(max(int(rate * ROUND), 1), member.remaining)
            for rate, member in zip(assignment.rates, assignment.unit.members, strict=True)
        ]
        mechanism.credit(assignment, steps, ROUND)
    for job_id, factor in rate_changes:
        job = mechanism.active.get(job_id)
        if job is not None:
            column = max(range(len(job.rates)), key=job.rates.__getitem__)
            job.rates[column] = job.rates[column] * factor
    return [_seen(a) for a in assignments]


def _seen(a: Assignment) -> tuple:
    return (a.unit.key, a.unit, a.column, a.worker_type, a.gpus, a.rates, a.kept_gpus, a.grant)


Run = tuple[str, str, list[JobSpec], list[list[tuple[int, float]]]]


def _jobs(
    draw: st.DrawFn, count: int, sizes: tuple[int, ...], rounds: float, last_arrival: int
) -> list[JobSpec]:
    keys = [key for key in JOB_KEYS if key[1] in sizes]
    jobs = []
    for job_id in range(count):
        job_type, scale_factor = draw(st.sampled_from(keys))
        rate = max(TABLE.throughput(job_type, scale_factor, w) for w in WORKER_TYPES)
        steps = max(1, int(rate * ROUND * draw(st.floats(0.3, rounds))))
        arrival = draw(st.integers(0, last_arrival)) * ROUND
        jobs.append(JobSpec(job_id, job_type, steps, scale_factor, arrival, 1.0))
    return sorted(jobs, key=lambda job: job.arrival_time)


@st.composite
def runs(draw: st.DrawFn) -> Run:
    """Small clusters (a few units per worker type), or a large one with many single-GPU jobs
    and a few gangs (dozens of units per type); measured rates change now and then."""
    large = draw(st.booleans())
    servers = [
        draw(st.integers(8, 12) if large and w == "v100" else st.integers(1, 4))
        for w in WORKER_TYPES
    ]
    cluster = ",".join(f"{w}={count * 4}" for w, count in zip(WORKER_TYPES, servers, strict=True))
    policies = ["max_min_fairness_perf", "fifo"] + ([] if large else ["max_min_fairness_packed"])
    policy = draw(st.sampled_from(policies))
    if large:
        jobs = _jobs(draw, draw(st.integers(50, 90)), (1,) * 9 + (2, 4), 20.0, 3)
    else:
        jobs = _jobs(draw, draw(st.integers(1, 24)), (1, 2, 4), 6.0, 10)
    changes = [
        draw(
            st.lists(st.tuples(st.integers(0, len(jobs)), st.sampled_from([0.5, 2.0])), max_size=3)
        )
        for _ in range(14)
    ]
    return cluster, policy, jobs, changes


@pytest.mark.parametrize("twins", TWINS, ids=lambda twins: twins[0].name)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs())
def test_keeping_leases_in_the_mechanism_places_as_asking_for_every_unit(
    twins: tuple[Placement, Placement], run: Run
) -> None:
    cluster, policy, jobs, changes = run
    around = _mechanism(twins[0], cluster, policy)
    plain = _mechanism(twins[1], cluster, policy)
    pending = list(jobs)
    for index, rate_changes in enumerate(changes):
        now = index * ROUND
        while pending and pending[0].arrival_time <= now:
            job = pending.pop(0)
            around.admit(job)
            plain.admit(job)
        seen_around = _round(around, now, rate_changes)
        seen_plain = _round(plain, now, rate_changes)
        # The same units (each mechanism's own states) on the same GPUs at the same rates.
        assert [s[:1] + s[2:] for s in seen_around] == [s[:1] + s[2:] for s in seen_plain]
        assert all(s[1] is around.active.get(s[0], s[1]) for s in seen_around)
    assert replace(around.stats, solver_seconds=0.0) == replace(plain.stats, solver_seconds=0.0)


def test_overlapping_remembered_gpus_go_to_the_placement() -> None:
    """A resumed run's memory with two units on one GPU: the placement decides, as without
    the shortcut (one of them keeps it, the other moves)."""
    placed = []
    for placement in (ConsolidatedPlacement(), PlainConsolidated()):
        mechanism = _mechanism(placement, "v100=4,p100=0,k80=0", "max_min_fairness")
        for job_id in (0, 1):
            mechanism.admit(JobSpec(job_id, "A3C", 10**9, 1, 0.0, 1.0))
            mechanism.remember_assignment(job_id, "v100", (2,), True)
        assignments = mechanism.plan_round(0.0)
        gpus = [gpu for a in assignments for gpu in a.gpus]
        assert len(gpus) == len(set(gpus)) == 2
        placed.append([_seen(a)[:1] + _seen(a)[2:] for a in assignments])
    assert placed[0] == placed[1]


class GrabsHeldGpus(ConsolidatedPlacement):
    """Places around leases but hands every new unit the first GPU of the worker type."""

    name = "grabs_held"

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        return {request.key: (0,) * request.scale_factor for request in requests}


def test_a_placement_handing_out_a_kept_units_gpu_is_caught() -> None:
    mechanism = _mechanism(GrabsHeldGpus(), "v100=4,p100=0,k80=0", "max_min_fairness")
    mechanism.admit(JobSpec(0, "A3C", 10**9, 1, 0.0, 1.0))
    mechanism.remember_assignment(0, "v100", (0,), True)
    mechanism.admit(JobSpec(1, "A3C", 10**9, 1, 0.0, 1.0))
    with pytest.raises(PluginOutputError, match=r"placement 'grabs_held'.*GPU 0"):
        mechanism.plan_round(0.0)


@pytest.mark.parametrize(
    ("gpus_of", "fault"),
    [
        ({1: (2,), 2: (3,)}, None),
        ({1: (0,), 2: (3,)}, "GPU 0"),  # held by a kept unit
        ({1: (3,), 2: (3,)}, "GPU 3"),  # twice
    ],
)
def test_placed_in_order_checks_against_held_gpus(
    gpus_of: dict[UnitKey, tuple[int, ...]], fault: str | None
) -> None:
    held = {0, 1}
    servers = [[2, 3]]  # the worker type's GPUs (0 to 3) less the held ones
    requests = [PlacementRequest(1, 1, None), PlacementRequest(2, 1, None)]
    arguments = dict(valid_gpus=frozenset(range(4)), keys=[1, 2], sizes=[1, 1], held=held)
    if fault is None:
        assert placed_in_order(PlainConsolidated(), servers, requests, gpus_of, **arguments) == [
            gpus_of[1],
            gpus_of[2],
        ]
        return
    with pytest.raises(PluginOutputError, match=fault):
        placed_in_order(PlainConsolidated(), servers, requests, gpus_of, **arguments)
