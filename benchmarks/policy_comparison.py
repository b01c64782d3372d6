"""Heterogeneity-aware policies beside their agnostic twins, and packed beside unpacked.

Reproduces the shape of Gavel's figures 8-11 with Gavel-preset simulations of generated
traces (Gavel's workload model, `WorkloadConfig`), every run repeated over a few seeds:
  1. LAS (fig. 8/9): 600 single-GPU jobs arriving at 1, 2, 4 and 6 jobs/h on 8:8:8, measured
     over jobs 200-499; max_min_fairness vs max_min_fairness_perf vs max_min_fairness_packed.
  2. Finish-time fairness (fig. 10): the same continuous traces, finish_time_fairness vs
     finish_time_fairness_perf: average JCT, worst and mean finish-time-fairness rho.
  3. Makespan (fig. 11): 100 jobs (multi-GPU gangs) all at t = 0 on 8:8:8 (8-GPU gangs need
     8 GPUs of one type); min_total_duration vs min_total_duration_perf vs fifo vs fifo_perf.
  4. Packing at high load: 200 single-GPU jobs at t = 0 on 4:4:4; max_min_fairness_perf vs
     max_min_fairness_packed and fifo_perf vs fifo_packed: average JCT and makespan.
Ratios are aware / agnostic (or packed / unpacked) of the seed-averaged metric: below 1 means
the aware (packed) policy wins. Each table also counts the seeds in which it wins. The
summary says whether each claim holds in every case measured (every seed, every rate; packing
at the highest rate only: Gavel claims it helps at high load, and at low load it does not).
min_total_duration's average JCT is shown but is no claim (it minimises makespan, not JCT).
Gavel's jobs average ~17 V100-hours, so 8:8:8 saturates from ~1.5 jobs/h: the higher rates
show the overloaded side of figure 8's knee (JCT over the window keeps growing).

    python benchmarks/policy_comparison.py [--quick] [--seeds 0 1 2] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.results import RunResult
from shock.core.throughputs import default_throughputs
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, build_request
from shock.traces.generator import WorkloadConfig, generate_jobs

HOUR = 3600.0


@dataclass(frozen=True)
class Plan:
    seeds: tuple[int, ...]
    rates: tuple[float, ...]  # jobs/h of the continuous traces
    continuous_jobs: int
    window: tuple[int, int]
    continuous_cluster: str = "8:8:8"
    makespan_jobs: int = 100
    makespan_cluster: str = "8:8:8"
    packing_jobs: int = 200
    packing_cluster: str = "4:4:4"


FULL = Plan(seeds=(0, 1, 2), rates=(1.0, 2.0, 4.0, 6.0), continuous_jobs=600, window=(200, 500))
QUICK = Plan(seeds=(0,), rates=(1.0, 4.0), continuous_jobs=300, window=(100, 250))


@dataclass(frozen=True)
class Run:
    """One simulation's numbers, in hours where they are times."""

    scenario: str
    policy: str
    seed: int
    rate: float | None
    cluster: str
    avg_jct_h: float
    makespan_h: float
    worst_rho: float
    mean_rho: float
    result: RunResult


class Bench:
    def __init__(self, console: Console, claims: dict[str, Claim]) -> None:
        self.claims = claims
        self.registry = PluginRegistry(load_plugins())
        self.table = default_throughputs()
        self.console = console
        self.runs: list[Run] = []

    def simulate(
        self,
        scenario: str,
        policy: str,
        workload: WorkloadConfig,
        cluster: str,
        window: tuple[int, int] | None = None,
    ) -> Run:
        jobs = generate_jobs(workload, self.table)
        source = f"generated:{scenario}:seed={workload.seed}:rate={workload.jobs_per_hour}"
        trace = Trace(tuple(jobs), source, "gavel")
        options = RunOptions(policy=policy, cluster=cluster, preset="gavel", window=window)
        request = build_request(options, self.registry, trace=trace)
        result: RunResult = self.registry.get("backend", "simulator").run(request)
        m = result.metrics
        run = Run(
            scenario=scenario,
            policy=policy,
            seed=workload.seed,
            rate=workload.jobs_per_hour,
            cluster=cluster,
            avg_jct_h=m.avg_jct_s / HOUR,
            makespan_h=m.makespan_s / HOUR,
            worst_rho=m.worst_ftf_rho,
            mean_rho=mean_rho(result, window),
            result=result,
        )
        self.runs.append(run)
        rate = f" at {workload.jobs_per_hour:g} jobs/h" if workload.jobs_per_hour else ""
        self.console.print(
            f"[dim]{scenario}: {policy}{rate}, seed {workload.seed}: "
            f"avg JCT {run.avg_jct_h:.2f} h ({m.wall_s:.1f} s)[/dim]",
            highlight=False,
        )
        return run

    def claim(self, key: str | None) -> Claim:
        return self.claims[key] if key is not None else Claim("")

    def pick(self, scenario: str, policy: str, rate: float | None = None) -> list[Run]:
        return [
            r
            for r in self.runs
            if r.scenario == scenario and r.policy == policy and (rate is None or r.rate == rate)
        ]


def mean_rho(result: RunResult, window: tuple[int, int] | None) -> float:
    """Mean finish-time-fairness rho over the measured jobs (those worst_ftf_rho covers)."""
    ids = np.array([record.job_id for record in result.records])
    rhos = np.asarray(result.rhos, dtype=float)
    if window is not None and len(ids):
        rhos = rhos[(ids >= window[0]) & (ids < window[1])]
    rhos = rhos[np.isfinite(rhos)]
    return float(rhos.mean()) if len(rhos) else math.nan


@dataclass
class Claim:
    text: str
    wins: int = 0
    cases: int = 0

    def add(self, candidate: float, reference: float) -> bool:
        self.cases += 1
        won = candidate < reference
        self.wins += won
        return won

    @property
    def holds(self) -> bool:
        return self.cases > 0 and self.wins == self.cases


def mean(runs: Sequence[Run], metric: Callable[[Run], float]) -> float:
    return statistics.fmean(metric(r) for r in runs)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def compare(
    claim: Claim, candidate: Sequence[Run], reference: Sequence[Run], metric: Callable[[Run], float]
) -> str:
    """Count per-seed wins of candidate over reference; 'k/n' for the table."""
    by_seed = {r.seed: r for r in reference}
    wins = sum(claim.add(metric(c), metric(by_seed[c.seed])) for c in candidate)
    return f"{wins}/{len(candidate)}"


def jct(run: Run) -> float:
    return run.avg_jct_h


def makespan(run: Run) -> float:
    return run.makespan_h


def worst_rho(run: Run) -> float:
    return run.worst_rho


def new_table(title: str, columns: Sequence[str]) -> Table:
    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="right", no_wrap=i == 0)
    return table


def continuous_workload(plan: Plan, rate: float, seed: int) -> WorkloadConfig:
    return WorkloadConfig(num_jobs=plan.continuous_jobs, jobs_per_hour=rate, seed=seed)


LAS = ("max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed")
FTF = ("finish_time_fairness", "finish_time_fairness_perf")
MAKESPAN = ("min_total_duration", "min_total_duration_perf", "fifo", "fifo_perf")
PACKING = ("max_min_fairness_perf", "max_min_fairness_packed", "fifo_perf", "fifo_packed")


def las(bench: Bench, plan: Plan) -> Table:
    claims = bench.claims
    for rate in plan.rates:
        for seed in plan.seeds:
            for policy in LAS:
                workload = continuous_workload(plan, rate, seed)
                bench.simulate("las", policy, workload, plan.continuous_cluster, plan.window)
    a, b = plan.window
    table = new_table(
        f"1. LAS, continuous single-GPU trace on {plan.continuous_cluster} "
        f"(avg JCT of jobs {a}-{b - 1}, hours, mean of {len(plan.seeds)} seed(s))",
        (
            "jobs/h",
            "max_min_fairness",
            "_perf",
            "_packed",
            "perf / agnostic",
            "perf wins",
            "packed / agnostic",
            "packed / perf",
            "packed wins vs perf",
        ),
    )
    for rate in plan.rates:
        agnostic, aware, packed = (bench.pick("las", p, rate) for p in LAS)
        perf_wins = compare(claims["las"], aware, agnostic, jct)
        packed_claim = bench.claim("packed_las_continuous" if rate == max(plan.rates) else None)
        packed_wins = compare(packed_claim, packed, aware, jct)
        j = [mean(runs, jct) for runs in (agnostic, aware, packed)]
        table.add_row(
            f"{rate:g}",
            *(f"{v:.2f}" for v in j),
            ratio(j[1], j[0]),
            perf_wins,
            ratio(j[2], j[0]),
            ratio(j[2], j[1]),
            packed_wins,
        )
    return table


def ftf(bench: Bench, plan: Plan) -> Table:
    claims = bench.claims
    for rate in plan.rates:
        for seed in plan.seeds:
            for policy in FTF:
                workload = continuous_workload(plan, rate, seed)
                bench.simulate("ftf", policy, workload, plan.continuous_cluster, plan.window)
    table = new_table(
        f"2. Finish-time fairness, continuous single-GPU trace on {plan.continuous_cluster} "
        f"(mean of {len(plan.seeds)} seed(s))",
        (
            "jobs/h",
            "JCT agnostic (h)",
            "JCT aware (h)",
            "JCT aware / agnostic",
            "JCT wins",
            "worst ρ agnostic",
            "worst ρ aware",
            "worst ρ wins",
            "mean ρ agnostic",
            "mean ρ aware",
            "mean ρ aware / agnostic",
        ),
    )
    for rate in plan.rates:
        agnostic, aware = (bench.pick("ftf", p, rate) for p in FTF)
        jct_wins = compare(claims["ftf"], aware, agnostic, jct)
        rho_wins = compare(claims["ftf_worst_rho"], aware, agnostic, worst_rho)
        compare(claims["ftf_mean_rho"], aware, agnostic, lambda r: r.mean_rho)
        j = [mean(runs, jct) for runs in (agnostic, aware)]
        w = [mean(runs, worst_rho) for runs in (agnostic, aware)]
        m = [mean(runs, lambda r: r.mean_rho) for runs in (agnostic, aware)]
        table.add_row(
            f"{rate:g}",
            f"{j[0]:.2f}",
            f"{j[1]:.2f}",
            ratio(j[1], j[0]),
            jct_wins,
            f"{w[0]:.2f}",
            f"{w[1]:.2f}",
            rho_wins,
            f"{m[0]:.2f}",
            f"{m[1]:.2f}",
            ratio(m[1], m[0]),
        )
    return table


def static_rows(
    bench: Bench,
    scenario: str,
    pairs: Sequence[tuple[str, str, str, str]],
    table: Table,
) -> None:
    """pairs: (reference policy, candidate policy, makespan claim key, JCT claim key); a key
    of None: a comparison shown in the table but not a claim of Gavel's."""
    for reference, candidate, makespan_key, jct_key in pairs:
        ref, cand = bench.pick(scenario, reference), bench.pick(scenario, candidate)
        mk_wins = compare(bench.claim(makespan_key), cand, ref, makespan)
        jct_wins = compare(bench.claim(jct_key), cand, ref, jct)
        mk = [mean(runs, makespan) for runs in (ref, cand)]
        j = [mean(runs, jct) for runs in (ref, cand)]
        table.add_row(
            f"{candidate} / {reference}",
            f"{mk[0]:.1f}",
            f"{mk[1]:.1f}",
            ratio(mk[1], mk[0]),
            mk_wins,
            f"{j[0]:.2f}",
            f"{j[1]:.2f}",
            ratio(j[1], j[0]),
            jct_wins,
        )


STATIC_COLUMNS = (
    "candidate / reference",
    "makespan ref (h)",
    "makespan cand (h)",
    "makespan ratio",
    "makespan wins",
    "avg JCT ref (h)",
    "avg JCT cand (h)",
    "JCT ratio",
    "JCT wins",
)


def makespan_scenario(bench: Bench, plan: Plan) -> Table:
    for seed in plan.seeds:
        workload = WorkloadConfig(num_jobs=plan.makespan_jobs, seed=seed, multi_gpu=True)
        for policy in MAKESPAN:
            bench.simulate("makespan", policy, workload, plan.makespan_cluster)
    table = new_table(
        f"3. Makespan, static trace of {plan.makespan_jobs} multi-GPU jobs on "
        f"{plan.makespan_cluster} (mean of {len(plan.seeds)} seed(s))",
        STATIC_COLUMNS,
    )
    static_rows(
        bench,
        "makespan",
        (
            ("min_total_duration", "min_total_duration_perf", "makespan", None),
            ("fifo", "fifo_perf", "fifo_makespan", "fifo"),
        ),
        table,
    )
    return table


def packing_scenario(bench: Bench, plan: Plan) -> Table:
    for seed in plan.seeds:
        workload = WorkloadConfig(num_jobs=plan.packing_jobs, seed=seed)
        for policy in PACKING:
            bench.simulate("packing", policy, workload, plan.packing_cluster)
    table = new_table(
        f"4. Packing at high load, static trace of {plan.packing_jobs} single-GPU jobs on "
        f"{plan.packing_cluster} (mean of {len(plan.seeds)} seed(s))",
        STATIC_COLUMNS,
    )
    static_rows(
        bench,
        "packing",
        (
            ("max_min_fairness_perf", "max_min_fairness_packed", "packed_las_mk", "packed_las"),
            ("fifo_perf", "fifo_packed", "packed_fifo_mk", "packed_fifo"),
        ),
        table,
    )
    return table


def make_claims(plan: Plan) -> dict[str, Claim]:
    top = f"{max(plan.rates):g} jobs/h"
    return {
        "las": Claim("LAS: heterogeneity-aware beats agnostic on avg JCT (every rate)"),
        "ftf": Claim("FTF: heterogeneity-aware beats agnostic on avg JCT (every rate)"),
        "ftf_worst_rho": Claim("FTF: heterogeneity-aware beats agnostic on worst ρ"),
        "ftf_mean_rho": Claim("FTF: heterogeneity-aware beats agnostic on mean ρ"),
        "makespan": Claim("Makespan: heterogeneity-aware beats agnostic on makespan"),
        "fifo": Claim("FIFO: heterogeneity-aware beats agnostic on avg JCT"),
        "fifo_makespan": Claim("FIFO: heterogeneity-aware beats agnostic on makespan"),
        "packed_las_continuous": Claim(f"LAS: packed beats unpacked on avg JCT at {top}"),
        "packed_las": Claim("LAS: packed beats unpacked on avg JCT (static, high load)"),
        "packed_las_mk": Claim("LAS: packed beats unpacked on makespan (static, high load)"),
        "packed_fifo": Claim("FIFO: packed beats unpacked on avg JCT (static, high load)"),
        "packed_fifo_mk": Claim("FIFO: packed beats unpacked on makespan (static, high load)"),
    }


def summary(claims: dict[str, Claim]) -> Table:
    table = new_table("Summary: does each claim hold in every case measured?", ("claim", "holds"))
    table.columns[0].justify = "left"
    for claim in claims.values():
        verdict = "yes" if claim.holds else "no"
        table.add_row(claim.text, f"{verdict} ({claim.wins}/{claim.cases} cases)")
    headline = {
        "heterogeneity-aware beats agnostic on avg JCT (LAS)": claims["las"],
        "heterogeneity-aware beats agnostic on avg JCT (FTF)": claims["ftf"],
        "heterogeneity-aware beats agnostic on avg JCT (FIFO)": claims["fifo"],
        "heterogeneity-aware beats agnostic on makespan (min_total_duration)": claims["makespan"],
    }
    packed = [claims[k] for k in ("packed_las_continuous", "packed_las", "packed_fifo")]
    table.add_section()
    for text, claim in headline.items():
        table.add_row(text, "yes" if claim.holds else "no")
    table.add_row(
        "packed beats unpacked at high load (avg JCT)",
        "yes" if all(c.holds for c in packed) else "no",
    )
    return table


def document(run: Run) -> dict[str, object]:
    metrics = {
        k: (v if not isinstance(v, float) or math.isfinite(v) else None)
        for k, v in asdict(run.result.metrics).items()
    }
    return {
        "scenario": run.scenario,
        "policy": run.policy,
        "seed": run.seed,
        "jobs_per_hour": run.rate,
        "cluster": run.cluster,
        "metrics": metrics,
        "mean_ftf_rho": run.mean_rho if math.isfinite(run.mean_rho) else None,
        "unfinished_jobs": run.result.unfinished_jobs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one seed, smaller traces (< 1 min)")
    parser.add_argument("--seeds", type=int, nargs="+", help="override the seeds")
    parser.add_argument("--json", type=Path, help="write every run's metrics and the summary")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.seeds:
        plan = Plan(**{**asdict(plan), "seeds": tuple(args.seeds)})
    console = Console(width=160)
    claims = make_claims(plan)
    bench = Bench(console, claims)
    start = time.perf_counter()
    tables = [
        las(bench, plan),
        ftf(bench, plan),
        makespan_scenario(bench, plan),
        packing_scenario(bench, plan),
    ]
    for table in tables:
        console.print(table)
    console.print(summary(claims))
    console.print(f"{len(bench.runs)} simulations in {time.perf_counter() - start:.0f} s")
    if args.json:
        payload = {
            "plan": asdict(plan),
            "runs": [document(run) for run in bench.runs],
            "claims": [
                {"claim": c.text, "holds": c.holds, "wins": c.wins, "cases": c.cases}
                for c in claims.values()
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")


if __name__ == "__main__":
    main()
