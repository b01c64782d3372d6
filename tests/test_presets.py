"""Presets are plugins: registered by `register_presets`, found by name, each owning the
policy options and semantics of the simulator it reproduces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from shock_cli import run_shock_wide

from shock.core.errors import UnknownPluginError
from shock.core.hookspecs import hookimpl
from shock.core.model import JobSpec
from shock.core.plugins import PluginRegistry, default_registry, load_plugins
from shock.core.policy import Allocation, PartObjectives, Policy, PolicyInput
from shock.core.presets import Preset
from shock.core.run import MechanismConfig, RunConfig
from shock.core.semantics import OverheadEffect, OverheadRule, SelectionRule
from shock.core.solver import SolverSpec
from shock.core.trace import Trace
from shock.engine.bench import bench_instance
from shock.engine.runner import RunOptions, build_request
from shock.lp.partition import PartitionedPolicy

JOBS = Trace((JobSpec(0, "ResNet-50 (batch size 16)", 1000),), "one job")


def test_the_built_in_presets_come_from_shocks_plugins() -> None:
    rows = {row.name: row for row in default_registry().listing() if row.kind == "preset"}
    assert {"default", "gavel", "shockwave", "synergy", "sia"} <= set(rows)
    for name in ("default", "gavel", "shockwave", "synergy", "sia"):
        assert rows[name].provider == "shock"
        assert rows[name].obj.name == name
        assert rows[name].description


def test_a_near_miss_says_did_you_mean() -> None:
    with pytest.raises(UnknownPluginError, match="did you mean 'shockwave'") as raised:
        build_request(RunOptions(preset="shockwav"), trace=JOBS)
    count = len(default_registry().names("preset"))
    assert f"`shock plugins` lists all {count}" in str(raised.value)


def test_the_cli_refuses_an_unknown_preset_in_one_line(tmp_path: Path) -> None:
    result = run_shock_wide("run", "--preset", "gavell", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "unknown preset 'gavell'; did you mean 'gavel'?" in lines[0]


class ThirdPartyPresets:
    """A package's plugin: a preset of its own simulator."""

    @hookimpl
    def register_presets(self, register: object) -> None:
        register(  # type: ignore[operator]
            Preset(
                name="my_simulator",
                description="test preset",
                round_length_s=600.0,
                min_allocation_interval_s=1800.0,
                hold_unallocated_jobs=True,
                placement_sensitive=False,
                gpus_per_server=4,
                selection="gavel",
                preemption_overhead_s=7.0,
                overhead_rule="missed_round",
                policy_options={"max_sum_throughput_perf": ("raw_throughput=true",)},
            )
        )

    @hookimpl
    def register_placements(self, register: object) -> None:
        first_fit = default_registry().get("placement", "first_fit")

        class Claims:
            name = "my_first_fit"
            description = "first_fit, the default of my_simulator"
            default_for_presets = ("my_simulator",)

            def __getattr__(self, attribute: str) -> object:
                return getattr(first_fit, attribute)

        register(Claims())  # type: ignore[operator]


def test_a_third_party_preset_sets_the_run() -> None:
    registry = PluginRegistry(load_plugins(extra_plugins=[ThirdPartyPresets()]))
    request = build_request(
        RunOptions(preset="my_simulator", policy="max_sum_throughput_perf"), registry, JOBS
    )
    assert request.config.preset == "my_simulator"
    assert request.config.mechanism.round_length_s == 600.0
    assert request.config.mechanism.min_allocation_interval_s == 1800.0
    assert request.config.mechanism.selection is SelectionRule.GAVEL
    assert request.config.overhead_rule is OverheadRule.MISSED_ROUND
    assert request.config.preemption_overhead_s == 7.0
    assert request.cluster.servers()[0].num_gpus == 4
    assert request.placement.name == "my_first_fit"
    assert request.policy.options.raw_throughput
    # Options override the preset's values.
    overridden = build_request(
        RunOptions(
            preset="my_simulator",
            policy="max_sum_throughput_perf",
            round_length_s=60.0,
            policy_options=("raw_throughput=false",),
        ),
        registry,
        JOBS,
    )
    assert overridden.config.mechanism.round_length_s == 60.0
    assert not overridden.policy.options.raw_throughput


def test_a_preset_with_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="overhead_effect must be one of late_start, fewer_steps"):
        Preset("p", "", 1.0, 0.0, False, False, 1, "deficit", overhead_effect="slower")
    with pytest.raises(ValueError, match="selection must be one of deficit, gavel"):
        MechanismConfig(selection="random")  # type: ignore[arg-type]


def test_run_config_takes_text_and_keeps_members() -> None:
    config = RunConfig(MechanismConfig(), overhead_effect="fewer_steps")  # type: ignore[arg-type]
    assert config.overhead_effect is OverheadEffect.FEWER_STEPS
    assert config.overhead_effect == "fewer_steps"


class SummedObjective(Policy):
    """Every job gets 1/m of every type; the objective is the number of jobs."""

    name = "summed_objective"
    description = "test policy"
    part_objectives = PartObjectives.SUM

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(int(j) for j in problem.job_ids)
        fractions = np.full((len(keys), len(problem.worker_types)), 0.0)
        return Allocation(keys, problem.worker_types, fractions, objective=float(len(keys)))


def test_partitioning_combines_objectives_as_the_policy_declares() -> None:
    problem = bench_instance(20, seed=0)
    whole = PartitionedPolicy(SummedObjective(), 4, seed=0).allocate(problem, SolverSpec())
    assert whole.objective == 20.0
    undeclared = SummedObjective()
    undeclared.part_objectives = None
    allocation = PartitionedPolicy(undeclared, 4, seed=0).allocate(problem, SolverSpec())
    assert allocation.objective is None
