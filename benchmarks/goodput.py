"""Per-round decision time of the goodput-aware policies, `sia` and `pollux`.

Active jobs: the first J jobs of Pollux's workload 6 (bundled), each part-way through its
training (seeded), with Sia's and Pollux's goodput models from the artifact's measurements.

- sia: a 64-GPU heterogeneous cluster (t4=32, v100=16, a100=16; per-type one-GPU speeds from
  a seeded table), GPUs in nodes of 4. Each of several rounds advances every job and solves
  Sia's MILP on HiGHS through shock's matrix path; the first round, which builds the goodput
  tables, is timed apart. The baseline is the same MILP written in cvxpy as Sia's artifact
  writes it (cvxpy.Variable(integer=True), multiply, sum), solved by cvxpy's HiGHS (the
  artifact uses CBC, which is not installed here): its time includes cvxpy's compilation, as
  the artifact pays it every round. Both answers' objective values are compared.
- pollux: 16 nodes of 4 T4 GPUs, Pollux's genetic search at its defaults (population 100,
  100 generations) seeded by the previous round's population. No baseline runs here (Pollux's
  artifact needs pymoo 0.4 on Python 3.8).

Times are CPU seconds (user + system) of this process. Target: sia's round at most 1 s on 64
GPUs.

Fidelity (`--only fidelity`, or with the rest): each row runs `shock run` through the CLI as
a user types it, on the artifact's workload with its preset, and prints average JCT and
makespan beside the artifact's own numbers (the ratio: shock / artifact; target within 10%),
and the CPU seconds (user + system) of the `shock run` process. The artifact's numbers:
Pollux's README (average JCT of workload 6) and its raw per-job results
(`simulator/results-jobload/<policy>-1.0/summary.json`, branch osdi21-artifact of
petuum/adaptdl, c793c70), from which the makespan is the last completion after the first
arrival. Target: a Pollux run in at most 60 CPU-seconds.

    python benchmarks/goodput.py [--jobs 20,40,80,160] [--rounds 5]
                                 [--only sia|pollux|fidelity] [--runs pollux,optimus]
                                 [--json out.json] [--markdown docs/goodput.md]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.core.trace import read_trace
from shock.plugins.policies.pollux.policy import Pollux
from shock.plugins.policies.sia import Sia, configurations

WORKLOAD = Path(str(resources.files("shock") / "data" / "pollux" / "workloads" / "workload-6.csv"))
SIA_CLUSTER = {"t4": 32, "v100": 16, "a100": 16}
ROUND_S = 60.0


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def active_jobs(count: int, seed: int) -> tuple[PolicyJob, ...]:
    trace = read_trace(WORKLOAD, default_registry())
    rng = np.random.default_rng(seed)
    jobs = []
    for spec in trace.jobs[:count]:
        done = float(rng.uniform(0, 0.8) * spec.total_steps)
        jobs.append(
            PolicyJob(
                job_id=spec.job_id,
                job_type=spec.job_type,
                scale_factor=spec.scale_factor,
                priority_weight=1.0,
                arrival_time=0.0,
                total_steps=spec.total_steps,
                steps_done=done,
                time_run_s=float(rng.uniform(0, 3600)),
            )
        )
    return tuple(jobs)


def advanced(jobs: tuple[PolicyJob, ...], fraction: float) -> tuple[PolicyJob, ...]:
    return tuple(
        dataclasses.replace(
            j, steps_done=min(j.total_steps - 1.0, j.steps_done + fraction * j.total_steps)
        )
        for j in jobs
    )


def problem_for(jobs: tuple[PolicyJob, ...], cluster: dict[str, int], now: float) -> PolicyInput:
    rng = np.random.default_rng(len(jobs))
    speeds = np.column_stack(
        [np.ones(len(jobs)), *(rng.uniform(1.5, 3.5, len(jobs)) for _ in range(len(cluster) - 1))]
    )
    return PolicyInput(
        now=now,
        jobs=jobs,
        worker_types=tuple(cluster),
        capacity=np.array(list(cluster.values()), dtype=float),
        throughputs=speeds[:, : len(cluster)],
    )


def cvxpy_sia(policy: Sia, problem: PolicyInput) -> tuple[float, float]:
    """Sia's MILP as its artifact writes it, in cvxpy; (CPU seconds, objective)."""
    import cvxpy as cp

    configs = configurations(problem.capacity, policy.options.gpus_per_node)
    start = cpu_seconds()
    goodput = policy.goodputs(problem, configs)
    utility = policy.utilities(problem, configs, goodput)
    m, k = utility.shape
    reduce = np.zeros((k, len(problem.worker_types)))
    for c, config in enumerate(configs):
        reduce[c, config.worker] = config.gpus
    x = cp.Variable((m, k), integer=True)
    lam = policy.options.lambda_n
    objective = cp.Minimize(cp.sum(cp.multiply(utility, x)) + lam * (m - cp.sum(x)))
    constraints = [
        x >= 0,
        x <= (goodput > 0).astype(float),
        cp.sum(x, axis=1) <= 1,
        cp.sum(x @ reduce, axis=0) <= problem.capacity,
    ]
    value = cp.Problem(objective, constraints).solve(solver=cp.HIGHS)
    return cpu_seconds() - start, float(value)


def shock_objective(
    policy: Sia, problem: PolicyInput, chosen: dict[int, tuple[int, int, int]]
) -> float:
    configs = configurations(problem.capacity, policy.options.gpus_per_node)
    index = {
        (problem.worker_types[c.worker], c.num_nodes, c.gpus): i for i, c in enumerate(configs)
    }
    goodput = policy.goodputs(problem, configs)
    utility = policy.utilities(problem, configs, goodput)
    total = policy.options.lambda_n * len(problem.jobs)
    for row, job in enumerate(problem.jobs):
        if job.job_id in chosen:
            total += utility[row, index[chosen[job.job_id]]] - policy.options.lambda_n
    return total


def bench_sia(count: int, rounds: int) -> dict[str, float]:
    jobs = active_jobs(count, seed=1)
    policy = Sia().for_run(0)
    solver = SolverSpec()
    start = cpu_seconds()
    policy.allocate(problem_for(jobs, SIA_CLUSTER, 0.0), solver)
    first = cpu_seconds() - start
    shock_times, cvx_times, gaps = [], [], []
    for r in range(1, rounds + 1):
        jobs = advanced(jobs, 0.02)
        problem = problem_for(jobs, SIA_CLUSTER, r * ROUND_S + 1000.0)
        # The cvxpy baseline sees the policy's state before this round's decision.
        cvx_time, cvx_value = cvxpy_sia(policy, problem)
        before = copy.deepcopy(policy.ledger)
        start = cpu_seconds()
        allocation = policy.allocate(problem, solver)
        shock_times.append(cpu_seconds() - start)
        cvx_times.append(cvx_time)
        assert allocation.elastic is not None
        chosen = {j: (g.worker_type, g.num_nodes, g.gpus) for j, g in allocation.elastic.items()}
        # Evaluate shock's answer with the state the round started from.
        after, policy.ledger = policy.ledger, before
        gaps.append(shock_objective(policy, problem, chosen) - cvx_value)
        policy.ledger = after
    return {
        "jobs": count,
        "first_round_s": first,
        "round_s_mean": float(np.mean(shock_times)),
        "round_s_max": float(np.max(shock_times)),
        "cvxpy_round_s_mean": float(np.mean(cvx_times)),
        "objective_gap_max": float(np.max(np.abs(gaps))),
    }


def bench_pollux(count: int, rounds: int) -> dict[str, float]:
    jobs = active_jobs(count, seed=2)
    policy = Pollux().for_run(0)
    solver = SolverSpec()
    start = cpu_seconds()
    policy.allocate(problem_for(jobs, {"t4": 64}, 0.0), solver)
    first = cpu_seconds() - start
    times = []
    for r in range(1, rounds + 1):
        jobs = advanced(jobs, 0.02)
        start = cpu_seconds()
        policy.allocate(problem_for(jobs, {"t4": 64}, r * ROUND_S + 1000.0), solver)
        times.append(cpu_seconds() - start)
    return {
        "jobs": count,
        "first_round_s": first,
        "round_s_mean": float(np.mean(times)),
        "round_s_max": float(np.max(times)),
    }


@dataclass(frozen=True)
class FidelityRow:
    """One `shock run` beside the artifact's numbers for the same policy and workload."""

    name: str
    args: tuple[str, ...]
    artifact: str  # what the artifact's numbers are
    avg_jct_s: float
    makespan_s: float | None


POLLUX_WORKLOAD_6 = ("--preset", "pollux", "--trace", str(WORKLOAD))
POLLUX_SOURCE = "Pollux artifact, workload 6"
FIDELITY_ROWS: tuple[FidelityRow, ...] = (
    FidelityRow(
        "pollux", (*POLLUX_WORKLOAD_6, "--policy", "pollux"), POLLUX_SOURCE, 2446.13125, 58589.0
    ),
    FidelityRow(
        "optimus", (*POLLUX_WORKLOAD_6, "--policy", "optimus"), POLLUX_SOURCE, 5301.875, 66246.0
    ),
    FidelityRow(
        "tiresias_pollux",
        (*POLLUX_WORKLOAD_6, "--policy", "tiresias_pollux"),
        POLLUX_SOURCE,
        3469.69375,
        78556.0,
    ),
    # Sia's rows (its artifact's workloads, `--preset sia`) go here.
)


def run_cli(args: tuple[str, ...]) -> tuple[dict[str, Any], float]:
    """`shock run ARGS --json FILE` as a child process: its results document and the CPU
    seconds (user + system) of it and everything it started."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.json"
        command = [sys.executable, "-m", "shock", "run", "--quiet", *args, "--json", str(out)]
        child = subprocess.Popen(command)
        _, status, usage = os.wait4(child.pid, 0)
        if status != 0:
            raise SystemExit(f"failed ({status}): {' '.join(command)}")
        document = json.loads(out.read_text())
    return document, usage.ru_utime + usage.ru_stime


def bench_fidelity(names: list[str] | None) -> list[dict[str, Any]]:
    rows = [r for r in FIDELITY_ROWS if names is None or r.name in names]
    results = []
    for row in rows:
        document, cpu = run_cli(row.args)
        metrics = document["metrics"]
        results.append(
            {
                "row": row.name,
                "artifact": row.artifact,
                "avg_jct_s": metrics["avg_jct_s"],
                "artifact_avg_jct_s": row.avg_jct_s,
                "makespan_s": metrics["makespan_s"],
                "artifact_makespan_s": row.makespan_s,
                "cpu_s": cpu,
            }
        )
    return results


def fidelity_table(results: list[dict[str, Any]]) -> list[list[str]]:
    lines = [
        [
            "policy",
            "workload",
            "avg JCT (s)",
            "artifact",
            "ratio",
            "makespan (s)",
            "artifact",
            "ratio",
            "CPU s",
        ]
    ]
    for r in results:
        makespan_ref = r["artifact_makespan_s"]
        lines.append(
            [
                r["row"],
                r["artifact"],
                f"{r['avg_jct_s']:,.0f}",
                f"{r['artifact_avg_jct_s']:,.0f}",
                f"{r['avg_jct_s'] / r['artifact_avg_jct_s']:.2f}",
                f"{r['makespan_s']:,.0f}",
                "" if makespan_ref is None else f"{makespan_ref:,.0f}",
                "" if makespan_ref is None else f"{r['makespan_s'] / makespan_ref:.2f}",
                f"{r['cpu_s']:.1f}",
            ]
        )
    return lines


def write_markdown(path: Path, results: list[dict[str, Any]]) -> None:
    header, *rows = fidelity_table(results)
    text = [
        "# Goodput-aware policies beside their artifacts",
        "",
        "Written by `python benchmarks/goodput.py --only fidelity --markdown "
        f"{path.as_posix()}`: each policy run through `shock run` on its artifact's workload "
        "with the artifact's preset, beside the artifact's own numbers (ratio: shock / "
        "artifact), and the CPU seconds of the `shock run` process.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        *margins(results),
    ]
    path.write_text("\n".join(text))


# Pollux's lead over its baselines in average JCT (its README: about 48% and 32%).
PAPER_MARGINS = {"optimus": 0.48, "tiresias_pollux": 0.32}


def margins(results: list[dict[str, Any]]) -> list[str]:
    """Lines giving pollux's lead in average JCT over each baseline run, beside the paper's."""
    jct = {r["row"]: r["avg_jct_s"] for r in results}
    if "pollux" not in jct:
        return []
    lines = []
    for baseline, paper in PAPER_MARGINS.items():
        if baseline in jct:
            lead = 1 - jct["pollux"] / jct[baseline]
            lines.append(
                f"pollux's average JCT is {lead:.0%} lower than {baseline}'s (paper: {paper:.0%})."
            )
    return [line + "\n" for line in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default="20,40,80,160", help="active job counts")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("sia", "pollux", "fidelity"), default=None)
    parser.add_argument("--runs", default=None, help="fidelity rows to run (default: all)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None, help="write the fidelity table")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.jobs.split(",")]
    began = time.perf_counter()
    only = args.only
    sia = [bench_sia(c, args.rounds) for c in counts] if only in (None, "sia") else []
    pollux = [bench_pollux(c, args.rounds) for c in counts] if only in (None, "pollux") else []
    runs = None if args.runs is None else args.runs.split(",")
    fidelity = bench_fidelity(runs) if only in (None, "fidelity") else []
    console = Console()
    table = Table(title="sia on 64 GPUs (t4=32, v100=16, a100=16): CPU s per round")
    for column in (
        "jobs",
        "first round",
        "round mean",
        "round max",
        "cvxpy round",
        "cvxpy / shock",
        "objective gap",
        "target <= 1 s",
    ):
        table.add_column(column, justify="right")
    for row in sia:
        table.add_row(
            str(row["jobs"]),
            f"{row['first_round_s']:.3f}",
            f"{row['round_s_mean']:.3f}",
            f"{row['round_s_max']:.3f}",
            f"{row['cvxpy_round_s_mean']:.3f}",
            f"{row['cvxpy_round_s_mean'] / row['round_s_mean']:.1f}x",
            f"{row['objective_gap_max']:.2g}",
            "yes" if row["round_s_max"] <= 1.0 else "NO",
        )
    if sia:
        console.print(table)
    table = Table(title="pollux on 16 x 4 T4 (population 100, 100 generations): CPU s per round")
    for column in ("jobs", "first round", "round mean", "round max"):
        table.add_column(column, justify="right")
    for row in pollux:
        table.add_row(
            str(row["jobs"]),
            f"{row['first_round_s']:.3f}",
            f"{row['round_s_mean']:.3f}",
            f"{row['round_s_max']:.3f}",
        )
    if pollux:
        console.print(table)
    if fidelity:
        lines = fidelity_table(fidelity)
        table = Table(
            title="beside the artifacts: shock run through the CLI (target: ratio 0.9-1.1)"
        )
        for column in lines[0]:
            table.add_column(column, justify="right")
        for line in lines[1:]:
            table.add_row(*line)
        console.print(table)
        for line in margins(fidelity):
            console.print(line.strip())
        if args.markdown is not None:
            write_markdown(args.markdown, fidelity)
    console.print(f"wall {time.perf_counter() - began:.1f} s")
    if args.json is not None:
        document = {"sia": sia, "pollux": pollux, "fidelity": fidelity}
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
