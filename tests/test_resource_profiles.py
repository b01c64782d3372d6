"""Synergy's resource-sensitivity profiles: interpolation, demand, Gavel mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shock.resources.catalog import GAVEL_FAMILY_PROFILES, profile_for
from shock.resources.profiles import FAIR_CPUS_PER_GPU, FAIR_MEM_GB_PER_GPU, synergy_profiles

PROFILES = synergy_profiles()


def test_all_twelve_profiles_load() -> None:
    assert len(PROFILES) == 12
    assert PROFILES["res18"].job_class == "image"
    assert PROFILES["gnmt"].job_class == "language"


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_interpolation_is_exact_at_every_matrix_point(name: str) -> None:
    profile = PROFILES[name]
    for row, cpus in enumerate(profile.cpu_axis):
        for column, memory in enumerate(profile.mem_axis):
            assert profile.speed(cpus, memory) == pytest.approx(profile.matrix[row][column])


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_fair_share_is_one_and_best_case_is_the_speedup(name: str) -> None:
    profile = PROFILES[name]
    assert profile.speed(FAIR_CPUS_PER_GPU, FAIR_MEM_GB_PER_GPU) == pytest.approx(1.0)
    best = profile.speed(profile.best_cpus_per_gpu, profile.best_mem_gb_per_gpu)
    assert best == pytest.approx(profile.speedup)


def test_between_points_is_bilinear() -> None:
    res18 = PROFILES["res18"]  # rows 3 -> 4 CPUs: 1.0 -> 1.3 at 62.5 GB and above
    assert res18.speed(3.5, 62.5) == pytest.approx(1.15)
    assert res18.speed(3.5, 100.0) == pytest.approx(1.15)
    # Half-way between 20.83 GB (0.1) and 62.5 GB (1.0) at 3 CPUs.
    assert res18.speed(3.0, (20.83 + 62.5) / 2) == pytest.approx(0.55)


def test_outside_the_matrix() -> None:
    res18 = PROFILES["res18"]
    assert res18.speed(48, 500) == pytest.approx(2.4)  # more than the last row: no gain
    assert res18.speed(0.5, 62.5) == pytest.approx(0.37 / 2)  # half the first row
    assert res18.speed(0, 62.5) == 0.0


@given(
    st.sampled_from(sorted(PROFILES)),
    st.floats(0, 30),
    st.floats(0, 300),
    st.floats(0, 5),
    st.floats(0, 50),
)
def test_more_resources_never_slower(
    name: str, cpus: float, memory: float, more_cpus: float, more_memory: float
) -> None:
    # Every measured matrix is monotone, so the interpolation must be too.
    profile = PROFILES[name]
    more = profile.speed(cpus + more_cpus, memory + more_memory)
    assert more >= profile.speed(cpus, memory) - 1e-12


def test_best_demand_scales_with_gpus_and_snaps_language_memory() -> None:
    assert PROFILES["res18"].best_demand(4) == (36.0, 250.0)
    # The profiles say 20 GB where the matrix column is 20.83 (62.5/3 truncated).
    assert PROFILES["gnmt"].best_mem_gb_per_gpu == pytest.approx(20.83)
    assert PROFILES["gnmt"].speed(*PROFILES["gnmt"].best_demand(1)) == pytest.approx(1.0)


def test_gavel_job_types_map_to_profiles() -> None:
    assert profile_for("ResNet-18 (batch size 32)").model == "res18"
    assert profile_for("LM (batch size 20)").model == "lstm"
    assert profile_for("res50").model == "res50"
    assert set(GAVEL_FAMILY_PROFILES.values()) <= set(PROFILES)
    unknown = profile_for("CycleGAN monet2photo")
    assert not unknown.sensitive
    assert unknown.best_demand(1) == (FAIR_CPUS_PER_GPU, FAIR_MEM_GB_PER_GPU)
