"""Runs of Shockwave's bundled traces under `--preset shockwave` with the simulator's
batch-size rules, as benchmarks/shockwave_baselines.py compares them with Shockwave's own."""

from __future__ import annotations

from shock.core.plugins import default_registry
from shock.core.results import Metrics
from shock.engine.runner import RunOptions, bundled_trace_path, run

# Trace file, throughput table and cluster of each of Shockwave's setups.
SETUPS = {
    "canonical": (
        "shockwave_120_multigpu_dynamic.trace",
        "shockwave_tacc_throughputs.json",
        "32:0:0",
    ),
    "460": ("shockwave_460_multigpu_dynamic.trace", "shockwave_wisr_throughputs.json", "128:0:0"),
}


def shockwave_run(policy: str, setup: str) -> Metrics:
    trace, table, cluster = SETUPS[setup]
    data = bundled_trace_path().parent.parent
    result = run(
        RunOptions(
            policy=policy,
            trace=str(bundled_trace_path(trace)),
            throughputs=str(data / table),
            cluster=cluster,
            preset="shockwave",
            adaptation_rules="artifact-simulator",
        ),
        default_registry(),
    )
    return result.metrics
