"""`shock trace import` (public production traces to a shock trace) and `shock trace convert`
(one shock trace format to another)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs, load_throughputs
from shock.core.trace import read_trace, write_trace
from shock.traces.importers import import_trace
from shock.traces.importers.shaping import (
    ENTITY_CHOICES,
    MODEL_CHOICES,
    SAMPLE_CHOICES,
    ShapeOptions,
)

# Formats that carry what an import may give a job beyond Gavel's columns.
_CSV_FORMATS = ("synergy", "synergy-record")


def output_format(output: Path, to: str | None) -> str:
    """The format `--to` names, else the one the file's extension implies (.csv: Synergy's
    CSV with a header; anything else: Gavel's trace)."""
    if to is not None:
        known = default_registry().names("trace format")
        if to not in known:
            raise InputError(f"'{to}' is not one of {', '.join(known)}", field="--to")
        return to
    return "synergy" if output.suffix.lower() == ".csv" else "gavel"


def _choice(value: str, allowed: tuple[str, ...], option: str) -> str:
    if value not in allowed:
        raise InputError(f"expected one of {', '.join(allowed)}, got '{value}'", field=option)
    return value


def import_command(
    format_name: Annotated[
        str, typer.Argument(
            metavar="FORMAT",
            help="philly, helios, pai2020, alibaba2023 (or an installed importer plugin).",
        )
    ],
    files: Annotated[list[Path], typer.Argument(help="The trace's file(s).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Trace file to write.")],
    to: Annotated[
        str | None,
        typer.Option(help="Output format (gavel, synergy, ...); default: by extension."),
    ] = None,
    jobs: Annotated[int | None, typer.Option(help="Keep N jobs (see --sample).")] = None,
    sample: Annotated[
        str, typer.Option(help="How --jobs picks: uniform, window (N consecutive), busiest.")
    ] = "uniform",
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    models: Annotated[
        str, typer.Option(help="gpu-time-class, random-gavel or random-synergy.")
    ] = "gpu-time-class",
    entity: Annotated[str, typer.Option(help="Entities from: user, vc or none.")] = "none",
    status: Annotated[
        str | None,
        typer.Option(help="Comma-separated statuses to keep, or any (default: per format)."),
    ] = None,
    attempts: Annotated[
        str,
        typer.Option(help="Philly: the last attempt's run time, the sum, or each one a job."),
    ] = "last",
    rate: Annotated[
        float | None,
        typer.Option(help="Re-draw arrivals at this Poisson rate (jobs/hour; 0: all at t=0)."),
    ] = None,
    min_duration: Annotated[float | None, typer.Option(help="Drop jobs shorter (s).")] = None,
    max_duration: Annotated[float | None, typer.Option(help="Drop jobs longer (s).")] = None,
    max_gpus: Annotated[int | None, typer.Option(help="Drop jobs on more GPUs.")] = None,
    odd_gpus: Annotated[
        str, typer.Option(help="GPU counts not a power of two: down, one or drop.")
    ] = "down",
    fractional: Annotated[
        str, typer.Option(help="A fraction of a GPU: ceil (a whole GPU) or drop.")
    ] = "ceil",
    worker_type: Annotated[
        str, typer.Option(help="GPU type whose throughputs turn run times into steps.")
    ] = "v100",
    throughputs: Annotated[Path | None, typer.Option(help="Throughput table (Gavel JSON).")] = None,
) -> None:
    """Import a public production trace (Philly, Helios, PAI 2020, Alibaba 2023)."""
    target = output_format(output, to)
    options = ShapeOptions(
        num_jobs=jobs,
        seed=seed,
        sample=_choice(sample, SAMPLE_CHOICES, "--sample"),  # type: ignore[arg-type]
        models=_choice(models, MODEL_CHOICES, "--models"),  # type: ignore[arg-type]
        entity=_choice(entity, ENTITY_CHOICES, "--entity"),  # type: ignore[arg-type]
        jobs_per_hour=rate,
        min_duration_s=min_duration,
        max_duration_s=max_duration,
        max_gpus=max_gpus,
        odd_gpus=_choice(odd_gpus, ("down", "one", "drop"), "--odd-gpus"),  # type: ignore[arg-type]
        fractional=_choice(fractional, ("ceil", "drop"), "--fractional"),  # type: ignore[arg-type]
        worker_type=worker_type,
    )
    if target not in _CSV_FORMATS:
        if entity != "none":
            raise InputError(
                f"a {target} trace carries no entities; write a Synergy CSV (-o x.csv) or use "
                "--entity none",
                field="--entity",
            )
        if models == "random-synergy":
            raise InputError(
                f"Synergy's models need Synergy's throughputs: write a Synergy CSV (-o x.csv), "
                f"not a {target} trace",
                field="--models",
            )
    statuses = tuple(s.strip() for s in status.split(",")) if status else None
    table = load_throughputs(throughputs) if throughputs else default_throughputs()
    imported, summary = import_trace(
        format_name, files, options, table, statuses=statuses, attempts=attempts
    )
    write_trace(imported, output, default_registry(), target)
    console = Console(emoji=False)
    dropped = ", ".join(f"{reason}: {count}" for reason, count in sorted(summary.dropped.items()))
    classes = ", ".join(f"{name}: {count}" for name, count in sorted(summary.classes.items()))
    console.print(f"read {summary.read} jobs; kept {summary.kept}", highlight=False)
    if dropped:
        console.print(f"dropped: {dropped}", highlight=False)
    console.print(f"models: {classes}", highlight=False)
    console.print(f"wrote {summary.written} jobs to {output} ({target} format)", highlight=False)
    if target not in _CSV_FORMATS and any(j.cpus or j.memory_gb for j in imported):
        console.print(
            f"note: a {target} trace has no columns for the jobs' CPU and memory requests; "
            "write a Synergy CSV (-o x.csv) to keep them",
            highlight=False,
        )


def convert_command(
    source: Annotated[Path, typer.Argument(help="Trace to read (format detected).")],
    output: Annotated[Path, typer.Argument(help="Trace to write.")],
    to: Annotated[
        str | None,
        typer.Option(
            help="gavel, shockwave, synergy (CSV with a header) or synergy-record (Synergy's "
            "own form, no header); default: by extension (.csv: synergy, else gavel)."
        ),
    ] = None,
) -> None:
    """Write a trace in another format."""
    registry = default_registry()
    trace = read_trace(source, registry)
    target = output_format(output, to)
    write_trace(trace.jobs, output, registry, target)
    Console(emoji=False).print(
        f"wrote {len(trace.jobs)} jobs from {source} ({trace.format}) to {output} ({target})",
        highlight=False,
    )
