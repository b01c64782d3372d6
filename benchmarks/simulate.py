"""Gavel-preset simulations: shock's wall time and results beside an in-run baseline.

Runs `max_min_fairness_perf` (and `finish_time_fairness_perf` on the second trace) with
`--preset gavel` on two generated traces (Gavel's workload
model and random streams):
  static:     100 single-GPU jobs at t = 0 on 4:4:4 (all jobs measured)
  continuous: 5,600 single-GPU jobs at 1.4 jobs/h on 12:12:12, measured over jobs 4000-4999
The baseline is the same simulation with the policy formulated as Gavel does it (a cvxpy
problem solved by ECOS at every allocation), timed in the same run. Gavel's own simulator on
this kind of machine needs about 4 s and 104 s for these runs, and 351 s for
finish_time_fairness_perf on the second (numbers given in issue 2):
the last column is shock's speed-up against those.

    python benchmarks/simulate.py [--quick] [--no-baseline] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cvxpy_baselines

from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.results import RunResult
from shock.core.runner import RunOptions, build_request
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.traces.generator import WorkloadConfig, generate_jobs


@dataclass(frozen=True)
class Scenario:
    name: str
    workload: WorkloadConfig
    cluster: str
    window: tuple[int, int] | None
    gavel_seconds: float  # Gavel's own simulator on this kind of machine (issue 2)
    policy: str = "max_min_fairness_perf"
    baseline: str | None = "cvxpy_max_min_fairness_perf"


SCENARIOS = (
    Scenario("static", WorkloadConfig(num_jobs=100, seed=0), "4:4:4", None, 4.0),
    Scenario(
        "continuous",
        WorkloadConfig(num_jobs=5600, jobs_per_hour=1.4, seed=0),
        "12:12:12",
        (4000, 5000),
        104.0,
    ),
    # A cvxpy baseline here would take ~10 minutes; Gavel's own time is the reference.
    Scenario(
        "continuous",
        WorkloadConfig(num_jobs=5600, jobs_per_hour=1.4, seed=0),
        "12:12:12",
        (4000, 5000),
        351.0,
        policy="finish_time_fairness_perf",
        baseline=None,
    ),
)


def simulate(registry: PluginRegistry, scenario: Scenario, policy: str) -> RunResult:
    jobs = generate_jobs(scenario.workload, default_throughputs())
    trace = Trace(tuple(jobs), f"generated:{scenario.name}", "gavel")
    options = RunOptions(
        policy=policy, cluster=scenario.cluster, preset="gavel", window=scenario.window
    )
    request = build_request(options, registry, trace=trace)
    result: RunResult = registry.get("backend", "simulator").run(request)
    return result


def relative(a: float, b: float) -> str:
    return f"{(a - b) / b:+.1%}" if b else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the static scenario")
    parser.add_argument("--no-baseline", action="store_true", help="skip the cvxpy+ECOS runs")
    parser.add_argument("--json", type=Path, help="write every run's metrics here")
    args = parser.parse_args()
    registry = PluginRegistry(load_plugins(extra_plugins=[cvxpy_baselines]))
    console = Console(width=160)
    table = Table(title="Gavel-preset simulations")
    for column in (
        "scenario",
        "policy",
        "run",
        "jobs",
        "avg JCT (h)",
        "makespan (h)",
        "util",
        "rounds",
        "allocations",
        "wall (s)",
        "speed-up vs baseline",
        "speed-up vs Gavel",
    ):
        table.add_column(column, justify="right")
    documents = []
    scenarios = SCENARIOS[:1] if args.quick else SCENARIOS
    for scenario in scenarios:
        shock_result = simulate(registry, scenario, scenario.policy)
        runs = [("shock (HiGHS)", shock_result)]
        if scenario.baseline and not args.no_baseline:
            runs.append(("baseline (cvxpy+ECOS)", simulate(registry, scenario, scenario.baseline)))
        for label, result in runs:
            m = result.metrics
            baseline = runs[-1][1].metrics.wall_s if len(runs) > 1 else None
            table.add_row(
                scenario.name,
                scenario.policy,
                label,
                str(m.jobs),
                f"{m.avg_jct_s / 3600:.3f}",
                f"{m.makespan_s / 3600:.1f}",
                f"{m.utilization:.3f}",
                str(m.rounds),
                str(m.allocations),
                f"{m.wall_s:.2f}",
                f"{baseline / m.wall_s:.1f}x" if baseline else "",
                f"{scenario.gavel_seconds / m.wall_s:.1f}x",
            )
            documents.append({"scenario": scenario.name, "run": label, **result.to_document()})
        if len(runs) > 1:
            ours, theirs = runs[0][1].metrics, runs[1][1].metrics
            jct = relative(ours.avg_jct_s, theirs.avg_jct_s)
            makespan = relative(ours.makespan_s, theirs.makespan_s)
            console.print(f"{scenario.name}: shock vs baseline: avg JCT {jct}, makespan {makespan}")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(documents, indent=2))


if __name__ == "__main__":
    main()
