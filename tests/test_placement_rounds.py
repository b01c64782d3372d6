"""Resource-aware placements that remember the last round (to place again only the requests
after those both rounds share) give exactly what a placement meeting each round afresh gives,
round after round, as jobs leave and arrive and keep their GPUs, on one worker type after
another."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shock.core.resource_placement import ResourcePlacement, ResourceRequest, ServerResources
from shock.plugins.placement.synergy import GreedyPlacement, ProportionalPlacement, TunePlacement
from shock.resources.profiles import synergy_profiles

MODELS = sorted(synergy_profiles())
PLACEMENTS: list[Callable[[], ResourcePlacement]] = [
    ProportionalPlacement,
    GreedyPlacement,
    TunePlacement,
]

# A job: (key, GPUs, model). A round: the jobs asking, in priority order.
Job = tuple[int, int, str]
Rounds = tuple[list[ServerResources], list[list[Job]]]


@st.composite
def rounds(draw: st.DrawFn) -> Rounds:
    """Servers with scarce or ample CPUs and memory, and rounds in which some jobs leave (from
    anywhere in the order) and new ones arrive at its end, or nothing changes."""
    per_server = draw(st.sampled_from([2, 4, 8]))
    servers = [
        ServerResources(
            index,
            tuple(range(index * per_server, (index + 1) * per_server)),
            float(draw(st.integers(per_server, 6 * per_server))),
            draw(st.sampled_from([20.83, 62.5, 100.0])) * per_server,
        )
        for index in range(draw(st.integers(1, 3)))
    ]
    capacity = per_server * len(servers)
    sizes = [size for size in (1, 2, 4) if size <= per_server]
    next_key = 0
    jobs: list[Job] = []
    sequence: list[list[Job]] = []
    for _ in range(draw(st.integers(2, 8))):
        if jobs:
            leaving = draw(st.sets(st.integers(0, len(jobs) - 1), max_size=2))
            jobs = [job for index, job in enumerate(jobs) if index not in leaving]
        for _ in range(draw(st.integers(0, 3))):
            size = draw(st.sampled_from(sizes))
            if sum(job[1] for job in jobs) + size <= capacity:
                jobs.append((next_key, size, draw(st.sampled_from(MODELS))))
                next_key += 1
        sequence.append(list(jobs))
    return servers, sequence


@pytest.mark.parametrize("make", PLACEMENTS, ids=lambda make: make.name)
@given(instance=rounds())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_remembering_places_as_a_fresh_placement(
    make: Callable[[], ResourcePlacement], instance: Rounds
) -> None:
    servers, sequence = instance
    # A second worker type: the same servers with other GPU ids, placed in turn with the first
    # (as the mechanism does, one call per worker type), the odd jobs only.
    others = [server._replace(gpus=tuple(gpu + 1000 for gpu in server.gpus)) for server in servers]
    remembering = make()
    previous: dict[int, dict[int, tuple[int, ...]]] = {0: {}, 1: {}}
    for jobs in sequence:
        for kind, kind_servers in enumerate((servers, others)):
            requests = [
                ResourceRequest(key, size, model, previous[kind].get(key))
                for key, size, model in jobs
                if kind == 0 or key % 2
            ]
            got = remembering.place_with_resources(kind_servers, requests)
            fresh = make().place_with_resources(kind_servers, requests)
            # repr: the same floats to the last bit, in the same order.
            assert repr(list(got.items())) == repr(list(fresh.items()))
            previous[kind] = {key: grant.gpus for key, grant in got.items()}
