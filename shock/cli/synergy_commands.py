"""`shock trace synergy`: a trace from Synergy's workload model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from shock.core.plugins import default_registry
from shock.core.trace import write_trace


def synergy_trace_command(
    output: Annotated[Path, typer.Argument(help="Trace file to write.")],
    jobs: Annotated[int, typer.Option(help="Number of jobs.")] = 300,
    rate: Annotated[
        float, typer.Option(help="Poisson arrival rate in jobs/hour; 0 for all at t=0.")
    ] = 9.0,
    split: Annotated[
        str, typer.Option(help="Image,language,speech shares in percent.")
    ] = "20,70,10",
    single_gpu: Annotated[
        bool, typer.Option(help="Every job on 1 GPU (default: 1/2/4/8 at 70/10/15/5%).")
    ] = False,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    format_name: Annotated[
        str, typer.Option("--format", help="synergy (CSV), gavel or shockwave.")
    ] = "synergy",
) -> None:
    """Generate a trace with Synergy's workload model (models from its profiled zoo)."""
    # Imported here: every other command starts without the generator's model zoo.
    from shock.traces.synergy_generator import SynergyWorkload, generate_synergy_jobs

    if jobs < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--jobs")
    if rate < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--rate")
    try:
        shares = tuple(float(part) for part in split.split(","))
    except ValueError:
        shares = ()
    if len(shares) != 3 or min(shares) < 0 or sum(shares) <= 0:
        raise typer.BadParameter("three shares >= 0, e.g. 20,70,10", param_hint="--split")
    workload = SynergyWorkload(
        num_jobs=jobs,
        jobs_per_hour=rate,
        class_split=(shares[0], shares[1], shares[2]),
        multi_gpu=not single_gpu,
        seed=seed,
    )
    generated = generate_synergy_jobs(workload)
    write_trace(generated, output, default_registry(), format_name)
    Console(emoji=False).print(f"wrote {len(generated)} jobs to {output}")
