"""The shortcuts of the hot path give what the plain computation gives."""

from __future__ import annotations

import ast
import dataclasses
import random
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.placement import PlacementRequest
from shock.core.policy import PolicyJob
from shock.core.resource_placement import ResourceRequest, ServerResources
from shock.core.throughputs import parse_job_key
from shock.engine.policy_view import policy_view
from shock.engine.units import JobState
from shock.plugins.placement.consolidated import ConsolidatedPlacement
from shock.plugins.placement.synergy import ProportionalPlacement, TunePlacement
from shock.resources.profiles import synergy_profiles


def test_loading_the_plugins_imports_no_solver_modelling_or_cluster_library() -> None:
    probe = (
        "import sys; from shock.core.plugins import default_registry; default_registry(); "
        "print(sorted(m for m in ('pyomo', 'scipy', 'cvxpy', 'torch', 'grpc') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_a_policy_view_is_the_policy_job_of_the_state_and_is_renewed_when_it_moves() -> None:
    spec = JobSpec(7, "LM (batch size 20)", 500, scale_factor=2, arrival_time=3.0,
                   priority_weight=5.0, slo=2.0, mode="accordion", entity="a")  # fmt: skip
    state = JobState(spec, 7, 2, 500, [1.0], [1.0], _steps_done=12.5, _time_run_s=40.0, speed=1.5)
    expected = PolicyJob(7, "LM (batch size 20)", 2, 5.0, 3.0, 500, 12.5, 2.0, "a",
                         "accordion", 40.0, 1.5)  # fmt: skip
    view = policy_view(state)
    assert view == expected and dataclasses.astuple(view) == dataclasses.astuple(expected)
    assert policy_view(state) is view  # nothing moved: the same view
    state.steps_done += 1
    assert policy_view(state).steps_done == 13.5


def _reference_consolidated(
    servers: list[list[int]], requests: list[PlacementRequest]
) -> dict[object, tuple[int, ...]]:
    """The rule written plainly: lease extension, then the server with the fewest free GPUs
    that fits (lowest index), else the freest servers first."""
    ordered = sorted(requests, key=lambda r: r.scale_factor, reverse=True)
    taken: set[int] = set()
    placed: dict[object, tuple[int, ...]] = {}
    for r in ordered:
        prev = r.previous_gpus
        if prev and len(prev) == r.scale_factor and taken.isdisjoint(prev):
            placed[r.key] = prev
            taken.update(prev)
    free = [[g for g in s if g not in taken] for s in servers]
    for r in ordered:
        if r.key in placed:
            continue
        fitting = [i for i, gpus in enumerate(free) if len(gpus) >= r.scale_factor]
        if fitting:
            best = min(fitting, key=lambda i: (len(free[i]), i))
            placed[r.key] = tuple(free[best][: r.scale_factor])
            free[best] = free[best][r.scale_factor :]
            continue
        chosen: list[int] = []
        for i in sorted(range(len(free)), key=lambda i: (-len(free[i]), i)):
            take = free[i][: r.scale_factor - len(chosen)]
            chosen.extend(take)
            free[i] = free[i][len(take) :]
            if len(chosen) == r.scale_factor:
                break
        placed[r.key] = tuple(chosen)
    return placed


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6))
def test_consolidated_placement_matches_the_plain_rule(seed: int) -> None:
    rng = random.Random(seed)
    servers, next_gpu = [], 0
    for _ in range(rng.randint(1, 6)):
        size = rng.choice((1, 2, 3, 4, 8))
        servers.append(list(range(next_gpu, next_gpu + size)))
        next_gpu += size
    gpus = [g for s in servers for g in s]
    # Sometimes one-GPU jobs only (placed as one batch), else gangs that may straddle servers.
    sizes = (1,) if rng.random() < 0.3 else (1, 1, 2, 3, 4, 8)
    requests, left = [], len(gpus)
    for key in range(rng.randint(0, 12)):
        size = rng.choice(sizes)
        if size > left and rng.random() < 0.8:
            break  # (else more than fit: the last gangs get what is left)
        left -= size
        previous = None
        if rng.random() < 0.5:  # last round's GPUs: mostly as many as it needs
            count = size if rng.random() < 0.9 else size - 1
            previous = tuple(rng.sample(gpus, min(len(gpus), count)))
        requests.append(PlacementRequest(key, size, previous))
    assert ConsolidatedPlacement().place(servers, requests) == _reference_consolidated(
        servers, requests
    )


def test_a_repeated_round_gets_the_same_grants_and_its_own_copy() -> None:
    servers = [
        ServerResources(0, (0, 1, 2, 3), 12.0, 250.0),
        ServerResources(1, (4, 5), 6.0, 125.0),
    ]
    requests = [ResourceRequest(1, 2, "res18", None), ResourceRequest(2, 1, "gnmt", (4,))]
    for placement in (ProportionalPlacement(), TunePlacement()):
        first = placement.place_with_resources(servers, requests)
        first.clear()  # the caller's dict: changing it must not change the next round
        again = placement.place_with_resources(servers, requests)
        assert again == type(placement)().place_with_resources(servers, requests)
        assert set(again) == {1, 2}


def test_remembered_profile_speeds_are_the_interpolated_ones() -> None:
    for profile in synergy_profiles().values():
        for cpus, memory in ((3.0, 62.5), (1.5, 30.0), (7.0, 200.0), (0.5, 10.0)):
            assert profile.speed(cpus, memory) == profile._interpolate(cpus, memory)
            assert profile.speed(cpus, memory) == profile._interpolate(cpus, memory)


def test_throughput_keys_read_as_python_reads_them() -> None:
    for text in (
        "('ResNet-18 (batch size 32)', 1)",
        "('A3C', 8)",
        "(\"Model's (batch size 4)\", 2)",
        "('back\\\\slash', 3)",
    ):
        assert parse_job_key(text) == ast.literal_eval(text)
