"""`shock traces`: the bundled traces `--trace` takes by name, and the bundled throughput
tables `--throughputs` takes by name."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from shock.core.errors import ShockError
from shock.core.plugins import default_registry
from shock.core.throughputs import load_throughputs
from shock.core.trace import default_cluster_for, read_trace
from shock.engine.runner import DEFAULT_CLUSTER
from shock.util.bundled import bundled_throughputs, bundled_traces


def traces_command() -> None:
    """List the bundled traces (`--trace NAME`) and throughput tables (`--throughputs NAME`)."""
    registry = default_registry()
    console = Console(emoji=False)
    traces = Table(title="bundled traces (--trace NAME or --trace path/to/file.trace)")
    for column in ("name", "jobs", "format", "multi-GPU", "runs on"):
        traces.add_column(column, no_wrap=True)
    for name, path in bundled_traces().items():
        try:
            trace = read_trace(path, registry)
        except ShockError as exc:  # a broken install: say so, list the others
            traces.add_row(name, "", "", "", f"[red]cannot read: {exc}[/]")
            continue
        multi = sum(job.scale_factor > 1 for job in trace.jobs)
        cluster = default_cluster_for(trace, registry) or "Gavel's cluster"
        traces.add_row(name, str(len(trace.jobs)), trace.format, str(multi), cluster)
    console.print(traces)
    tables = Table(title="bundled throughput tables (--throughputs NAME or a .json file)")
    for column in ("name", "worker types", "job types"):
        tables.add_column(column, no_wrap=column == "name")
    for name, path in bundled_throughputs().items():
        table = load_throughputs(path)
        job_types = len({key[0] for key in table.isolated})
        tables.add_row(name, ", ".join(table.worker_types), str(job_types))
    console.print(tables)
    console.print(
        f"Gavel's cluster: {DEFAULT_CLUSTER}; --cluster picks another (bundled ones: "
        "`shock clusters`).",
        highlight=False,
    )
