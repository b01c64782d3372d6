"""Rich rendering of results and plugin listings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from shock.core.plugins import PluginRegistry
from shock.core.results import RunResult
from shock.results.durations import readable_duration

duration = readable_duration  # one rule for every table of durations


def summary_table(result: RunResult) -> Table:
    """One run's metrics, one per line (fits an 80-column terminal)."""
    m = result.metrics
    table = Table(title=f"{result.policy} · {result.backend}", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("jobs measured", str(m.jobs)),
        ("average JCT", duration(m.avg_jct_s)),
        (
            "p50 / p90 / p99 JCT",
            f"{duration(m.p50_jct_s)} / {duration(m.p90_jct_s)} / {duration(m.p99_jct_s)}",
        ),
        ("makespan", duration(m.makespan_s)),
        ("cluster utilisation", f"{m.utilization:.1%}"),
        ("worst finish-time fairness ρ", f"{m.worst_ftf_rho:.2f}"),
        ("unfair jobs (ρ > 1.05)", f"{m.unfair_fraction:.1%}"),
        ("preemptions", str(m.preemptions)),
        ("lease extensions", f"{m.lease_extension_share:.1%}"),
        ("wall time", f"{m.wall_s:.2f} s"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def print_run_header(console: Console, result: RunResult) -> None:
    console.print(
        f"[bold]trace[/] {result.trace}  [bold]cluster[/] {result.cluster}  "
        f"[bold]backend[/] {result.backend}  [bold]solver[/] {result.solver}  "
        f"[bold]preset[/] {result.preset}"
    )
    m = result.metrics
    console.print(
        f"{m.rounds} rounds, {m.allocations} allocations ({m.solver_seconds:.2f} s solving)"
        + (f", {result.unfinished_jobs} jobs unfinished" if result.unfinished_jobs else "")
    )


def plugins_table(registry: PluginRegistry) -> Table:
    table = Table(title="installed shock plugins")
    table.add_column("kind", style="bold", no_wrap=True)
    # Names are what users type: never cut them; descriptions wrap instead.
    longest = max((len(p.name) for p in registry.listing()), default=4)
    table.add_column("name", style="cyan", no_wrap=True, min_width=longest)
    table.add_column("package", no_wrap=True)
    table.add_column("description")
    for plugin in registry.listing():
        table.add_row(plugin.kind, plugin.name, plugin.provider, plugin.description)
    for name, error in sorted(registry.broken.items()):
        table.add_row("[red]broken[/]", name, "", f"[red]failed to load: {error}[/]")
    return table
