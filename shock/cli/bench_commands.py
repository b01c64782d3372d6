"""`shock bench policy`: time one allocation of a policy on a synthetic instance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.policy import Policy
from shock.core.solver import SolverSpec
from shock.engine.bench import bench_instance, time_allocation
from shock.engine.runner import DEFAULT_POLICY
from shock.lp.partition import PartitionedPolicy

bench_app = typer.Typer(help="Time policies on synthetic instances.", no_args_is_help=True)


@bench_app.command("policy")
def policy_command(
    policy: Annotated[
        str, typer.Option(help="Policy name (see `shock plugins`).")
    ] = DEFAULT_POLICY,
    jobs: Annotated[int, typer.Option(help="Active single-GPU jobs in the instance.")] = 256,
    partitions: Annotated[
        int, typer.Option(help="POP partitioning: K random job groups (1: off).")
    ] = 1,
    solver: Annotated[str, typer.Option(help="Solver for optimisation policies.")] = "highs",
    seed: Annotated[int, typer.Option(help="Seed of the instance and the partitioning.")] = 0,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write {policy, jobs, seconds, ...} here.")
    ] = None,
) -> None:
    """Time one allocation of a policy on N active jobs and N/4 GPUs of each type.

    The instance: N single-GPU jobs of Gavel's job types, partly done, on N/4 GPUs (at least
    one) of each of v100, p100 and k80. A warm-up call on a tiny instance comes first.
    """
    if jobs < 1:
        raise InputError(f"must be >= 1, got {jobs}", field="--jobs")
    if partitions < 1:
        raise InputError(f"must be >= 1, got {partitions}", field="--partitions")
    registered: Policy = default_registry().get("policy", policy)
    spec = SolverSpec(name=solver)
    spec.check(registered.problem_class, registered.name)
    chosen: Policy = registered.for_run(seed)
    if partitions > 1:
        chosen = PartitionedPolicy(chosen, partitions, seed=seed)
    problem = bench_instance(jobs, seed)
    timing = time_allocation(chosen, problem, spec)
    document = {**timing.to_document(), "partitions": partitions, "solver": solver}
    if json_path is not None:
        json_path.write_text(json.dumps(document, indent=2) + "\n")
    objective = "n/a" if timing.objective is None else f"{timing.objective:.6g}"
    table = Table(title="shock bench policy")
    table.add_column("")
    table.add_column("value", justify="right")
    for label, value in (
        ("policy", timing.policy),
        ("active jobs", str(timing.jobs)),
        ("GPUs (v100, p100, k80 each)", str(int(problem.capacity[0]))),
        ("partitions", str(partitions)),
        ("solver", solver),
        ("seconds (one allocation)", f"{timing.seconds:.4f}"),
        ("objective", objective),
        ("status", timing.status),
    ):
        table.add_row(label, value)
    console = Console(emoji=False)
    console.print(table)
    if json_path is not None:
        console.print(f"results written to {json_path}")
