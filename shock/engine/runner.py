"""Assemble a run from names and files: the one place the CLI and the benchmarks call."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from shock.core.backend_options import resolve_backend_options
from shock.core.errors import InputError, ShockWarning
from shock.core.plugins import PluginRegistry, default_registry
from shock.core.policy_options import parse_policy_options
from shock.core.presets import Preset
from shock.core.results import RunResult
from shock.core.run import ClusterRuntime, MechanismConfig, RunConfig, RunRequest
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs, load_throughputs
from shock.core.trace import Trace, default_cluster_for, default_throughputs_for, read_trace
from shock.engine.cluster_file import cluster_from_option
from shock.engine.cluster_spec import parse_prices
from shock.engine.entities import parse_entities
from shock.engine.presets import get_preset, placement_for_preset
from shock.engine.run_estimates import estimate_run_table
from shock.engine.start_costs import load_start_costs
from shock.engine.throughput_estimator import EstimatorOptions
from shock.goodput.profiles import read_profiles
from shock.lp.partition import PartitionedPolicy
from shock.util.suggest import did_you_mean

DEFAULT_TRACE = "max_min_fairness.trace"
# Gavel's physical cluster: 8 V100, 16 P100 and 24 K80 GPUs.
DEFAULT_CLUSTER = "v100=8,p100=16,k80=24"
DEFAULT_POLICY = "max_min_fairness_perf"


@dataclass(frozen=True, slots=True)
class RunOptions:
    policy: str = DEFAULT_POLICY
    backend: str = "simulator"
    trace: str | None = None  # None: the bundled default trace
    # None: the trace format's default cluster, else Gavel's physical cluster.
    cluster: str | None = None
    throughputs: str | None = None  # None: Gavel's bundled table
    solver: str = "highs"
    seed: int = 0
    preset: str = "default"
    round_length_s: float | None = None
    min_allocation_interval_s: float | None = None
    placement: str | None = None
    gpus_per_server: int | None = None
    preemption_overhead_s: float | None = None
    overhead_on_first_start: bool = False
    # Per job type, in place of preemption_overhead_s (types it lacks get that one).
    overhead_by_job_type: dict[str, float] | None = None
    window: tuple[int, int] | None = None
    time_limit_s: float | None = None
    # POP partitioning: solve the policy on this many random job groups (1: no partitioning).
    partitions: int = 1
    prices: str | None = None  # "v100=2.48,p100=1.46,k80=0.45" ($ per GPU-hour)
    # How backends that run real jobs run them (the grpc backend's options set it).
    cluster_runtime: ClusterRuntime = field(default_factory=ClusterRuntime)
    # The backend's own options: `key=value` texts (`--backend-option`, converted by the
    # backend's options_type) or an instance of its options_type.
    backend_options: object = ()
    # `key=value` options of the policy (`--policy-option`), converted by the policy.
    policy_options: tuple[str, ...] = ()
    entities: str | None = None  # "a,b" or a count: jobs assigned round-robin (entities.py)
    entity_weights: str | None = None  # "a=1,b=2"
    # An "adaptation rules" plugin ("profile", "artifact-simulator"); None: the preset's.
    adaptation_rules: str | None = None
    # Throughputs the policy sees: "off" (the table's), "unknown" (job types the table lacks
    # estimated by Gavel's estimator), "all" (the table hidden: every type estimated from a
    # partial profile; the simulator runs jobs at the table's rates and reports them).
    estimate_throughputs: str = "off"
    estimator: EstimatorOptions = field(default_factory=EstimatorOptions)
    # What was measured of job types the table lacks (a Gavel-format table, maybe partial).
    profile: str | None = None
    # `shock profile --start-costs` side file: each job type's launch, checkpoint and restore
    # seconds, charged at every (re)start, the first included.
    start_costs: str | None = None
    # Measured per-GPU-type goodput profiles (Sia's layout): elastic jobs run at their GPU
    # type's measured goodput, policies see the folder. None: Pollux's bundled models.
    goodput_profiles: str | None = None
    # Stretch the profiles' step times by Sia's calibration factors (its simulator's).
    goodput_calibration: bool = True


def bundled_trace_path(name: str = DEFAULT_TRACE) -> Path:
    return Path(str(resources.files("shock.data").joinpath("traces", name)))


def parse_window(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    start, sep, end = text.partition(":")
    try:
        window = (int(start), int(end))
    except ValueError:
        window = None
    if not sep or window is None or window[0] < 0 or window[1] <= window[0]:
        raise InputError(f"'{text}' is not START:END with 0 <= START < END", field="--window")
    return window


def build_request(
    options: RunOptions, registry: PluginRegistry | None = None, trace: Trace | None = None
) -> RunRequest:
    registry = registry or default_registry()
    backend = registry.get("backend", options.backend)
    backend_options = resolve_backend_options(backend, options.backend_options)
    adjust_run = getattr(backend_options, "adjust_run", None)
    if adjust_run is not None:
        options = adjust_run(options)  # e.g. the grpc backend's local workers: the cluster
    preset = get_preset(options.preset, registry)
    policy = registry.get("policy", options.policy)
    policy_options = {
        **parse_policy_options(preset.options_for(policy.name)),
        **parse_policy_options(options.policy_options),
    }
    if policy_options:
        policy = policy.with_options(policy_options)
    if options.partitions < 1:
        raise InputError(f"must be >= 1, got {options.partitions}", field="--partitions")
    if options.partitions > 1 and not policy.partitionable:
        raise InputError(
            f"policy '{policy.name}' plans whole rounds itself; it cannot be partitioned",
            field="--partitions",
        )
    if options.partitions > 1:
        policy = PartitionedPolicy(policy, options.partitions, seed=options.seed)
    if options.placement:
        placement = registry.get("placement", options.placement)
    else:
        placement = placement_for_preset(preset.name, registry)
    solver = SolverSpec(name=options.solver, time_limit_s=options.time_limit_s).resolved(registry)
    solver.check(policy.problem_class, policy.name)
    if trace is None:
        trace_path = options.trace or bundled_trace_path()
        trace = read_trace(trace_path, registry)
    _warn_past_the_trace(options.window, trace)
    entities = parse_entities(options.entities, options.entity_weights)
    if entities is not None:
        trace = replace(trace, jobs=entities.assign(trace.jobs))
    gpus_per_server = (
        preset.gpus_per_server if options.gpus_per_server is None else options.gpus_per_server
    )
    cluster_text = (
        options.cluster or preset.cluster or default_cluster_for(trace, registry) or DEFAULT_CLUSTER
    )
    cluster = cluster_from_option(cluster_text, gpus_per_server)
    if options.throughputs:
        table = load_throughputs(options.throughputs)
    else:
        table = default_throughputs_for(
            trace, registry, cluster.worker_types, default_throughputs()
        )
    unknown = [w for w in cluster.worker_types if w not in table.worker_types]
    if unknown:
        hints = [h for w in unknown if (h := did_you_mean(w, table.worker_types))]
        raise InputError(
            f"worker type(s) {', '.join(unknown)} not in the throughput table"
            + (f"; {' '.join(hints)}" if hints else "")
            + f" (it has {', '.join(table.worker_types)})",
            field="--cluster",
        )
    oracle = None
    if options.estimate_throughputs != "off" or options.profile is not None:
        profiles = load_throughputs(options.profile) if options.profile else None
        estimated = estimate_run_table(
            ((job.job_type, job.scale_factor) for job in trace.jobs),
            table,
            cluster.worker_types,
            "unknown" if options.estimate_throughputs == "off" else options.estimate_throughputs,
            options.estimator,
            profiles,
        )
        if estimated.estimates:  # else the table is the truth, as without estimation
            table, oracle = estimated.table, estimated.oracle

    def pick(value: float | None, default: float) -> float:
        return default if value is None else value

    mechanism = MechanismConfig(
        round_length_s=pick(options.round_length_s, preset.round_length_s),
        min_allocation_interval_s=pick(
            options.min_allocation_interval_s, preset.min_allocation_interval_s
        ),
        hold_unallocated_jobs=preset.hold_unallocated_jobs,
        placement_sensitive=preset.placement_sensitive,
        selection=preset.selection,
        seed=options.seed,
        reallocate_every_round=preset.reallocate_every_round,
        reallocate_on_batch_size_change=preset.reallocate_on_batch_size_change,
        overhead_counts_as_received=preset.overhead_counts_as_received,
        goodput_profiles=_goodput_profiles(options.goodput_profiles),
        goodput_calibration=options.goodput_calibration,
    )
    if mechanism.round_length_s <= 0:
        raise InputError("round length must be > 0", field="--round-length")
    if mechanism.min_allocation_interval_s < 0:
        raise InputError("must be >= 0", field="--min-allocation-interval")
    adaptation_rules = _adaptation_rules(options, preset, backend, registry)
    overhead = pick(options.preemption_overhead_s, preset.preemption_overhead_s)
    if overhead < 0:
        raise InputError("must be >= 0", field="--preemption-overhead")
    by_type = options.overhead_by_job_type
    if preset.overhead_by_job_type:
        by_type = {**preset.overhead_by_job_type, **(by_type or {})}
    first_start = options.overhead_on_first_start or preset.overhead_on_first_start
    if options.start_costs is not None:
        by_type = {**load_start_costs(options.start_costs, cluster.worker_types), **(by_type or {})}
        first_start = True
    config = RunConfig(
        mechanism=mechanism,
        preset=preset.name,
        window=options.window,
        preemption_overhead_s=overhead,
        overhead_on_first_start=first_start,
        overhead_by_job_type=_overheads(by_type),
        overhead_rule=preset.overhead_rule,
        overhead_effect=preset.overhead_effect,
        seed=options.seed,
        prices=_prices_for(options.prices, cluster.worker_types),
        cluster_runtime=options.cluster_runtime,
        rho_contention=preset.rho_contention,
        rho_alone=preset.rho_alone,
        entity_weights=None if entities is None else entities.weights,
        quantised_rounds=preset.quantised_rounds,
        adaptation_rules=adaptation_rules,
    )
    return RunRequest(
        trace, cluster, policy, placement, solver, table, config, registry, backend_options,
        oracle,
    )  # fmt: skip


def _adaptation_rules(
    options: RunOptions, preset: Preset, backend: object, registry: PluginRegistry
) -> str:
    """The rule set simulated batch sizes follow: `--adaptation-rules`, else the preset's."""
    # A backend that runs real jobs declares `simulates_jobs = False`; its jobs change their
    # batch size by their own Accordion/GNS logic, so a preset's rules do not apply to it.
    simulates = getattr(backend, "simulates_jobs", True)
    if options.adaptation_rules is None:
        return preset.adaptation_rules if simulates else "profile"
    rule_sets = registry.names("adaptation rules")
    if options.adaptation_rules not in rule_sets:
        raise InputError(
            f"'{options.adaptation_rules}' is not one of {', '.join(rule_sets)}",
            field="--adaptation-rules",
        )
    if options.adaptation_rules != "profile" and not simulates:
        raise InputError(
            "applies to the simulator only; real jobs adapt by themselves",
            field="--adaptation-rules",
        )
    return options.adaptation_rules


def _warn_past_the_trace(window: tuple[int, int] | None, trace: Trace) -> None:
    """A window that reaches past the trace's last job measures fewer jobs than it says."""
    if window is None or not trace.jobs:
        return
    last = max(job.job_id for job in trace.jobs)
    if window[1] > last + 1:
        inside = sum(window[0] <= job.job_id < window[1] for job in trace.jobs)
        warnings.warn(
            ShockWarning(
                f"--window {window[0]}:{window[1]} reaches past the trace's last job (id "
                f"{last}, {len(trace.jobs)} jobs): {inside} jobs are measured"
            ),
            stacklevel=3,
        )


def _goodput_profiles(folder: str | None) -> str | None:
    """The profiles' folder, read once here so that a bad file stops the run before it
    starts (with its file, line and column)."""
    if folder is not None:
        read_profiles(folder)
    return folder


def _overheads(by_type: dict[str, float] | None) -> dict[str, float] | None:
    if by_type is not None and any(not value >= 0 for value in by_type.values()):
        raise InputError("every per-type overhead must be >= 0", field="overhead_by_job_type")
    return by_type


def _prices_for(text: str | None, worker_types: tuple[str, ...]) -> dict[str, float] | None:
    if text is None:
        return None
    prices = parse_prices(text)
    missing = [w for w in worker_types if w not in prices]
    if missing:
        raise InputError(f"no price for {', '.join(missing)}", field="--prices")
    return prices


def run(options: RunOptions, registry: PluginRegistry | None = None) -> RunResult:
    registry = registry or default_registry()
    request = build_request(options, registry)
    backend = registry.get("backend", options.backend)
    result: RunResult = backend.run(request)
    return result
