"""Synergy-style runs: ordering policies x CPU/memory placements on Synergy's 128-GPU cluster.

A generated Synergy trace (Synergy's workload model: 300 jobs, Poisson arrivals at 9 jobs/h,
image/language/speech split 20/70/10, 1/2/4/8-GPU mix 70/10/15/5%) runs with `--preset
synergy` on `synergy-128` for every policy x placement. The table gives average, p99 JCT and
makespan, the wall time of each run, and the average-JCT gain against `proportional` (GPU-
proportional CPUs and memory: the baseline, measured in the same run). Synergy's own simulator
shows tune 1.12-1.17x better average JCT than proportional on such traces.

Synergy measures only a window of job ids in steady state (jobs 4000-4999 of a continuing
stream, `runner.py` `series_id_filter`); the table also gives the average JCT and gain over a
window of this trace's ids (`--window`, default the middle third), next to all jobs.
`fifo_skip` is Synergy's FIFO (later jobs run where an earlier one does not fit); `fifo` is
strict FIFO.

A last run combines heterogeneous GPU types with CPU/memory-aware placement: a Gavel trace on
`hetero-96` (V100, P100, K80 servers with CPUs and memory) under the heterogeneity-aware
`max_min_fairness_perf`, with `proportional` and `tune`.

    python benchmarks/synergy.py [--quick] [--policies fifo,srtf] [--placements tune,opt]
                                 [--jobs 300] [--window 100:200] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from shock.core.plugins import default_registry
from shock.core.results import RunResult
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request, parse_window
from shock.traces.generator import WorkloadConfig, generate_jobs
from shock.traces.synergy_generator import SynergyWorkload, generate_synergy_jobs

POLICIES = ("fifo", "fifo_skip", "srtf", "las", "ftf")
PLACEMENTS = ("proportional", "greedy", "tune", "opt")


@dataclass(frozen=True)
class Row:
    trace: str
    policy: str
    placement: str
    avg_jct_h: float
    p99_jct_h: float
    makespan_h: float
    wall_s: float
    unfinished: int
    window_avg_jct_h: float  # over the job-id window only (Synergy's way of measuring)
    window_p99_jct_h: float


def simulate(trace: Trace, options: RunOptions) -> tuple[RunResult, float]:
    registry = default_registry()
    request = build_request(options, registry, trace=trace)
    started = time.perf_counter()
    result: RunResult = registry.get("backend", "simulator").run(request)
    return result, time.perf_counter() - started


def row_of(
    trace: str,
    policy: str,
    placement: str,
    result: RunResult,
    wall: float,
    window: tuple[int, int] | None = None,
) -> Row:
    m = result.metrics
    inside = [
        r.jct_s for r in result.records if window is None or window[0] <= r.job_id < window[1]
    ]
    jct = np.array(inside) / 3600 if inside else np.zeros(1)
    return Row(
        trace,
        policy,
        placement,
        m.avg_jct_s / 3600,
        m.p99_jct_s / 3600,
        m.makespan_s / 3600,
        wall,
        result.unfinished_jobs,
        float(jct.mean()),
        float(np.percentile(jct, 99)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 jobs instead of 300")
    parser.add_argument("--jobs", type=int, help="jobs in the generated trace (default 300)")
    parser.add_argument(
        "--window", help="job ids START:END measured on their own (default: the middle third)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--placements", default=",".join(PLACEMENTS))
    parser.add_argument(
        "--random-classes",
        action="store_true",
        help="draw each job's class and model at random (not Synergy's balanced assignment)",
    )
    parser.add_argument("--no-hetero", action="store_true", help="skip the heterogeneous run")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    console = Console()
    jobs = args.jobs or (100 if args.quick else 300)
    window = parse_window(args.window) or (jobs // 3, 2 * jobs // 3)
    workload = SynergyWorkload(
        jobs,
        jobs_per_hour=9.0,
        class_split=(20, 70, 10),
        seed=args.seed,
        balanced_classes=not args.random_classes,
    )
    generated = tuple(generate_synergy_jobs(workload))
    trace = Trace(generated, source=f"synergy-{jobs}", format="synergy")
    rows: list[Row] = []
    for policy in args.policies.split(","):
        # "ftf@synergy_order=true": a policy with --policy-option values after '@'.
        name, _, option_text = policy.partition("@")
        for placement in args.placements.split(","):
            options = RunOptions(
                policy=name,
                policy_options=tuple(option_text.split(";")) if option_text else (),
                cluster="synergy-128",
                preset="synergy",
                placement=placement,
                seed=args.seed,
            )
            result, wall = simulate(trace, options)
            rows.append(row_of(trace.source, policy, placement, result, wall, window))
            console.print(f"{policy:6} {placement:12} done in {wall:7.1f} s", highlight=False)
    if not args.no_hetero:
        gavel = WorkloadConfig(num_jobs=jobs, jobs_per_hour=4.0, seed=args.seed, multi_gpu=True)
        hetero = Trace(tuple(generate_jobs(gavel, default_throughputs())), source=f"gavel-{jobs}")
        for placement in ("proportional", "tune"):
            options = RunOptions(
                policy="max_min_fairness_perf",
                cluster="hetero-96",
                placement=placement,
                seed=args.seed,
            )
            result, wall = simulate(hetero, options)
            rows.append(row_of("gavel on hetero-96", options.policy, placement, result, wall))
    console.print(table(rows, window))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([row.__dict__ for row in rows], handle, indent=2)


def table(rows: list[Row], window: tuple[int, int]) -> Table:
    baseline = {(row.trace, row.policy): row for row in rows if row.placement == "proportional"}
    out = Table(title="Synergy-style runs (JCT gain: proportional's average JCT / this one's)")
    for column in (
        "trace",
        "policy",
        "placement",
        "avg JCT (h)",
        "p99 JCT (h)",
        "makespan (h)",
        "JCT gain",
        f"window {window[0]}-{window[1] - 1} avg JCT (h)",
        "window gain",
        "unfinished",
        "wall (s)",
    ):
        out.add_column(column, justify="right" if "(" in column or "gain" in column else "left")
    for row in rows:
        base = baseline.get((row.trace, row.policy))
        gain = f"{base.avg_jct_h / row.avg_jct_h:.3f}x" if base and row.avg_jct_h > 0 else "-"
        window_gain = (
            f"{base.window_avg_jct_h / row.window_avg_jct_h:.3f}x"
            if base and row.window_avg_jct_h > 0
            else "-"
        )
        out.add_row(
            row.trace,
            row.policy,
            row.placement,
            f"{row.avg_jct_h:.2f}",
            f"{row.p99_jct_h:.2f}",
            f"{row.makespan_h:.2f}",
            gain,
            f"{row.window_avg_jct_h:.2f}",
            window_gain,
            str(row.unfinished),
            f"{row.wall_s:.1f}",
        )
    return out


if __name__ == "__main__":
    main()
