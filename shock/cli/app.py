"""The `shock` command line.

Commands other than `run`, `plugins` and `version` live in their own modules, listed in
COMMANDS and GROUPS; a command line imports only the module of the command it names (all of
them for `shock --help` or a name it does not know), so `shock run` starts without the
cluster service, trace importers, figures and the rest.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from shock import __version__
from shock.cli.backend_args import RunCommand, extra_option_items
from shock.cli.output import plugins_table, print_run_header, summary_table
from shock.cli.progress import (
    ProgressLines,
    ProgressObserver,
    wants_progress,
    wants_progress_lines,
)
from shock.core.errors import InputError, ShockError, ShockWarning
from shock.core.plugins import default_registry
from shock.core.results import document_text
from shock.engine.runner import DEFAULT_CLUSTER, DEFAULT_POLICY, RunOptions, parse_window, run
from shock.engine.throughput_estimator import EstimatorOptions

# Sub-applications (name, module, Typer object) and commands (name, module, function), in the
# order `shock --help` lists them, before this module's own run, plugins and version.
GROUPS: tuple[tuple[str, str, str], ...] = (
    ("trace", "shock.cli.trace_commands", "trace_app"),
    ("bench", "shock.cli.bench_commands", "bench_app"),
)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("profile", "shock.cli.profile_commands", "profile_command"),
    ("serve", "shock.cli.cluster_commands", "serve_command"),
    ("worker", "shock.cli.cluster_commands", "worker_command"),
    ("clusters", "shock.cli.cluster_list_commands", "clusters_command"),
    ("traces", "shock.cli.trace_list_commands", "traces_command"),
    ("submit", "shock.cli.job_commands", "submit_command"),
    ("jobs", "shock.cli.job_commands", "jobs_command"),
    ("cancel", "shock.cli.job_commands", "cancel_command"),
    ("logs", "shock.cli.job_commands", "logs_command"),
    ("watch", "shock.cli.job_commands", "watch_command"),
    ("users", "shock.cli.job_commands", "users_command"),
    ("sweep", "shock.cli.sweep_commands", "sweep_command"),
    ("plot", "shock.cli.plot_commands", "plot_command"),
    ("report", "shock.cli.plot_commands", "report_command"),
    ("compare", "shock.cli.compare_commands", "compare_command"),
)

OWN_COMMANDS = ("run", "plugins", "version")


def _loaded(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def build_app(command: str | None = None) -> typer.Typer:
    """The `shock` application: with `command` one of COMMANDS or GROUPS, only that one
    besides run, plugins and version (whose help and behaviour are the same); else all."""
    wanted = {name for name, _, _ in (*GROUPS, *COMMANDS)}
    if command in OWN_COMMANDS:
        wanted = set()
    elif command in wanted:
        wanted = {command}
    built = typer.Typer(
        name="shock",
        help="Plugin-based scheduler and simulator for deep-learning GPU clusters.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, module, attribute in GROUPS:
        if name in wanted:
            built.add_typer(_loaded(module, attribute), name=name)
    for name, module, attribute in COMMANDS:
        if name in wanted:
            built.command(name)(_loaded(module, attribute))
    built.command(
        "run",
        cls=RunCommand,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(run_command)
    built.command("plugins")(plugins_command)
    built.command("version")(version_command)
    return built


def __getattr__(name: str) -> typer.Typer:
    """`app`: every command (what tests and documentation tools import)."""
    if name == "app":
        every = build_app()
        globals()["app"] = every
        return every
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_console(stderr: bool = False) -> Console:
    """A console per command, so the terminal width (or COLUMNS) is read when it prints."""
    return Console(stderr=stderr, emoji=False)


def run_command(
    ctx: typer.Context,
    policy: Annotated[
        str, typer.Option(help="Policy name (see `shock plugins`).")
    ] = DEFAULT_POLICY,
    backend: Annotated[str, typer.Option(help="Backend name.")] = "simulator",
    trace: Annotated[
        Path | None, typer.Option(help="Trace file (Gavel or Shockwave format); default: bundled.")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="GPUs as V100:P100:K80 (e.g. 32:0:0) or v100=32,p100=4; or a cluster file "
            "(.toml) or bundled cluster name (see `shock clusters`). Default: the trace "
            f"format's (synergy-128 for Synergy traces), else {DEFAULT_CLUSTER}."
        ),
    ] = None,
    throughputs: Annotated[
        Path | None, typer.Option(help="Throughput table in Gavel's JSON format; default: bundled.")
    ] = None,
    solver: Annotated[
        str, typer.Option(help="highs (default), gurobi, scip, ipopt, cbc, glpk.")
    ] = "highs",
    seed: Annotated[int, typer.Option(help="Seed for every random choice of the run.")] = 0,
    round_length: Annotated[
        float | None, typer.Option(help="Round length in seconds (preset's if not given).")
    ] = None,
    min_allocation_interval: Annotated[
        float | None,
        typer.Option(
            help="Minimum seconds between allocation recomputations (preset's if not given)."
        ),
    ] = None,
    placement: Annotated[
        str | None, typer.Option(help="Placement plugin (preset's if not given).")
    ] = None,
    gpus_per_server: Annotated[
        int | None, typer.Option(help="GPUs per server (preset's if not given).")
    ] = None,
    preemption_overhead: Annotated[
        float | None, typer.Option(help="Seconds lost when a job restarts on other GPUs.")
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(help="Measure jobs with ids START:END (and stop once they finish)."),
    ] = None,
    preset: Annotated[
        str,
        typer.Option(
            help="Semantics preset: default, gavel, shockwave, synergy or an installed "
            "plugin's (`shock plugins` lists them)."
        ),
    ] = "default",
    adaptation_rules: Annotated[
        str | None,
        typer.Option(
            help="How Accordion/GNS batch sizes evolve: profile (Shockwave's profile rules) "
            "or artifact-simulator (Shockwave's round-by-round simulator); the preset's "
            "if not given (artifact-simulator for shockwave, else profile)."
        ),
    ] = None,
    time_limit: Annotated[
        float | None, typer.Option(help="Solver time limit per allocation (s).")
    ] = None,
    partitions: Annotated[
        int,
        typer.Option(
            help="POP partitioning: solve the policy on K random job groups, each on 1/K of "
            "every worker type (1: off)."
        ),
    ] = 1,
    prices: Annotated[
        str | None,
        typer.Option(
            help="Price of a GPU-hour per type for cost-aware policies: v100=2.48,k80=0.45."
        ),
    ] = None,
    policy_option: Annotated[
        list[str] | None,
        typer.Option(
            help="A policy option as KEY=VALUE (repeatable), e.g. --policy-option k=0.1; "
            "see docs/policies.md for each policy's options."
        ),
    ] = None,
    entities: Annotated[
        str | None,
        typer.Option(
            help="Entities (users) for hierarchical policies: names a,b,c or a count; jobs "
            "are assigned round-robin in job-id order."
        ),
    ] = None,
    entity_weights: Annotated[
        str | None,
        typer.Option(help="Entity weights a=1,b=2 (others weigh 1); alone, also the entities."),
    ] = None,
    estimate_throughputs: Annotated[
        str,
        typer.Option(
            help="Throughputs the policy sees: off (the table's), unknown (job types the "
            "table lacks estimated by Gavel's estimator), all (the table hidden from the "
            "policy, every type estimated from a partial profile; the simulator runs jobs "
            "at the table's rates and reports them, so estimates are refined as jobs run)."
        ),
    ] = "off",
    profiling_fraction: Annotated[
        float,
        typer.Option(
            help="With --estimate-throughputs all: share of a job's profile entries "
            "(co-located with each reference job, per worker type) that are measured."
        ),
    ] = 1.0,
    reference_types: Annotated[
        int | None,
        typer.Option(help="How many of the table's job types are reference types (all).")
    ] = None,
    profile_isolated: Annotated[
        bool,
        typer.Option(
            help="With --estimate-throughputs all: every job is measured alone on every "
            "worker type (Gavel's experiment); --no-profile-isolated samples those too."
        ),
    ] = True,
    profile: Annotated[
        Path | None,
        typer.Option(
            help="What was measured of job types the table lacks (Gavel's JSON, possibly "
            "partial, e.g. from `shock profile`); implies --estimate-throughputs unknown."
        ),
    ] = None,
    start_costs: Annotated[
        Path | None,
        typer.Option(
            help="Start costs measured by `shock profile --start-costs`: each job type loses "
            "its launch, checkpoint and restore seconds at every (re)start, the first too."
        ),
    ] = None,
    goodput_profiles: Annotated[
        Path | None,
        typer.Option(
            help="Folder of measured per-GPU-type goodput profiles (Sia's sia-simulator/traces "
            "layout): elastic jobs run at their GPU type's measured goodput, and sia plans "
            "with them. Default: Pollux's bundled models on every GPU type."
        ),
    ] = None,
    goodput_calibration: Annotated[
        bool,
        typer.Option(
            help="With --goodput-profiles: stretch the measured step times by Sia's "
            "calibration factors, as its simulator does."
        ),
    ] = True,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the results document here ('-': stdout, no table)."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write the run's figures (PNG) into this directory after the run."),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    backend_option: Annotated[
        list[str] | None,
        typer.Option(
            help="An option of the backend as KEY=VALUE (repeatable); the backend's options "
            "are also long options (--local-workers 2): see `shock run --backend NAME --help`."
        ),
    ] = None,
) -> None:
    """Run a policy on a trace and print a summary."""
    registry = default_registry()
    # The backend's own options: --backend-option KEY=VALUE and the long options `shock run`
    # does not know itself (--local-workers 2), checked against the backend's options_type.
    backend_items = [
        *(backend_option or ()),
        *extra_option_items(ctx.args, registry.get("backend", backend)),
    ]
    options = RunOptions(
        policy=policy,
        backend=backend,
        trace=str(trace) if trace else None,
        cluster=cluster,
        throughputs=str(throughputs) if throughputs else None,
        solver=solver,
        seed=seed,
        preset=preset,
        round_length_s=round_length,
        min_allocation_interval_s=min_allocation_interval,
        placement=placement,
        gpus_per_server=gpus_per_server,
        preemption_overhead_s=preemption_overhead,
        window=parse_window(window),
        time_limit_s=time_limit,
        partitions=partitions,
        prices=prices,
        policy_options=tuple(policy_option or ()),
        entities=entities,
        entity_weights=entity_weights,
        adaptation_rules=adaptation_rules,
        backend_options=tuple(backend_items),
        estimate_throughputs=estimate_throughputs,
        estimator=estimator_options(
            profiling_fraction, reference_types, profile_isolated, seed
        ),
        profile=str(profile) if profile else None,
        start_costs=str(start_costs) if start_costs else None,
        goodput_profiles=str(goodput_profiles) if goodput_profiles else None,
        goodput_calibration=goodput_calibration,
    )
    console = make_console()
    json_to_stdout = json_path is not None and str(json_path) == "-"
    observer: ProgressObserver | ProgressLines | None = None
    if wants_progress(quiet, json_to_stdout):
        observer = ProgressObserver(make_console(stderr=True))
    elif wants_progress_lines(quiet, json_to_stdout):
        observer = ProgressLines(sys.stderr)
    if observer is not None:
        registry.manager.register(observer)
    try:
        result = run(options, registry)
    finally:
        if observer is not None:
            registry.manager.unregister(observer)
    if json_to_stdout:
        sys.stdout.write(document_text(result.to_document()))
        return
    print_run_header(console, result)
    console.print(summary_table(result))
    if json_path is not None:
        result.write_json(json_path)
        console.print(f"results written to {json_path}")
    if plot is not None:
        from shock.results.figures.one_run import write_run_figures

        written = write_run_figures(result.to_document(), plot, result.policy)
        console.print(f"{len(written)} figures written to {plot}")


def estimator_options(
    profiling_fraction: float, reference_types: int | None, profile_isolated: bool, seed: int
) -> EstimatorOptions:
    try:
        return EstimatorOptions(
            profiling_fraction=profiling_fraction,
            reference_types=reference_types,
            profile_isolated=profile_isolated,
            seed=seed,
        )
    except ValueError as exc:
        raise InputError(str(exc), field="--profiling-fraction/--reference-types") from exc


def plugins_command() -> None:
    """List every installed plugin: kind, name, providing package, description."""
    make_console().print(plugins_table(default_registry()))


def version_command() -> None:
    """Print shock's version."""
    make_console().print(__version__)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """shock's own warnings as one plain line on stderr; others as Python prints them."""
    if issubclass(category, ShockWarning):
        make_console(stderr=True).print(
            f"[bold yellow]warning:[/] {escape(str(message))}", highlight=False, soft_wrap=True
        )
        return
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main() -> None:
    warnings.showwarning = _show_warning
    try:
        build_app(sys.argv[1] if len(sys.argv) > 1 else None)()
    except ShockError as exc:
        make_console(stderr=True).print(
            f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        sys.exit(2)
