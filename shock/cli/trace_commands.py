"""`shock trace generate` and `shock trace info`."""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from shock.cli.synergy_commands import synergy_trace_command
from shock.cli.trace_import_commands import convert_command, import_command
from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs, load_throughputs
from shock.core.trace import read_trace, write_trace
from shock.engine.epochs import epoch_profile, num_epochs
from shock.traces.generator import WorkloadConfig, generate_jobs
from shock.traces.shockwave_generator import DynamicWorkloadConfig, generate_dynamic_jobs

trace_app = typer.Typer(help="Generate and inspect traces.", no_args_is_help=True)


@trace_app.command("generate")
def generate_command(
    output: Annotated[Path, typer.Argument(help="Trace file to write.")],
    jobs: Annotated[int, typer.Option(help="Number of jobs.")] = 100,
    rate: Annotated[
        float | None, typer.Option(help="Poisson arrival rate in jobs/hour; omit for all at t=0.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed (Gavel's streams: seed+2, seed+3).")] = 0,
    multi_gpu: Annotated[
        bool, typer.Option(help="Draw scale factors 1/2/4/8 (70/10/15/5%).")
    ] = False,
    multi_priority: Annotated[
        bool, typer.Option(help="20% of jobs get priority weight 5.")
    ] = False,
    fixed_duration: Annotated[
        float | None, typer.Option(help="Every job runs this long (s).")
    ] = None,
    throughputs: Annotated[Path | None, typer.Option(help="Throughput table (Gavel JSON).")] = None,
    format_name: Annotated[str, typer.Option("--format", help="gavel or shockwave.")] = "gavel",
) -> None:
    """Generate a trace with Gavel's workload model."""
    if jobs < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--jobs")
    if rate is not None and rate < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--rate")
    table = load_throughputs(throughputs) if throughputs else default_throughputs()
    config = WorkloadConfig(
        num_jobs=jobs,
        jobs_per_hour=rate,
        seed=seed,
        multi_gpu=multi_gpu,
        multi_priority=multi_priority,
        fixed_duration_s=fixed_duration,
    )
    generated = generate_jobs(config, table)
    write_trace(generated, output, default_registry(), format_name)
    Console(emoji=False).print(f"wrote {len(generated)} jobs to {output}")


def _mix(text: str, count: int, option: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        values = ()
    if len(values) != count or any(v < 0 for v in values) or sum(values) <= 0:
        raise typer.BadParameter(
            f"expected {count} comma-separated non-negative shares, got '{text}'",
            param_hint=option,
        )
    return values


@trace_app.command("generate-dynamic")
def generate_dynamic_command(
    output: Annotated[Path, typer.Argument(help="Trace file to write (Shockwave format).")],
    jobs: Annotated[int, typer.Option(help="Number of jobs.")] = 120,
    interarrival: Annotated[
        float,
        typer.Option(help="Mean seconds between arrivals (Shockwave's lambda; 0: all at t=0)."),
    ] = 40.0,
    rate: Annotated[
        float | None,
        typer.Option(help="Arrival rate in jobs/hour instead of --interarrival (0: all at t=0)."),
    ] = None,
    min_duration: Annotated[float, typer.Option(help="Shortest run time alone (s).")] = 720.0,
    max_duration: Annotated[float, typer.Option(help="Longest run time alone (s).")] = 18000.0,
    num_durations: Annotated[
        int, typer.Option(help="Number of run-time values between the shortest and longest.")
    ] = 100,
    duration_spacing: Annotated[
        str, typer.Option(help="Spacing of the run-time values: linear or log (powers of 1.5).")
    ] = "linear",
    scale_factor_mix: Annotated[
        str,
        typer.Option(help="Shares of distributed jobs on 1,2,4,8 GPUs (the others run on 1)."),
    ] = "0.6,0.3,0.09,0.01",
    mode_mix: Annotated[
        str, typer.Option(help="Shares of static,accordion,gns jobs.")
    ] = "0,0.5,0.5",
    durations_from: Annotated[
        Path | None,
        typer.Option(help="Draw run times from this Shockwave trace's duration column instead."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    throughputs: Annotated[Path | None, typer.Option(help="Throughput table (Gavel JSON).")] = None,
) -> None:
    """Generate a Shockwave-style trace of jobs that adapt their batch size."""
    samples: tuple[float, ...] = ()
    if durations_from is not None:
        sample_trace = read_trace(durations_from, default_registry())
        samples = tuple(j.duration for j in sample_trace.jobs if j.duration)
        if not samples:
            raise typer.BadParameter("the trace has no durations", param_hint="--durations-from")
    scale_mix = _mix(scale_factor_mix, 4, "--scale-factor-mix")
    modes = _mix(mode_mix, 3, "--mode-mix")
    try:
        config = DynamicWorkloadConfig(
            num_jobs=jobs,
            mean_interarrival_s=interarrival if rate is None else (3600.0 / rate if rate else 0.0),
            min_duration_s=min_duration,
            max_duration_s=max_duration,
            num_durations=num_durations,
            duration_spacing=duration_spacing,  # type: ignore[arg-type]  # checked by the config
            scale_factor_mix=(scale_mix[0], scale_mix[1], scale_mix[2], scale_mix[3]),
            mode_mix=(modes[0], modes[1], modes[2]),
            seed=seed,
            duration_samples=samples,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    table = load_throughputs(throughputs) if throughputs else default_throughputs()
    generated = generate_dynamic_jobs(config, table)
    write_trace(generated, output, default_registry(), "shockwave")
    Console(emoji=False).print(f"wrote {len(generated)} jobs to {output}")


@trace_app.command("profile")
def profile_command(
    path: Annotated[Path, typer.Argument(help="Trace file (Shockwave format).")],
    throughputs: Annotated[Path | None, typer.Option(help="Throughput table (Gavel JSON).")] = None,
    worker_type: Annotated[str, typer.Option(help="Worker type of the durations.")] = "v100",
) -> None:
    """Per-job epoch profile: epochs, batch size by epoch, run time alone at that schedule."""
    registry = default_registry()
    trace = read_trace(path, registry)
    table = load_throughputs(throughputs) if throughputs else default_throughputs()
    out = Table(title=f"{path}: epoch profiles on {worker_type}")
    for column in ("job", "job type", "sf", "mode", "epochs", "batch sizes", "alone (s)"):
        out.add_column(column, justify="left" if column in ("job type", "batch sizes") else "right")
    for job in trace.jobs:
        epochs = num_epochs(job, trace.source)
        sizes = registry.get("adaptation", job.mode).batch_sizes(job, epochs)
        profile = epoch_profile(job, sizes, table, worker_type, trace.source)
        runs = [f"{len(list(group))}×{size}" for size, group in groupby(sizes)]
        out.add_row(
            str(job.job_id), job.job_type, str(job.scale_factor), job.mode, str(epochs),
            ", ".join(runs), f"{profile.total_s:,.0f}",
        )
    Console(emoji=False).print(out)


@trace_app.command("info")
def info_command(path: Annotated[Path, typer.Argument(help="Trace file.")]) -> None:
    """Summarise a trace: jobs, arrivals, scale factors, job types, modes."""
    trace = read_trace(path, default_registry())
    jobs = trace.jobs
    table = Table(title=f"{path} ({trace.format} format)", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("jobs", str(len(jobs)))
    if jobs:
        arrivals = [j.arrival_time for j in jobs]
        table.add_row("arrivals", f"{min(arrivals):,.0f} s – {max(arrivals):,.0f} s")
        span_h = (max(arrivals) - min(arrivals)) / 3600
        if span_h > 0:
            table.add_row("arrival rate", f"{(len(jobs) - 1) / span_h:.2f} jobs/h")
        table.add_row("total steps", f"{sum(j.total_steps for j in jobs):,}")
        table.add_row("scale factors", _counts(Counter(j.scale_factor for j in jobs)))
        table.add_row("priority weights", _counts(Counter(j.priority_weight for j in jobs)))
        table.add_row("modes", _counts(Counter(j.mode for j in jobs)))
        table.add_row("model families", _counts(Counter(j.model_family for j in jobs)))
    Console(emoji=False).print(table)


def _counts(counter: Counter[object]) -> str:
    return ", ".join(f"{key}: {count}" for key, count in sorted(counter.items(), key=str))


# Synergy's generator, public production traces in, shock traces between formats.
trace_app.command("synergy")(synergy_trace_command)
trace_app.command("import")(import_command)
trace_app.command("convert")(convert_command)
