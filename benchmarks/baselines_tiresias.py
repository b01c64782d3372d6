"""Tiresias (2D-LAS `tiresias`, 2D-Gittins `tiresias_gittins`) against FIFO, LAS and SRTF.

Scenarios:
  shockwave canonical: Shockwave's canonical 120-job dynamic trace (regenerated as in
      benchmarks/shockwave.py) on 32 GPUs with the WISR table, `--preset shockwave`
  gavel continuous:    Gavel's generator, multi-GPU jobs (1/2/4/8 GPUs), arriving at
      JOBS_PER_HOUR, on 12:12:12 (V100:P100:K80) and on 36 V100s, `--preset default`
      (consolidated placement on 8-GPU servers, as Tiresias prefers)

Policies, by shock's names: `fifo` (strict FIFO), `las` (least attained GPU-seconds first,
recomputed every round: continuous LAS), `max_min_fairness` (Gavel's "LAS": max-min fair time
shares), `srtf` (shortest remaining time first: knows the job sizes), `tiresias`,
`tiresias_gittins` (with its defaults: three queues cut at 3250 and 7200 GPU-s, Δ = 3250
GPU-s, the trace's own job sizes seen so far as the service distribution).

Columns: average / p90 / p99 JCT, makespan, worst finish-time fairness ρ, preemptions.

    python benchmarks/baselines_tiresias.py [--quick] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shock.core.plugins import default_registry
from shock.core.results import RunResult
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request
from shock.traces.generator import WorkloadConfig, generate_jobs

POLICIES = ("fifo", "las", "max_min_fairness", "srtf", "tiresias", "tiresias_gittins")
# Beside the defaults: thresholds at 10 and 100 GPU-hours (nearer the size of Gavel's jobs),
# Gittins with the supremum over every quantum, and the starvation knob on.
SCALED = ("queue_thresholds=36000,360000",)
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tiresias (10, 100 GPU-h)": ("tiresias", SCALED),
    "tiresias_gittins (10, 100 GPU-h)": ("tiresias_gittins", SCALED),
    "tiresias_gittins (sup over Δ)": ("tiresias_gittins", ("gittins_quantum=0",)),
    "tiresias (starvation K = 8)": ("tiresias", ("starvation_factor=8",)),
}
GAVEL_JOBS = 400
JOBS_PER_HOUR = 1.0


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[str, tuple[str, ...]], RunResult]


def _shockwave_canonical() -> Scenario:
    import shockwave  # benchmarks/shockwave.py

    canonical = shockwave.canonical_setup(25)

    def simulate(policy: str, policy_options: tuple[str, ...]) -> RunResult:
        result: RunResult = shockwave.simulate(canonical, policy, policy_options)
        return result

    return Scenario("shockwave canonical (32 GPUs)", simulate)


def _gavel_continuous(cluster: str, label: str, jobs: int) -> Scenario:
    config = WorkloadConfig(num_jobs=jobs, jobs_per_hour=JOBS_PER_HOUR, seed=0, multi_gpu=True)
    trace = Trace(tuple(generate_jobs(config, default_throughputs())), "gavel-multi", "gavel")

    def simulate(policy: str, policy_options: tuple[str, ...]) -> RunResult:
        registry = default_registry()
        options = RunOptions(
            policy=policy, policy_options=policy_options, cluster=cluster, preset="default"
        )
        request = build_request(options, registry, trace=trace)
        result: RunResult = registry.get("backend", "simulator").run(request)
        return result

    return Scenario(f"gavel continuous {jobs} jobs, {label}", simulate)


def scenarios(quick: bool) -> list[Scenario]:
    jobs = 120 if quick else GAVEL_JOBS
    found = [_shockwave_canonical(), _gavel_continuous("12:12:12", "12:12:12", jobs)]
    if not quick:
        found.append(_gavel_continuous("36:0:0", "36 V100", jobs))
    return found


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def main(argv: list[str] | None = None) -> None:
    """Print the tables; `argv` (default: the command line) as for the script."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller Gavel trace, one cluster")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    console = Console(width=130)
    rows: list[dict[str, object]] = []
    for scenario in scenarios(args.quick):
        table = Table(title=scenario.name)
        for column in ("policy", "avg JCT", "p90 JCT", "p99 JCT", "makespan", "worst ρ",
                       "preemptions", "unfinished"):  # fmt: skip
            table.add_column(column, justify="left" if column == "policy" else "right")
        runs = {name: (name, ()) for name in POLICIES} | VARIANTS
        for label, (policy, options) in runs.items():
            m = scenario.run(policy, options)
            metrics = m.metrics
            table.add_row(
                label,
                _hours(metrics.avg_jct_s),
                _hours(metrics.p90_jct_s),
                _hours(metrics.p99_jct_s),
                _hours(metrics.makespan_s),
                f"{metrics.worst_ftf_rho:.2f}",
                str(metrics.preemptions),
                str(m.unfinished_jobs),
            )
            rows.append(
                {
                    "scenario": scenario.name,
                    "policy": label,
                    "avg_jct_s": metrics.avg_jct_s,
                    "p90_jct_s": metrics.p90_jct_s,
                    "p99_jct_s": metrics.p99_jct_s,
                    "makespan_s": metrics.makespan_s,
                    "worst_rho": metrics.worst_ftf_rho,
                    "preemptions": metrics.preemptions,
                    "unfinished": m.unfinished_jobs,
                }
            )
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
