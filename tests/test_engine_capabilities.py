"""The core asks plugins what they can do instead of knowing them by name: a trace format
supplies its default throughputs, a backend says whether it simulates jobs, a placement says
which presets it is the default for, and worker types are ordered by the table's data."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shock.core.errors import InputError, ShockError
from shock.core.hookspecs import Register, hookimpl
from shock.core.model import JobSpec
from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.results import RunResult
from shock.core.run import RunRequest
from shock.core.throughputs import ThroughputTable, default_throughputs, throughputs_to_dict
from shock.core.trace import Trace
from shock.engine.presets import placement_for_preset
from shock.engine.runner import RunOptions, build_request
from shock.resources.throughputs import synergy_throughput_table


class Plugin:
    """Registers whatever it is given, by kind."""

    def __init__(self, **things: Any) -> None:
        self.things = things

    @hookimpl
    def register_trace_formats(self, register: Register) -> None:
        if "trace_format" in self.things:
            register(self.things["trace_format"])

    @hookimpl
    def register_backends(self, register: Register) -> None:
        if "backend" in self.things:
            register(self.things["backend"])

    @hookimpl
    def register_placements(self, register: Register) -> None:
        if "placement" in self.things:
            register(self.things["placement"])


def registry_with(**things: Any) -> PluginRegistry:
    return PluginRegistry(load_plugins(extra_plugins=[Plugin(**things)]))


def jobs(count: int = 3) -> tuple[JobSpec, ...]:
    job_type = "ResNet-18 (batch size 32)"
    return tuple(
        JobSpec(job_id=i, job_type=job_type, total_steps=1000, scale_factor=1, arrival_time=0.0)
        for i in range(count)
    )


# --------------------------------------------------------------------------- trace formats


class HalfSpeedFormat:
    """A format whose jobs run at half of the base table's speed, unless told otherwise."""

    name = "half_speed"
    description = "test format with its own default throughputs"

    def __init__(self) -> None:
        self.asked_for: tuple[str, ...] = ()

    def sniff(self, first_line: str) -> bool:
        return False

    def read(self, path: Path) -> Trace:
        raise NotImplementedError

    def write(self, jobs: Any, path: Path) -> None:
        raise NotImplementedError

    def default_throughputs(
        self, trace: Trace, worker_types: tuple[str, ...], base: ThroughputTable
    ) -> ThroughputTable:
        self.asked_for = worker_types
        halved = ThroughputTable(source="half speed")
        for (job_type, scale), per_type in base.isolated.items():
            for worker_type, rate in per_type.items():
                halved.set(job_type, scale, worker_type, rate / 2)
        return halved


def test_a_trace_format_supplies_its_default_throughputs() -> None:
    fmt = HalfSpeedFormat()
    registry = registry_with(trace_format=fmt)
    trace = Trace(jobs(), format="half_speed")
    request = build_request(RunOptions(cluster="v100=2,k80=2"), registry, trace)
    assert request.table.source == "half speed"
    assert fmt.asked_for == ("k80", "v100")
    job_type = jobs()[0].job_type
    base = default_throughputs().throughput(job_type, 1, "v100")
    assert request.table.throughput(job_type, 1, "v100") == pytest.approx(base / 2)


def test_given_throughputs_win_over_the_formats_default(tmp_path: Path) -> None:
    registry = registry_with(trace_format=HalfSpeedFormat())
    path = tmp_path / "table.json"
    path.write_text(json.dumps(throughputs_to_dict(default_throughputs())))
    trace = Trace(jobs(), format="half_speed")
    request = build_request(RunOptions(throughputs=str(path)), registry, trace)
    assert request.table.source == str(path)


def test_a_format_without_a_default_gets_gavels_table() -> None:
    request = build_request(RunOptions(), trace=Trace(jobs(), format="gavel"))
    assert request.table is default_throughputs()


def test_synergy_traces_get_synergys_table_ordered_like_the_base() -> None:
    registry = PluginRegistry(load_plugins())
    synergy_jobs = tuple(replace(job, job_type="res18") for job in jobs())
    request = build_request(
        RunOptions(cluster="v100=8,k80=8", preset="synergy"),
        registry,
        Trace(synergy_jobs, format="synergy"),
    )
    assert "iteration times" in request.table.source
    rates = {w: request.table.throughput("res18", 1, w) for w in ("k80", "v100")}
    assert rates["k80"] == rates["v100"] > 0  # Synergy's profiles ignore the GPU type
    # The profiles cannot order the types, so the base table's order stands.
    assert request.table.fastest_first(("k80", "v100")) == ("v100", "k80")


# --------------------------------------------------------------------------- backends


class RealJobsBackend:
    name = "real_jobs"
    description = "test backend that runs real jobs"
    simulates_jobs = False

    def run(self, request: RunRequest) -> RunResult:
        raise NotImplementedError


def test_a_backend_of_real_jobs_refuses_simulated_adaptation_rules() -> None:
    registry = registry_with(backend=RealJobsBackend())
    options = RunOptions(backend="real_jobs", adaptation_rules="artifact-simulator")
    with pytest.raises(InputError, match="simulator only"):
        build_request(options, registry, Trace(jobs()))
    build_request(replace(options, adaptation_rules="profile"), registry, Trace(jobs()))


def test_the_simulator_takes_simulated_adaptation_rules() -> None:
    build_request(RunOptions(adaptation_rules="artifact-simulator"), trace=Trace(jobs()))


# --------------------------------------------------------------------------- presets


@pytest.mark.parametrize("preset", ["default", "gavel", "shockwave", "synergy"])
def test_every_preset_has_exactly_one_default_placement(preset: str) -> None:
    registry = PluginRegistry(load_plugins())
    placement = placement_for_preset(preset, registry)
    assert preset in placement.default_for_presets
    request = build_request(RunOptions(preset=preset), registry, Trace(jobs()))
    assert request.placement is placement


class GavelLikePlacement:
    name = "gavel_like"
    description = "test placement that claims the gavel preset"
    extends_leases = False
    default_for_presets = ("gavel",)

    def place(self, servers: list[list[int]], requests: list[Any]) -> dict[Any, Any]:
        raise NotImplementedError


def test_two_placements_claiming_a_preset_is_an_error_naming_both() -> None:
    registry = registry_with(placement=GavelLikePlacement())
    with pytest.raises(ShockError) as error:
        build_request(RunOptions(preset="gavel"), registry, Trace(jobs()))
    message = str(error.value)
    assert "'first_fit' (from shock)" in message and "'gavel_like'" in message
    assert "--placement" in message
    # Naming one settles it.
    chosen = build_request(
        RunOptions(preset="gavel", placement="gavel_like"), registry, Trace(jobs())
    )
    assert chosen.placement.name == "gavel_like"


def test_a_preset_no_placement_claims_is_an_error() -> None:
    with pytest.raises(ShockError, match="no installed placement is the default"):
        placement_for_preset("nobodys", PluginRegistry(load_plugins()))


# --------------------------------------------------------------------------- worker types


def table_of(rates: dict[str, list[float]], ranking: tuple[str, ...] = ()) -> ThroughputTable:
    table = ThroughputTable(ranking=ranking)
    for worker_type, per_job in rates.items():
        for job, rate in enumerate(per_job):
            table.set(f"job{job}", 1, worker_type, rate)
    return table


def test_worker_types_are_ordered_fastest_first_by_the_data() -> None:
    assert default_throughputs().fastest_first() == ("v100", "p100", "k80")
    # A table where the "k80" is the fast one puts it first.
    table = table_of({"k80": [4.0, 8.0], "v100": [1.0, 2.0], "t4": [2.0, 2.0]})
    assert table.fastest_first() == ("k80", "t4", "v100")
    # Types the table lacks come last, by name.
    assert table.fastest_first(("v100", "zz", "aa", "k80")) == ("k80", "v100", "aa", "zz")


def test_ties_keep_the_tables_ranking_then_name_order() -> None:
    rates = {"a": [1.0, 2.0], "b": [1.0, 2.0], "c": [1.0, 2.0]}
    assert table_of(rates).fastest_first() == ("a", "b", "c")
    assert table_of(rates, ranking=("c", "a")).fastest_first() == ("c", "a", "b")


def test_a_job_measured_on_some_types_only_does_not_decide_the_order() -> None:
    table = table_of({"x": [1.0], "y": [2.0]})
    table.set("only_on_x", 1, "x", 1000.0)
    assert table.fastest_first() == ("y", "x")


def test_gavels_colon_form_follows_the_bundled_tables_order() -> None:
    from shock.engine.cluster_spec import parse_cluster

    cluster = parse_cluster("3:2:1")
    order = default_throughputs().fastest_first()
    assert [cluster.gpus_per_type[w] for w in order] == [3, 2, 1]
    with pytest.raises(InputError, match="V100:P100:K80"):
        parse_cluster("1:2")


def test_a_derived_synergy_table_keeps_the_fallbacks_order() -> None:
    fallback = table_of({"fast": [9.0], "slow": [1.0]})
    derived = synergy_throughput_table(
        [replace(jobs(1)[0], job_type="res18")], ("slow", "fast"), fallback
    )
    assert derived.fastest_first(("slow", "fast")) == ("fast", "slow")
