"""Plugin output is checked: every built-in policy's allocation passes the engine's check,
and a broken policy or placement stops a run with an error naming it and what is wrong."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from instances import generated_input

from shock.core.hookspecs import Register, hookimpl
from shock.core.placement import PlacementRequest
from shock.core.plugins import PluginRegistry, default_registry, load_plugins
from shock.core.policy import Allocation, Policy, PolicyInput, UnitKey
from shock.core.resource_placement import GrantPart, ResourceGrant, ResourceRequest
from shock.core.solver import SolverSpec
from shock.engine.allocation_check import (
    PluginOutputError,
    check_allocation,
    check_placement,
    check_resource_placement,
    placed_in_order,
)
from shock.engine.runner import RunOptions, bundled_trace_path, run

# --------------------------------------------------------------------------- built-in policies

POLICIES = default_registry().names("policy")


@st.composite
def problems(draw: Any) -> PolicyInput:
    multi_gpu = draw(st.booleans())
    low = 1 if not multi_gpu else 0
    capacity = tuple(draw(st.integers(low, 6)) for _ in range(3))
    if multi_gpu:  # a gang of 8 fits on some worker type
        capacity = (*capacity[:2], 8)
    problem = generated_input(
        draw(st.integers(1, 8)), capacity, draw(st.integers(0, 10_000)), multi_gpu
    )
    return replace(problem, round_length_s=360.0)


@pytest.mark.parametrize("name", POLICIES)
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(problem=problems())
def test_every_builtin_policy_passes_the_check(name: str, problem: PolicyInput) -> None:
    policy = default_registry().get("policy", name).for_run(0)
    # Twice: policies that keep state between allocations see a second call too.
    for _ in range(2):
        check_allocation(name, problem, policy.allocate(problem, SolverSpec()))


# --------------------------------------------------------------------------- broken policies


def _good(problem: PolicyInput) -> Allocation:
    """Each job a fair share of every worker type (feasible)."""
    m, n = len(problem.jobs), len(problem.worker_types)
    keys = tuple(job.job_id for job in problem.jobs)
    gpus = max(1.0, float(problem.scale_factors.sum()))
    share = np.minimum(problem.capacity / gpus, 1.0 / n)
    return Allocation(keys, problem.worker_types, np.tile(share, (m, 1)))


def _with(problem: PolicyInput, row: int, column: int, value: float) -> Allocation:
    good = _good(problem)
    fractions = good.fractions.copy()
    fractions[row, column] = value
    return replace(good, fractions=fractions)


# Each breaks the plan the mechanism would read: (allocation, words the error must contain).
BREAKAGES: dict[str, Any] = {
    "negative share": lambda p: (_with(p, 1, 0, -0.25), [f"job {p.jobs[1].job_id}", "negative"]),
    "NaN share": lambda p: (_with(p, 0, 1, float("nan")), [f"job {p.jobs[0].job_id}", "nan"]),
    "row over 1": lambda p: (_with(p, 2, 2, 1.5), [f"job {p.jobs[2].job_id}", "of its time"]),
    "column over capacity": lambda p: (
        replace(_good(p), fractions=np.tile([0.0, 0.0, 1.0], (len(p.jobs), 1))),
        [p.worker_types[2], "GPUs", "has"],
    ),
    "unknown worker type": lambda p: (
        replace(_good(p), worker_types=(*p.worker_types[:2], "a100")),
        ["unknown worker type", "a100"],
    ),
    "worker types reordered": lambda p: (
        replace(_good(p), worker_types=tuple(reversed(p.worker_types))),
        ["not the cluster's"],
    ),
    "unknown job": lambda p: (
        replace(_good(p), keys=(*_good(p).keys[:-1], 999_999)),
        ["job 999999", "not active"],
    ),
    "duplicate job": lambda p: (
        replace(_good(p), keys=(*_good(p).keys[:-1], _good(p).keys[0])),
        [f"job {p.jobs[0].job_id}", "more than one row"],
    ),
    "wrong shape": lambda p: (
        replace(_good(p), fractions=_good(p).fractions[:, :2]),
        ["shape", f"({len(p.jobs)}, 3)"],
    ),
    "pair over its jobs time": lambda p: (
        _with_pair(p, _pair(p, same_gang=True), [0.0, 0.0, 0.1]),
        [f"job {_pair(p, same_gang=True)[0]}", "alone and in pairs"],
    ),
    "pair of different gangs": lambda p: (
        _with_pair(p, _pair(p, same_gang=False), [0.0, 0.0, 0.0]),
        [f"pair {_pair(p, same_gang=False)!r}", "joins jobs of"],
    ),
}


def _pair(problem: PolicyInput, same_gang: bool) -> tuple[int, int]:
    """The first two jobs with equal (or different) GPU counts."""
    jobs = problem.jobs
    return next(
        (a.job_id, b.job_id)
        for i, a in enumerate(jobs)
        for b in jobs[i + 1 :]
        if (a.scale_factor == b.scale_factor) == same_gang
    )


def _with_pair(problem: PolicyInput, pair: tuple[int, int], shares: list[float]) -> Allocation:
    """The pair's members 0.9 of their time alone, the pair 0.2 + `shares[2]` of the last
    worker type together; other jobs a little: every row and column is within bounds."""
    m = len(problem.jobs)
    alone = np.tile([0.3, 0.3, 0.3], (m, 1)) / max(1.0, float(problem.scale_factors.sum()))
    alone[[i for i, job in enumerate(problem.jobs) if job.job_id in pair]] = [0.3, 0.3, 0.3]
    keys = (*(job.job_id for job in problem.jobs), pair)
    fractions = np.vstack([alone, [[0.0, 0.0, 0.2 + shares[2]]]])
    return Allocation(keys, problem.worker_types, fractions)


class BrokenPolicy(Policy):
    description = "returns a broken allocation"

    def __init__(self, breakage: str) -> None:
        self.name = f"broken_{breakage.replace(' ', '_')}"
        self.breakage = breakage
        self.expected: list[str] = []

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        allocation, self.expected = BREAKAGES[self.breakage](problem)
        return allocation  # type: ignore[no-any-return]


class Plugin:
    def __init__(self, policy: Policy | None = None, placement: Any = None) -> None:
        self.policy, self.placement = policy, placement

    @hookimpl
    def register_policies(self, register: Register) -> None:
        if self.policy is not None:
            register(self.policy)

    @hookimpl
    def register_placements(self, register: Register) -> None:
        if self.placement is not None:
            register(self.placement)


def small_run(registry: PluginRegistry, **options: Any) -> None:
    # Identical job types (one table row) so that any pair has co-located throughputs.
    run(
        RunOptions(
            trace=str(bundled_trace_path("small_test.trace")),
            cluster="v100=4,p100=4,k80=4",
            **options,
        ),
        registry,
    )


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_broken_allocation_stops_the_run_naming_the_policy(breakage: str) -> None:
    policy = BrokenPolicy(breakage)
    registry = PluginRegistry(load_plugins(extra_plugins=[Plugin(policy=policy)]))
    with pytest.raises(PluginOutputError) as error:
        small_run(registry, policy=policy.name)
    message = str(error.value)
    assert f"policy '{policy.name}'" in message
    for words in policy.expected:
        assert words in message, message


def test_a_tiny_solver_error_is_accepted() -> None:
    problem = generated_input(4, (2, 2, 2), 0, False)
    good = _good(problem)
    fractions = good.fractions.copy()
    fractions[0, 0] = -1e-9
    fractions[1] *= 1 + 1e-9
    check_allocation("tolerant", problem, replace(good, fractions=fractions))


# --------------------------------------------------------------------------- broken placements


class BrokenPlacement:
    description = "places GPUs wrongly"
    extends_leases = False

    def __init__(self, breakage: str) -> None:
        self.name = f"broken_{breakage.replace(' ', '_')}"
        self.breakage = breakage

    def place(
        self, servers: list[list[int]], requests: list[PlacementRequest]
    ) -> dict[UnitKey, tuple[int, ...]]:
        gpus = [gpu for server in servers for gpu in server]
        placed: dict[UnitKey, tuple[int, ...]] = {}
        cursor = 0
        for request in requests:
            placed[request.key] = tuple(gpus[cursor : cursor + request.scale_factor])
            cursor += request.scale_factor
        first = requests[0]
        if self.breakage == "too few GPUs":
            placed[first.key] = placed[first.key][:-1]
        elif self.breakage == "foreign GPU":
            placed[first.key] = (*placed[first.key][:-1], 10_000)
        elif self.breakage == "overlapping GPUs" and len(requests) > 1:
            second = requests[1]
            placed[second.key] = (placed[first.key][0], *placed[second.key][1:])
        elif self.breakage == "unit left out":
            del placed[first.key]
        elif self.breakage == "unknown unit":
            placed[424_242] = placed[first.key]
        return placed


PLACEMENT_BREAKAGES = {
    "too few GPUs": "needs",
    "foreign GPU": "GPU 10000",
    "overlapping GPUs": "and to another unit",
    "unit left out": "got no GPUs",
    "unknown unit": "job 424242 was not asked for",
}


@pytest.mark.parametrize("breakage", list(PLACEMENT_BREAKAGES))
def test_a_broken_placement_stops_the_run_naming_the_placement(breakage: str) -> None:
    placement = BrokenPlacement(breakage)
    registry = PluginRegistry(load_plugins(extra_plugins=[Plugin(placement=placement)]))
    with pytest.raises(PluginOutputError) as error:
        # One worker type with one GPU per server: every job's GPUs are consecutive ids.
        run(
            RunOptions(
                trace=str(bundled_trace_path("small_test.trace")),
                cluster="v100=8",
                placement=placement.name,
                policy="max_min_fairness",
            ),
            registry,
        )
    message = str(error.value)
    assert f"placement '{placement.name}'" in message
    assert PLACEMENT_BREAKAGES[breakage] in message, message


def _plainly_faulty(
    servers: list[list[int]], requests: list[PlacementRequest], gpus_of: dict[UnitKey, Any]
) -> bool:
    """The placement rule written plainly: each unit asked for, and only those, got as many
    GPUs as it needs (the last request of a key counts), all of them distinct and of `servers`."""
    wanted = {request.key: request.scale_factor for request in requests}
    if set(gpus_of) != set(wanted):
        return True
    if any(len(gpus) != wanted[key] for key, gpus in gpus_of.items()):
        return True
    taken = [gpu for gpus in gpus_of.values() for gpu in gpus]
    valid = {gpu for server in servers for gpu in server}
    return len(set(taken)) != len(taken) or not set(taken) <= valid


def _random_placement(
    rng: random.Random,
) -> tuple[list[list[int]], list[PlacementRequest], dict[UnitKey, Any]]:
    """A usable placement, then (mostly) one or two faults of the kinds a plugin could make."""
    servers, next_gpu = [], 0
    for _ in range(rng.randint(1, 4)):
        size = rng.randint(1, 4)
        servers.append(list(range(next_gpu, next_gpu + size)))
        next_gpu += size + rng.randint(0, 1)  # sometimes a gap: an id of no server
    free = [gpu for server in servers for gpu in server]
    rng.shuffle(free)
    requests, gpus_of = [], {}
    for key in range(rng.randint(0, 6)):
        size = rng.choice((0, 1, 1, 2, 3))
        if size > len(free):
            break
        requests.append(PlacementRequest(key, size, None))
        gpus_of[key] = tuple(free.pop() for _ in range(size))
    for _ in range(rng.choice((0, 1, 1, 2))):
        keys = list(gpus_of)
        fault = rng.randrange(8)
        if fault == 0 and keys:
            del gpus_of[rng.choice(keys)]  # a unit left out
        elif fault == 1:
            gpus_of[rng.choice((99, (1, 2)))] = (rng.randrange(next_gpu + 1),)  # not asked for
        elif fault == 2 and keys:
            key = rng.choice(keys)
            gpus_of[key] = gpus_of[key][:-1]  # too few
        elif fault == 3 and keys:
            key = rng.choice(keys)
            gpus_of[key] = (*gpus_of[key], rng.randrange(next_gpu + 2))  # too many (any GPU)
        elif fault == 4 and keys:
            key = rng.choice(keys)
            gpus_of[key] = (*gpus_of[key][1:], rng.choice((next_gpu, -1, 10_000)))  # foreign
        elif fault == 5 and len(keys) > 1:
            first, second = rng.sample(keys, 2)  # a GPU of another unit
            if gpus_of[first] and gpus_of[second]:
                gpus_of[second] = (gpus_of[first][0], *gpus_of[second][1:])
        elif fault == 6 and keys:
            key = rng.choice(keys)  # a GPU twice in one gang
            if gpus_of[key]:
                gpus_of[key] = (gpus_of[key][0], *gpus_of[key][:-1])
        elif fault == 7 and requests:
            request = rng.choice(requests)  # a unit asked for twice
            size = rng.choice((request.scale_factor, request.scale_factor + 1))
            requests.insert(rng.randrange(len(requests) + 1), request._replace(scale_factor=size))
    return servers, requests, gpus_of


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**9))
def test_the_placement_check_in_request_order_agrees_with_the_detailed_check(seed: int) -> None:
    servers, requests, gpus_of = _random_placement(random.Random(seed))
    valid = frozenset(gpu for server in servers for gpu in server)
    faulty = _plainly_faulty(servers, requests, gpus_of)
    keys = [request.key for request in requests]
    sizes = [request.scale_factor for request in requests]
    for valid_gpus, known in ((None, {}), (valid, {}), (valid, {"keys": keys, "sizes": sizes})):
        messages = []
        for check in (check_placement, placed_in_order):
            arguments = known if check is placed_in_order else {}
            try:
                placed = check(
                    BrokenPlacement("x"),
                    servers,
                    requests,
                    gpus_of,
                    valid_gpus=valid_gpus,
                    **arguments,
                )
            except PluginOutputError as error:
                messages.append(str(error))
                continue
            assert not faulty, (check.__name__, requests, gpus_of)
            if check is placed_in_order:
                assert placed == [gpus_of[request.key] for request in requests]
        # Both catch a fault, naming the same one (the detailed check's).
        assert len(messages) == (2 if faulty else 0), (messages, requests, gpus_of)
        assert len(set(messages)) <= 1
        assert all("placement 'broken_x'" in message for message in messages)


# ------------------------------------------------------------------ broken resource placements


def _grant(*parts: tuple[int, tuple[int, ...]]) -> ResourceGrant:
    return ResourceGrant(
        tuple(GrantPart(server, gpus, 3.0 * len(gpus), 62.5 * len(gpus)) for server, gpus in parts),
        1.0,
    )


RESOURCE_SERVERS = [[0, 1, 2, 3], [4, 5, 6, 7]]
RESOURCE_REQUESTS = [
    ResourceRequest(1, 1, "res18", None),
    ResourceRequest(2, 2, "res18", None),
    ResourceRequest(3, 4, "res18", None),
]
GOOD_GRANTS = {1: _grant((0, (0,))), 2: _grant((0, (2, 3))), 3: _grant((0, (1,)), (1, (4, 5, 6)))}
RESOURCE_BREAKAGES: dict[str, tuple[dict[UnitKey, ResourceGrant], str]] = {
    "unit not asked for": ({**GOOD_GRANTS, 9: _grant((1, (7,)))}, "job 9 was not asked for"),
    "too few GPUs": ({**GOOD_GRANTS, 2: _grant((0, (2,)))}, "job 2 got 1 GPU(s), it needs 2"),
    "too many GPUs over servers": (
        {**GOOD_GRANTS, 3: _grant((0, (1,)), (1, (4, 5, 6, 7)))},
        "job 3 got 5 GPU(s), it needs 4",
    ),
    "foreign GPU": ({**GOOD_GRANTS, 1: _grant((2, (8,)))}, "job 1 got GPU 8, which is not one"),
    "GPU given twice": (
        {**GOOD_GRANTS, 3: _grant((0, (0,)), (1, (4, 5, 6)))},
        "GPU 0 is given to job 3 and to another unit",
    ),
    "GPU twice in one grant": (
        {**GOOD_GRANTS, 3: _grant((0, (1,)), (1, (4, 4, 6)))},
        "GPU 4 is given to job 3 and to another unit",
    ),
}


def test_a_usable_resource_placement_passes() -> None:
    check_resource_placement("tune", RESOURCE_SERVERS, RESOURCE_REQUESTS, GOOD_GRANTS)
    # A unit left out does not run this round: not a fault.
    check_resource_placement("tune", RESOURCE_SERVERS, RESOURCE_REQUESTS, {2: GOOD_GRANTS[2]})


@pytest.mark.parametrize("breakage", list(RESOURCE_BREAKAGES))
def test_a_broken_resource_placement_is_named(breakage: str) -> None:
    grants, expected = RESOURCE_BREAKAGES[breakage]

    class Named:
        name = "broken"

    with pytest.raises(PluginOutputError) as error:
        check_resource_placement(Named(), RESOURCE_SERVERS, RESOURCE_REQUESTS, grants)
    message = str(error.value)
    assert message.startswith("placement 'broken' returned an unusable placement: "), message
    assert expected in message, message
