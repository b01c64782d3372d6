"""Resource-aware placements: capacities hold, tune's fair-share guarantee, opt's MILP reaches
the exhaustive optimum (and opt never does worse than tune), and the mechanism applies the
grants' speeds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.resource_placement import (
    ResourceGrant,
    ResourcePlacement,
    ResourceRequest,
    ServerResources,
)
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.engine.cluster_file import cluster_from_option
from shock.engine.mechanism import Mechanism
from shock.plugins.placement.opt import OptPlacement
from shock.plugins.placement.synergy import (
    GreedyPlacement,
    ProportionalPlacement,
    TunePlacement,
)
from shock.resources.catalog import profile_for
from shock.resources.cells import candidate_cells
from shock.resources.profiles import synergy_profiles

MODELS = sorted(synergy_profiles())
PLACEMENTS: list[ResourcePlacement] = [
    ProportionalPlacement(),
    GreedyPlacement(),
    TunePlacement(),
    OptPlacement(),
]


Instance = tuple[list[ServerResources], list[ResourceRequest]]


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    """Servers of 4 or 8 GPUs with random CPUs and memory, and gangs of 1-8 GPUs (powers of
    two) that fit by GPU count, some with last round's GPUs."""
    per_server = draw(st.sampled_from([4, 8]))
    count = draw(st.integers(1, 4))
    servers = []
    for index in range(count):
        cpus = draw(st.integers(per_server, 8 * per_server))
        memory = draw(st.sampled_from([20.83, 40.0, 62.5, 100.0])) * per_server
        gpus = tuple(range(index * per_server, (index + 1) * per_server))
        servers.append(ServerResources(index, gpus, float(cpus), memory))
    left = per_server * count
    requests = []
    sizes = [s for s in (1, 2, 4, 8) if s <= per_server]
    for key in range(draw(st.integers(1, 12))):
        size = draw(st.sampled_from(sizes))
        if size > left:
            break
        left -= size
        requests.append(ResourceRequest(key, size, draw(st.sampled_from(MODELS)), None))
    return servers, requests


def check_capacities(
    servers: list[ServerResources],
    requests: list[ResourceRequest],
    grants: dict[int | tuple[int, int], ResourceGrant],
) -> None:
    size = {r.key: r.scale_factor for r in requests}
    by_id = {s.server_id: s for s in servers}
    used_gpus: list[int] = []
    cpus = dict.fromkeys(by_id, 0.0)
    memory = dict.fromkeys(by_id, 0.0)
    for key, grant in grants.items():
        assert len(grant.gpus) == size[key]
        for part in grant.parts:
            assert set(part.gpus) <= set(by_id[part.server_id].gpus)
            cpus[part.server_id] += part.cpus
            memory[part.server_id] += part.memory_gb
        used_gpus.extend(grant.gpus)
    assert len(used_gpus) == len(set(used_gpus)), "a GPU given twice"
    for server_id, server in by_id.items():
        assert cpus[server_id] <= server.cpus + 1e-6
        assert memory[server_id] <= server.memory_gb + 1e-6


def fair_speed(grant: ResourceGrant, job_type: str, servers: list[ServerResources]) -> float:
    by_id = {s.server_id: s for s in servers}
    profile = profile_for(job_type)
    return min(
        profile.speed(by_id[p.server_id].fair_cpus_per_gpu, by_id[p.server_id].fair_mem_gb_per_gpu)
        for p in grant.parts
    )


def total_speed(grants: dict[int | tuple[int, int], ResourceGrant]) -> float:
    return sum(grant.speed for grant in grants.values())


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: p.name)
@SETTINGS
@given(instances())
def test_no_server_is_over_allocated(placement: ResourcePlacement, instance: Instance) -> None:
    servers, requests = instance
    grants = placement.place_with_resources(servers, requests)
    check_capacities(servers, requests, grants)
    if placement.name in ("proportional", "tune", "opt"):
        assert set(grants) == {r.key for r in requests}, "every gang that fits must run"


@SETTINGS
@given(instances())
def test_tune_never_below_the_gpu_proportional_share(instance: Instance) -> None:
    servers, requests = instance
    grants = TunePlacement().place_with_resources(servers, requests)
    for request in requests:
        grant = grants[request.key]
        assert grant.speed >= fair_speed(grant, request.job_type, servers) - 1e-9


@SETTINGS
@given(instances())
def test_greedy_gives_best_case_or_nothing(instance: Instance) -> None:
    servers, requests = instance
    grants = GreedyPlacement().place_with_resources(servers, requests)
    for request in requests:
        if request.key in grants:
            profile = profile_for(request.job_type)
            assert grants[request.key].speed == pytest.approx(profile.speedup)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_opt_never_below_tune(instance: Instance) -> None:
    servers, requests = instance
    tune = TunePlacement().place_with_resources(servers, requests)
    grants = OptPlacement(time_limit_s=10.0, relative_gap=0.0).place_with_resources(
        servers, requests
    )
    assert len(grants) >= len(tune)
    assert total_speed(grants) >= total_speed(tune) - 1e-6


@st.composite
def small_instances(draw: st.DrawFn) -> Instance:
    """One or two servers and at most four gangs: small enough to search exhaustively."""
    per_server = draw(st.sampled_from([2, 4]))
    servers = []
    for index in range(draw(st.integers(1, 2))):
        cpus = draw(st.integers(per_server, 6 * per_server))
        memory = draw(st.sampled_from([20.83, 62.5, 125.0])) * per_server
        gpus = tuple(range(index * per_server, (index + 1) * per_server))
        servers.append(ServerResources(index, gpus, float(cpus), memory))
    sizes = st.sampled_from([s for s in (1, 2, 4) if s <= per_server])
    requests = [
        ResourceRequest(key, draw(sizes), draw(st.sampled_from(MODELS)), None)
        for key in range(draw(st.integers(1, 4)))
    ]
    return servers, requests


def exhaustive_optimum(
    servers: list[ServerResources], requests: list[ResourceRequest]
) -> tuple[int, float]:
    """(units placed, summed speed), best first in that order, over every way of giving each
    unit one server and one candidate cell, or nothing; found by depth-first search."""
    options: list[list[tuple[int, float, float, float]]] = []  # (server, cpus, memory, speed)
    for request in requests:
        profile, n = profile_for(request.job_type), request.scale_factor
        unit_options = []
        for index, server in enumerate(servers):
            if n > len(server.gpus):
                continue
            capped = (
                min(profile.best_cpus_per_gpu, server.cpus / n),
                min(profile.best_mem_gb_per_gpu, server.memory_gb / n),
            )
            fair = (server.fair_cpus_per_gpu, server.fair_mem_gb_per_gpu)
            for cell in candidate_cells(profile, fair, capped):
                unit_options.append(
                    (index, cell.cpus_per_gpu * n, cell.mem_gb_per_gpu * n, cell.speed)
                )
        options.append(unit_options)
    free_gpus = [len(s.gpus) for s in servers]
    free_cpus = [s.cpus for s in servers]
    free_mem = [s.memory_gb for s in servers]
    best = (0, 0.0)

    def search(unit: int, placed: int, speed: float) -> None:
        nonlocal best
        if unit == len(requests):
            if (placed, speed) > best:
                best = (placed, speed)
            return
        n = requests[unit].scale_factor
        for server, cpus, memory, cell_speed in options[unit]:
            if (
                free_gpus[server] >= n
                and free_cpus[server] >= cpus - 1e-9
                and free_mem[server] >= memory - 1e-9
            ):
                free_gpus[server] -= n
                free_cpus[server] -= cpus
                free_mem[server] -= memory
                search(unit + 1, placed + 1, speed + cell_speed)
                free_gpus[server] += n
                free_cpus[server] += cpus
                free_mem[server] += memory
        search(unit + 1, placed, speed)  # this unit waits

    search(0, 0, 0.0)
    return best


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_opt_milp_reaches_the_exhaustive_optimum(instance: Instance) -> None:
    """The MILP's own placement (no fall-back to tune), from no start and from tune's."""
    servers, requests = instance
    best_placed, best_speed = exhaustive_optimum(servers, requests)
    tune = TunePlacement().place_with_resources(servers, requests)
    for start in (None, tune):
        grants = OptPlacement(time_limit_s=30.0, relative_gap=0.0).optimised(
            servers, requests, start
        )
        check_capacities(servers, requests, grants)
        assert all(len(grant.parts) == 1 for grant in grants.values())
        assert len(grants) == best_placed
        assert total_speed(grants) == pytest.approx(best_speed, abs=1e-5)


def test_candidate_cells_lose_no_speed() -> None:
    """Every CPU x memory point of a profile's grid is matched by a candidate cell that uses
    no more of either resource and is at least as fast, so choosing among cells loses nothing."""
    fair, capped = (3.0, 62.5), (9.0, 100.0)
    for model in MODELS:
        profile = profile_for(model)
        cells = candidate_cells(profile, fair, capped)
        for cpus in {*profile.cpu_axis, fair[0], capped[0]}:
            for memory in {*profile.mem_axis, fair[1], capped[1]}:
                speed = profile.speed(cpus, memory)
                assert any(
                    c.cpus_per_gpu <= cpus and c.mem_gb_per_gpu <= memory and c.speed >= speed
                    for c in cells
                ), f"{model}: no cell covers ({cpus}, {memory})"


def test_tune_beats_proportional_on_sensitive_jobs() -> None:
    server = ServerResources(0, tuple(range(8)), 24.0, 500.0)
    requests = [
        ResourceRequest(0, 1, "res18", None),
        ResourceRequest(1, 1, "gnmt", None),
        ResourceRequest(2, 2, "gnmt", None),
    ]
    proportional = ProportionalPlacement().place_with_resources([server], requests)
    tune = TunePlacement().place_with_resources([server], requests)
    assert [g.speed for g in proportional.values()] == [1.0, 1.0, 1.0]
    # res18 gets its best case (9 CPUs): the language jobs need 1 CPU per GPU.
    assert tune[0].speed == pytest.approx(2.4)
    assert tune[0].cpus == 9.0
    assert tune[1].cpus == 1.0


def test_tune_reclaims_from_earlier_jobs() -> None:
    server = ServerResources(0, tuple(range(4)), 12.0, 250.0)  # 3 CPUs per GPU
    requests = [ResourceRequest(k, 1, "res18", None) for k in range(4)]
    tune = TunePlacement().place_with_resources([server], requests)
    # The first takes 9 CPUs; the others still get their fair 3, taken back from it.
    assert sum(g.cpus for g in tune.values()) <= 12.0
    assert all(g.cpus >= 3.0 for g in tune.values())
    assert tune[0].cpus == 3.0


def test_mechanism_scales_rates_by_the_grant() -> None:
    cluster = cluster_from_option("synergy-128")
    registry = default_registry()
    table = default_throughputs()
    mechanism = Mechanism(
        cluster,
        registry.get("policy", "fifo"),
        SolverSpec(),
        TunePlacement(),
        table,
        MechanismConfig(round_length_s=300.0),
    )
    jobs = [
        JobSpec(0, "ResNet-18 (batch size 32)", 1000),
        JobSpec(1, "LM (batch size 20)", 1000, scale_factor=2),
    ]
    for job in jobs:
        mechanism.admit(job)
    assignments = {a.job.job_id: a for a in mechanism.plan_round(0.0)}
    resnet = assignments[0]
    assert resnet.grant is not None
    assert resnet.rate == pytest.approx(resnet.job.rates[0] * 2.4)
    assert assignments[1].rate == pytest.approx(assignments[1].job.rates[0])
    language = assignments[1].grant
    assert language is not None
    assert language.cpus == pytest.approx(2.0)  # its best case: 1 CPU per GPU


@SETTINGS
@given(instances())
def test_tune_gives_the_capped_best_case_or_at_most_the_fair_share(instance: Instance) -> None:
    """Synergy's tune knows two allocations: a job's best case (capped at one server) or the
    fair share; a job cut back keeps less than the fair share only where its best case is."""
    servers, requests = instance
    by_id = {s.server_id: s for s in servers}
    grants = TunePlacement().place_with_resources(servers, requests)
    for request in requests:
        profile = profile_for(request.job_type)
        for part in grants[request.key].parts:
            server, count = by_id[part.server_id], len(part.gpus)
            cpus, memory = part.cpus / count, part.memory_gb / count
            best = (
                min(profile.best_cpus_per_gpu, server.cpus / request.scale_factor),
                min(profile.best_mem_gb_per_gpu, server.memory_gb / request.scale_factor),
            )
            if request.scale_factor <= len(server.gpus) and (cpus, memory) == pytest.approx(best):
                continue
            assert cpus <= server.fair_cpus_per_gpu + 1e-9
            assert memory <= server.fair_mem_gb_per_gpu + 1e-9


def test_tune_caps_the_best_case_at_one_server() -> None:
    # res18 wants 9 CPUs per GPU: 36 for 4 GPUs, more than the server's 24 (Synergy caps it).
    server = ServerResources(0, tuple(range(8)), 24.0, 500.0)
    grant = TunePlacement().place_with_resources([server], [ResourceRequest(0, 4, "res18", None)])
    assert grant[0].cpus == pytest.approx(24.0)
    assert grant[0].speed == pytest.approx(profile_for("res18").speed(6.0, 62.5))
    assert TunePlacement().nominal_speed("res18", 4, server) == pytest.approx(grant[0].speed)


def test_tune_spreads_a_best_case_over_servers() -> None:
    # Two servers with one GPU each free: the 2-GPU res18 gets 9 CPUs on each, as Synergy's
    # placement takes any GPUs where the per-GPU demand fits.
    servers = [ServerResources(k, tuple(range(4 * k, 4 * k + 4)), 24.0, 500.0) for k in range(2)]
    requests = [ResourceRequest(10 + gpu, 1, "gnmt", (gpu,)) for gpu in (0, 1, 2, 4, 5, 6)] + [
        ResourceRequest(2, 2, "res18", None)
    ]
    grants = TunePlacement().place_with_resources(servers, requests)
    assert len(grants[2].parts) == 2
    assert [part.cpus for part in grants[2].parts] == [9.0, 9.0]
    assert grants[2].speed == pytest.approx(2.4)


def test_tune_cuts_back_the_peer_with_most_cpus_per_gpu_first() -> None:
    # alexnet holds 12 CPUs and res18 9 (21 of 24); m5 then needs its fair 3 + 3: Synergy's
    # order cuts alexnet (most CPUs per GPU) back to the fair share and leaves res18 alone.
    server = ServerResources(0, tuple(range(8)), 24.0, 500.0)
    requests = [
        ResourceRequest(0, 1, "res18", None),
        ResourceRequest(1, 1, "alexnet", None),
        ResourceRequest(2, 2, "m5", None),
    ]
    grants = TunePlacement().place_with_resources([server], requests)
    assert grants[0].cpus == 9.0
    assert grants[1].cpus == 3.0
    assert grants[2].cpus == pytest.approx(6.0)
    check_capacities([server], requests, grants)


def test_policies_see_time_run_and_the_granted_speed() -> None:
    cluster = cluster_from_option("synergy-128")
    mechanism = Mechanism(
        cluster,
        default_registry().get("policy", "las"),
        SolverSpec(),
        TunePlacement(),
        default_throughputs(),
        MechanismConfig(round_length_s=300.0),
    )
    mechanism.admit(JobSpec(0, "ResNet-18 (batch size 32)", 10**6))
    mechanism.admit(JobSpec(1, "LM (batch size 20)", 10**6))
    before = {j.job_id: j for j in mechanism._policy_input(0.0).jobs}
    assert before[0].speed == 1.0 and before[0].time_run_s == 0.0  # nothing placed yet
    for assignment in mechanism.plan_round(0.0):
        mechanism.credit(assignment, assignment.rate * 300.0, 300.0)
    after = {j.job_id: j for j in mechanism._policy_input(300.0).jobs}
    assert after[0].speed == pytest.approx(2.4)
    assert after[0].time_run_s == after[1].time_run_s == 300.0
