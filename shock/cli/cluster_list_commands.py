"""`shock clusters`: the bundled cluster files `--cluster` takes by name."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from shock.engine.cluster_file import bundled_clusters


def clusters_command() -> None:
    """List the bundled clusters (`--cluster NAME`): servers, GPUs, CPUs, memory."""
    table = Table(title="bundled clusters (--cluster NAME or --cluster path/to/file.toml)")
    for column in ("name", "servers", "GPUs", "CPUs", "memory GB", "description"):
        table.add_column(column)
    for bundled in bundled_clusters():
        servers = bundled.cluster.servers()
        gpus = ", ".join(f"{w}={n}" for w, n in sorted(bundled.cluster.gpus_per_type.items()))
        table.add_row(
            bundled.name,
            str(len(servers)),
            gpus,
            f"{sum(s.cpus for s in servers):g}",
            f"{sum(s.memory_gb for s in servers):g}",
            bundled.description,
        )
    Console(emoji=False).print(table)
