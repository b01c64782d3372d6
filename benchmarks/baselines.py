"""Themis at several fairness knobs against finish-time fairness, max-min fairness and Shockwave.

Scenarios:
  shockwave canonical: Shockwave's canonical 120-job dynamic trace (regenerated as in
      benchmarks/shockwave.py) on 32 GPUs with the WISR table, `--preset shockwave`
  gavel continuous:    Gavel's generator, multi-GPU jobs (1/2/4/8 GPUs) arriving at 1 job/h,
      on 12:12:12 (V100:P100:K80), `--preset default` (jobs measured: all)

Policies: `themis` at f = 0, 0.5, 0.8 (its default), 0.95 (10-minute leases);
`finish_time_fairness` and `max_min_fairness` (Gavel's Themis-style FTF and LAS; on the
heterogeneous cluster also their `_perf` variants, which see the throughputs as themis does),
and `shockwave`.

Columns: worst finish-time fairness rho, unfair share (rho > 1.05), average JCT, makespan,
utilisation, and for themis the auctions run and the seconds per auction (its n + 1
proportional-fair solves together, mean and largest).

Tiresias' table (benchmarks/baselines_tiresias.py, `main(argv)`) follows as a second table
when that module is present.

    python benchmarks/baselines.py [--quick | --gavel-jobs N] [--only shockwave|gavel]
                                   [--json results.json]
"""

from __future__ import annotations

import argparse
import dataclasses
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
from shock.core.run import RunRequest
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request
from shock.plugins.policies.themis.policy import AuctionLog, Themis
from shock.traces.generator import WorkloadConfig, generate_jobs

KNOBS = (0.0, 0.5, 0.8, 0.95)
GAVEL_JOBS = 400
JOBS_PER_HOUR = 1.0


@dataclass(frozen=True)
class Scenario:
    name: str
    build: Callable[[str, tuple[str, ...]], RunRequest]
    baselines: tuple[str, ...]


def _shockwave_canonical() -> Scenario:
    import shockwave  # benchmarks/shockwave.py

    canonical = shockwave.canonical_setup(25)

    def build(policy: str, policy_options: tuple[str, ...]) -> RunRequest:
        options = RunOptions(
            policy=policy,
            policy_options=policy_options,
            cluster=canonical.cluster,
            throughputs=str(shockwave.WISR),
            preset="shockwave",
        )
        return build_request(options, default_registry(), trace=canonical.trace)

    return Scenario(
        "shockwave canonical, 120 jobs, 32 GPUs",
        build,
        ("finish_time_fairness", "max_min_fairness", "shockwave"),
    )


def _gavel_continuous(jobs: int) -> Scenario:
    config = WorkloadConfig(num_jobs=jobs, jobs_per_hour=JOBS_PER_HOUR, seed=0, multi_gpu=True)
    trace = Trace(tuple(generate_jobs(config, default_throughputs())), "gavel-multi", "gavel")

    def build(policy: str, policy_options: tuple[str, ...]) -> RunRequest:
        options = RunOptions(
            policy=policy, policy_options=policy_options, cluster="12:12:12", preset="default"
        )
        return build_request(options, default_registry(), trace=trace)

    return Scenario(
        f"gavel continuous, {jobs} multi-GPU jobs at {JOBS_PER_HOUR:g}/h, 12:12:12",
        build,
        (
            "finish_time_fairness",
            "finish_time_fairness_perf",
            "max_min_fairness",
            "max_min_fairness_perf",
            "shockwave",
        ),
    )


def run(scenario: Scenario, policy: str, options: tuple[str, ...]) -> tuple[RunResult, AuctionLog]:
    """One simulation; themis records its auctions in the returned log."""
    request = scenario.build(policy, options)
    log = AuctionLog()
    if isinstance(request.policy, Themis):
        request = dataclasses.replace(request, policy=Themis(request.policy.options, log))
    result: RunResult = request.registry.get("backend", "simulator").run(request)
    return result, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 120-job Gavel trace")
    parser.add_argument(
        "--gavel-jobs", type=int, default=GAVEL_JOBS, help="jobs in the Gavel continuous trace"
    )
    parser.add_argument(
        "--only", choices=("shockwave", "gavel"), help="run one of the two scenarios"
    )
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--no-tiresias", action="store_true", help="skip Tiresias' table")
    args = parser.parse_args()
    console = Console(width=150)
    rows: list[dict[str, object]] = []
    chosen = []
    if args.only in (None, "shockwave"):
        chosen.append(_shockwave_canonical())
    if args.only in (None, "gavel"):
        chosen.append(_gavel_continuous(120 if args.quick else args.gavel_jobs))
    for scenario in chosen:
        table = Table(title=scenario.name)
        columns = ("policy", "worst ρ", "unfair", "avg JCT", "makespan", "util.", "auctions",
                   "s / auction (mean, max)", "solves / auction", "wall")  # fmt: skip
        for column in columns:
            table.add_column(column, justify="left" if column == "policy" else "right")
        runs = [(f"themis f={f:g}", "themis", (f"fairness_knob={f:g}",)) for f in KNOBS]
        runs += [(name, name, ()) for name in scenario.baselines]
        for label, policy, options in runs:
            try:
                result, log = run(scenario, policy, options)
            except Exception as error:  # a baseline that cannot run this scenario
                table.add_row(label, f"failed: {error}"[:60])
                continue
            m = result.metrics
            seconds = [r.solve_seconds for r in log.records]
            solves = [r.solves for r in log.records]
            table.add_row(
                label,
                f"{m.worst_ftf_rho:.2f}",
                f"{m.unfair_fraction:.1%}",
                f"{m.avg_jct_s / 3600:.2f} h",
                f"{m.makespan_s / 3600:.2f} h",
                f"{m.utilization:.1%}",
                str(len(seconds)) if seconds else "",
                f"{sum(seconds) / len(seconds):.3f}, {max(seconds):.3f}" if seconds else "",
                f"{sum(solves) / len(solves):.1f}" if solves else "",
                f"{m.wall_s:.1f} s",
            )
            rows.append(
                {
                    "scenario": scenario.name,
                    "label": label,
                    "auctions": len(seconds),
                    "auction_seconds": seconds,
                    "solves_per_auction": solves,
                    **result.to_document(),
                }
            )
            console.print(f"  done: {label} ({m.wall_s:.1f} s)", style="dim")
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    # Tiresias' half, by its own helper module, when it is there.
    tiresias = Path(__file__).resolve().parent / "baselines_tiresias.py"
    if not args.no_tiresias and tiresias.exists():
        import baselines_tiresias

        argv = ["--quick"] if args.quick else []
        if args.json:
            argv += ["--json", str(args.json.with_name(args.json.stem + "_tiresias.json"))]
        baselines_tiresias.main(argv)


if __name__ == "__main__":
    main()
