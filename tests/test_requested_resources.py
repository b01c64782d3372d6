"""Jobs whose trace records the CPUs and memory they asked for (imported production traces):
the resource-aware placements give them their request, and their speed follows their model's
matrix at what they got."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.resource_placement import (
    DEFAULT_CPUS_PER_GPU,
    ResourceRequest,
    ServerResources,
    requested_per_gpu,
)
from shock.core.solver import SolverSpec
from shock.engine.runner import RunOptions, run
from shock.plugins.placement.opt import OptPlacement
from shock.plugins.placement.synergy import GreedyPlacement, TunePlacement
from shock.plugins.policies.orderings import demand_shares
from shock.resources.catalog import profile_for

SERVER = ServerResources(0, tuple(range(8)), 24.0, 500.0)


def test_a_request_is_split_per_gpu() -> None:
    assert requested_per_gpu(JobSpec(0, "res18", 10, scale_factor=4, cpus=8.0)) == (2.0, None)
    assert requested_per_gpu(JobSpec(0, "res18", 10, scale_factor=2, memory_gb=50.0)) == (
        None, 25.0,
    )
    assert requested_per_gpu(JobSpec(0, "res18", 10)) is None


@pytest.mark.parametrize("placement", [GreedyPlacement(), TunePlacement(), OptPlacement()])
def test_placements_grant_what_the_job_asked(placement: object) -> None:
    profile = profile_for("res18")
    asked = ResourceRequest(("a",), 2, "res18", None, (5.0, 40.0))
    own = ResourceRequest(("b",), 2, "res18", None, None)
    grants = placement.place_with_resources([SERVER], [asked])  # type: ignore[attr-defined]
    grants.update(placement.place_with_resources([SERVER], [own]))  # type: ignore[attr-defined]
    assert (grants[("a",)].cpus, grants[("a",)].memory_gb) == pytest.approx((10.0, 80.0))
    assert grants[("a",)].speed == pytest.approx(profile.speed(5.0, 40.0))
    best = profile.best_demand(2)
    assert (grants[("b",)].cpus, grants[("b",)].memory_gb) == pytest.approx(best)
    assert grants[("b",)].speed == pytest.approx(profile.speedup)


def test_a_request_for_one_resource_keeps_the_profiles_other() -> None:
    profile = profile_for("res18")
    request = ResourceRequest(("a",), 1, "res18", None, (None, 30.0))
    grant = GreedyPlacement().place_with_resources([SERVER], [request])[("a",)]
    assert (grant.cpus, grant.memory_gb) == pytest.approx((profile.best_cpus_per_gpu, 30.0))


def test_requests_change_a_resource_aware_run(tmp_path: Path) -> None:
    header = "job_id,model_name,arrival_time_s,total_iterations,gpu_demand"
    plain = tmp_path / "plain.csv"
    asked = tmp_path / "asked.csv"
    rows = [f"{i},res18,0,3000,1" for i in range(8)]
    plain.write_text(header + "\n" + "\n".join(rows) + "\n")
    # Every job asks for 1 CPU: below res18's fair share, so it trains slower.
    asked.write_text(header + ",cpus\n" + "\n".join(r + ",1" for r in rows) + "\n")
    results = [
        run(RunOptions(policy="fifo", trace=str(path), cluster="synergy-128", placement="greedy"))
        for path in (plain, asked)
    ]
    assert all(r.unfinished_jobs == 0 for r in results)
    assert results[1].metrics.avg_jct_s > results[0].metrics.avg_jct_s


def test_drf_orders_by_the_recorded_request() -> None:
    # res18's best case, 9 CPUs per GPU, outweighs gnmt's (1 CPU): drf runs gnmt first, unless
    # gnmt's trace says it asked for more CPUs than res18 needs.
    assert profile_for("res18").best_cpus_per_gpu < 12.0

    def first(gnmt_cpus: float | None) -> set[int]:
        jobs = [
            PolicyJob(0, "res18", 1, 1.0, 0.0, 100, 0.0),
            PolicyJob(1, "gnmt", 1, 1.0, 0.0, 100, 0.0, cpus=gnmt_cpus),
        ]
        p = PolicyInput(1000.0, tuple(jobs), ("v100",), np.array([1.0]), np.ones((2, 1)))
        allocation = default_registry().get("policy", "drf").allocate(p, SolverSpec())
        assert demand_shares(p)[1][1] == pytest.approx(
            (gnmt_cpus or profile_for("gnmt").best_cpus_per_gpu) / DEFAULT_CPUS_PER_GPU
        )
        return {row for row in range(2) if allocation.fractions[row].sum() > 0}

    assert first(None) == {1}
    assert first(12.0) == {0}
