"""Gavel's baselines: shock's `--preset gavel` beside Gavel's own simulator, run by run.

For fifo_perf and gandiva on static traces (every job at t = 0) of Gavel's workload model,
single-GPU jobs on 4:4:4 and multi-GPU jobs (1/2/4/8 GPUs) on 12:12:12: shock's makespan and
average JCT next to the numbers Gavel's simulator gave for the same trace, cluster, table and
seed (hard-coded below, with how they were measured). The preset sets the policies' Gavel
options (fifo_perf `gavel_queue`, gandiva `gavel_packing`; docs/semantics.md).

gandiva is randomised. With `gavel_packing` it draws its pairs with Python's
`random.Random(seed).sample` on the same lists, in the same order as Gavel's `GandivaPolicy`, so
each seed is compared with the same seed in Gavel; the averages over the seeds of each trace
are printed as well. Target: within 5% on both numbers.

    python benchmarks/gavel_baselines.py [--policies fifo_perf,gandiva] [--options-off]

`--options-off` adds shock with the policy's Gavel option turned off (the policy's own
semantics; the mechanism stays Gavel's).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from functools import cache

from rich.console import Console
from rich.table import Table

from shock.core.plugins import default_registry
from shock.core.results import RunResult
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request
from shock.traces.generator import WorkloadConfig, generate_jobs

TARGET = 0.05
CLUSTER = {False: "4:4:4", True: "12:12:12"}
# The option `--preset gavel` sets for each policy.
GAVEL_OPTION = {"fifo_perf": "gavel_queue", "gandiva": "gavel_packing"}


@dataclass(frozen=True, slots=True)
class Measured:
    """One run of Gavel's simulator: its trace (`shock trace generate --jobs JOBS --seed
    TRACE_SEED [--multi-gpu]`), its `--seed`, and what it printed ("Total duration",
    "Average job completion time"), in seconds."""

    policy: str
    jobs: int
    multi_gpu: bool
    trace_seed: int
    seed: int
    makespan_s: float
    avg_jct_s: float


# Measured on 2026-11-25 with Gavel at commit c4fa40097339e9608ab71fd64c8bdea96a5e4a4c
# (stanford-futuredata/gavel), from its scheduler/ folder:
#   python scripts/drivers/simulate_scheduler_with_trace.py --trace_file T --policy P \
#     --throughputs_file simulation_throughputs.json --cluster_spec C --seed S \
#     --solver ECOS --time_per_iteration 360
# with C = 4:4:4 for single-GPU traces and 12:12:12 for multi-GPU ones.
GAVEL = (
    Measured("fifo_perf", 100, False, 0, 0, 776182.838, 272103.821),
    Measured("fifo_perf", 100, False, 1, 0, 870985.387, 315114.906),
    Measured("fifo_perf", 100, False, 2, 0, 1088224.508, 349478.853),
    Measured("fifo_perf", 100, True, 0, 0, 883500.458, 167513.239),
    Measured("fifo_perf", 100, True, 1, 0, 787728.572, 151074.810),
    Measured("fifo_perf", 100, True, 2, 0, 834774.721, 155583.196),
    Measured("gandiva", 30, False, 0, 0, 493500.900, 78696.199),
    Measured("gandiva", 30, False, 0, 1, 488788.430, 79445.988),
    Measured("gandiva", 30, False, 1, 0, 534380.064, 97078.319),
    Measured("gandiva", 30, False, 1, 1, 522299.984, 96615.576),
    Measured("gandiva", 30, False, 2, 0, 646575.125, 105947.524),
    Measured("gandiva", 50, True, 0, 0, 627834.946, 84540.461),
    Measured("gandiva", 50, True, 0, 1, 626666.437, 83382.708),
    Measured("gandiva", 50, True, 1, 0, 494999.519, 69285.766),
    Measured("gandiva", 50, True, 1, 1, 492833.393, 68624.672),
    Measured("gandiva", 50, True, 2, 0, 619320.716, 86423.820),
    Measured("gandiva", 60, False, 0, 0, 566554.681, 102957.264),
    Measured("gandiva", 60, False, 0, 1, 563389.438, 101867.798),
    Measured("gandiva", 100, True, 0, 0, 724227.068, 108850.500),
    Measured("gandiva", 100, True, 0, 1, 733505.563, 107092.357),
)


@cache
def gavel_trace(jobs: int, multi_gpu: bool, seed: int) -> Trace:
    """The trace `shock trace generate --jobs JOBS --seed SEED [--multi-gpu]` writes."""
    config = WorkloadConfig(num_jobs=jobs, seed=seed, multi_gpu=multi_gpu)
    name = f"{jobs} {'multi' if multi_gpu else 'single'}-GPU, seed {seed}"
    return Trace(tuple(generate_jobs(config, default_throughputs())), name, "gavel")


def shock_run(measured: Measured, options: tuple[str, ...] = ()) -> tuple[float, float]:
    options_ = RunOptions(
        policy=measured.policy,
        cluster=CLUSTER[measured.multi_gpu],
        preset="gavel",
        seed=measured.seed,
        policy_options=options,
    )
    registry = default_registry()
    trace = gavel_trace(measured.jobs, measured.multi_gpu, measured.trace_seed)
    request = build_request(options_, registry, trace=trace)
    result: RunResult = registry.get("backend", options_.backend).run(request)
    if result.unfinished_jobs:
        raise SystemExit(f"{measured}: {result.unfinished_jobs} jobs unfinished in shock")
    return result.metrics.makespan_s, result.metrics.avg_jct_s


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _gap(ours: float, theirs: float) -> str:
    gap = ours / theirs - 1
    mark = "" if abs(gap) <= TARGET else " !"
    return f"{gap:+.1%}{mark}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fifo_perf,gandiva", help="comma-separated")
    parser.add_argument(
        "--options-off", action="store_true", help="also run shock without the Gavel option"
    )
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = sorted(set(policies) - set(GAVEL_OPTION))
    if unknown:
        parser.error(f"no Gavel numbers for {', '.join(unknown)} (have: {', '.join(GAVEL_OPTION)})")
    console = Console(width=170)
    for policy in policies:
        table = Table(title=f"{policy}: shock --preset gavel vs Gavel's simulator (static traces)")
        columns = ["trace", "cluster", "run seed", "makespan shock", "Gavel", "gap",
                   "avg JCT shock", "Gavel", "gap"]  # fmt: skip
        if args.options_off:
            columns += ["makespan, option off", "avg JCT, option off"]
        for column in columns:
            table.add_column(column, justify="left" if column in ("trace", "cluster") else "right")
        by_trace: dict[tuple[int, bool, int], list[tuple[float, float, float, float]]] = {}
        for measured in (m for m in GAVEL if m.policy == policy):
            makespan, jct = shock_run(measured)
            trace = (measured.jobs, measured.multi_gpu, measured.trace_seed)
            by_trace.setdefault(trace, []).append(
                (makespan, measured.makespan_s, jct, measured.avg_jct_s)
            )
            row = [
                gavel_trace(*trace).source, CLUSTER[measured.multi_gpu], str(measured.seed),
                _hours(makespan), _hours(measured.makespan_s), _gap(makespan, measured.makespan_s),
                _hours(jct), _hours(measured.avg_jct_s), _gap(jct, measured.avg_jct_s),
            ]  # fmt: skip
            if args.options_off:
                off = shock_run(measured, (f"{GAVEL_OPTION[policy]}=false",))
                row += [_hours(off[0]), _hours(off[1])]
            table.add_row(*row)
        for trace, runs in by_trace.items():
            if len(runs) < 2:
                continue
            means = [statistics.fmean(r[i] for r in runs) for i in range(4)]
            table.add_row(
                gavel_trace(*trace).source, CLUSTER[trace[1]], f"mean of {len(runs)}",
                _hours(means[0]), _hours(means[1]), _gap(means[0], means[1]),
                _hours(means[2]), _hours(means[3]), _gap(means[2], means[3]),
                style="bold",
            )  # fmt: skip
        console.print(table)
    console.print(f"gap: shock / Gavel - 1; '!' marks a gap over {TARGET:.0%}.")


if __name__ == "__main__":
    main()
