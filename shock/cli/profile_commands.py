"""`shock profile`: measure workloads on this machine and write a Gavel-format throughput table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from shock.core.errors import ShockError
from shock.core.plugins import default_registry
from shock.core.throughputs import (
    ThroughputTable,
    load_throughputs,
    throughputs_to_dict,
)
from shock.core.trace import read_trace


def profile_command(
    output: Annotated[Path, typer.Option(help="Throughput table to write (Gavel's JSON).")] = Path(
        "throughputs.json"
    ),
    trace: Annotated[
        Path | None, typer.Option(help="Profile the job types of this trace.")
    ] = None,
    job_type: Annotated[
        list[str] | None,
        typer.Option(
            "--job-type", help='A job type to profile (repeatable), e.g. "LM (batch size 20)".'
        ),
    ] = None,
    gpu_type: Annotated[
        str, typer.Option(help="Worker type the measurements are labelled with.")
    ] = "v100",
    device: Annotated[str, typer.Option(help="cpu (simulated devices) or cuda:N.")] = "cpu",
    seconds: Annotated[float, typer.Option(help="Measured seconds per job type.")] = 1.0,
    warmup_steps: Annotated[int, typer.Option(help="Unmeasured steps first.")] = 3,
    threads: Annotated[int, typer.Option(help="torch threads (jobs get 1 by default).")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of weights and data.")] = 0,
    merge: Annotated[
        bool, typer.Option(help="Add to the table already at --output instead of replacing it.")
    ] = False,
    local_workers: Annotated[
        int,
        typer.Option(
            help="Measure through this many local worker agents (each job type one job in its "
            "own process, as many at once as the workers have GPUs); 0: in this process."
        ),
    ] = 0,
    gpus_per_worker: Annotated[
        int, typer.Option(help="GPUs of each local worker (simulated on a CPU-only machine).")
    ] = 1,
    job_command: Annotated[
        str | None,
        typer.Option(help="With --local-workers: the command that runs one job (default: the "
                     "training harness)."),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(help="With --local-workers: keep the run's journal and logs here."),
    ] = None,
    workload_size: Annotated[
        str,
        typer.Option(
            help="standin (small CPU models, the default) or full (the published model sizes, "
            "for GPUs: ResNet-50 on 224x224, the base Transformer, NCF with ML-20M tables, ...)."
        ),
    ] = "standin",
    start_costs: Annotated[
        Path | None,
        typer.Option(
            help="Also measure each job type's launch to first step (a fresh process), "
            "checkpoint write and restore on the device, and write them here "
            "(`shock run --start-costs` charges them at every (re)start)."
        ),
    ] = None,
) -> None:
    """Measure steps/s of real workloads (default: every family at Gavel's batch sizes)."""
    try:
        import torch

        from shock.workloads.profile import measure_throughput
        from shock.workloads.workload import check_device
    except ImportError as exc:
        raise ShockError(
            f"shock profile needs PyTorch ({exc}); install it with: pip install 'shock[cluster]'"
        ) from exc
    from shock.workloads.families import all_job_types, parse_job_type

    if seconds <= 0:
        raise typer.BadParameter("must be > 0", param_hint="--seconds")
    if threads < 1:
        raise typer.BadParameter("must be >= 1", param_hint="--threads")
    job_types = _requested_job_types(trace, job_type) or list(all_job_types())
    for name in job_types:
        parse_job_type(name)  # an unknown job type stops here, before any measuring
    try:
        check_device(device)
    except ValueError as exc:
        raise ShockError(str(exc)) from exc
    if workload_size not in ("standin", "full"):
        raise typer.BadParameter("expected standin or full", param_hint="--workload-size")
    if local_workers > 0 and workload_size != "standin":
        raise typer.BadParameter(
            "worker agents run the stand-ins; measure full-size models in process",
            param_hint="--workload-size",
        )
    if local_workers < 0 or gpus_per_worker < 1:
        raise typer.BadParameter("need --local-workers >= 0 and --gpus-per-worker >= 1")
    torch.set_num_threads(threads)
    table = load_throughputs(output) if merge and output.exists() else ThroughputTable()
    console = Console(emoji=False)
    if local_workers > 0:
        _profile_through_workers(
            job_types, table, gpu_type, local_workers, gpus_per_worker, seconds,
            job_command, state_dir, console,
        )  # fmt: skip
        output.write_text(json.dumps(throughputs_to_dict(table), indent=1, sort_keys=True) + "\n")
        console.print(f"throughputs of {len(job_types)} job types written to {output}")
        if start_costs is not None:
            _measure_start_costs(job_types, device, workload_size, seed, gpu_type, start_costs,
                                 console)  # fmt: skip
        return
    report = Table(title=f"measured on {device}, labelled {gpu_type}")
    for column in ("job type", "batch size", "steps", "ms/step", "steps/s"):
        report.add_column(column, justify="left" if column == "job type" else "right")
    for name in job_types:
        result = measure_throughput(
            name, device, seconds, warmup_steps, seed=seed, size=workload_size
        )
        table.set(name, 1, gpu_type, result.steps_per_s)
        report.add_row(
            name,
            str(result.batch_size),
            str(result.steps),
            f"{result.ms_per_step:.1f}",
            f"{result.steps_per_s:.2f}",
        )
    output.write_text(json.dumps(throughputs_to_dict(table), indent=1, sort_keys=True) + "\n")
    console.print(report)
    console.print(f"throughputs of {len(job_types)} job types written to {output}")
    if start_costs is not None:
        _measure_start_costs(job_types, device, workload_size, seed, gpu_type, start_costs, console)


def _measure_start_costs(
    job_types: list[str],
    device: str,
    size: str,
    seed: int,
    gpu_type: str,
    output: Path,
    console: Console,
) -> None:
    from shock.workloads.start_costs import measure_start_costs, start_costs_to_dict

    report = Table(title=f"start costs on {device}, labelled {gpu_type}")
    for column in ("job type", "launch to 1st step s", "checkpoint s", "restore s"):
        report.add_column(column, justify="left" if column == "job type" else "right")
    costs = []
    for name in job_types:
        measured = measure_start_costs(name, device, size, seed)
        costs.append(measured)
        report.add_row(name, f"{measured.launch_s:.2f}", f"{measured.checkpoint_s:.3f}",
                       f"{measured.restore_s:.3f}")  # fmt: skip
    document = start_costs_to_dict(gpu_type, costs)
    if output.exists():  # other GPU types' measurements stay
        document = {**json.loads(output.read_text()), **document}
    output.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    console.print(report)
    console.print(f"start costs of {len(job_types)} job types written to {output}")


def _profile_through_workers(
    job_types: list[str],
    table: ThroughputTable,
    gpu_type: str,
    workers: int,
    gpus_per_worker: int,
    seconds: float,
    job_command: str | None,
    state_dir: Path | None,
    console: Console,
) -> None:
    import shlex
    import tempfile

    from shock.cluster.profiling import profile_through_workers
    from shock.workloads.profile import measure_throughput

    command = tuple(shlex.split(job_command)) if job_command else ()

    def guess(job_type: str) -> float:
        # Sizes the jobs only; a stand-in job command has its own rate, unknown here.
        if command:
            return 10.0
        sharing = max(1.0, workers * gpus_per_worker)
        return measure_throughput(job_type, seconds=0.3).steps_per_s / sharing

    with tempfile.TemporaryDirectory(prefix="shock-profile-") as scratch:
        results = profile_through_workers(
            job_types, guess, state_dir or Path(scratch), gpu_type, workers, gpus_per_worker,
            max(seconds, 1.0), command,
        )  # fmt: skip
    report = Table(title=f"measured through {workers} local workers x {gpus_per_worker} GPUs, "
                   f"labelled {gpu_type}")  # fmt: skip
    for column in ("job type", "steps/s"):
        report.add_column(column, justify="left" if column == "job type" else "right")
    for result in results:
        table.set(result.job_type, 1, gpu_type, result.steps_per_s)
        report.add_row(result.job_type, f"{result.steps_per_s:.2f}")
    console.print(report)


def _requested_job_types(trace: Path | None, named: list[str] | None) -> list[str]:
    """Named job types first, then the trace's, each once, in order of appearance."""
    ordered = list(named or [])
    if trace is not None:
        ordered.extend(job.job_type for job in read_trace(trace, default_registry()).jobs)
    return list(dict.fromkeys(ordered))
