"""sia next to Sia's artifact: its per-round decision time on 64 GPUs, and (given Sia's data)
average JCT and makespan of a workload next to the artifact's simulator on the same one.

Sia's data has no licence, so shock bundles none of it. The artifact is not run here; its
numbers below were measured on this machine with the command recorded next to them (Sia's
repository siasosp23/artifacts at aaf7a0d, Python 3.10, cvxpy 1.3.2 with CBC from cylp, the
solver's threads set to 1, everything else as its run_experiment.sh):

    cd sia-simulator && python multi_simulator.py WORKLOAD --policy=sia --policy_p_val=-0.5 \\
        --mip_lambda_a=0.01 --mip_lambda_n=1.1 --interval=60 --project_throughputs \\
        --share_max_replicas --output=OUT.log

1. Decision time (always): the sia-64 cluster (t4=24 in nodes of 4, a100=16 and rtx2080ti=24
   in nodes of 8), J active jobs from Pollux's bundled workload 6, each part-way through its
   training, bootstrapped for a few rounds first so that jobs hold several GPUs; then
   `--rounds` rounds, each advancing every job and timing `allocate` (the MILP on HiGHS and
   the goodput tables). Models: Sia's profiles with `--profiles`, else Pollux's bundled ones
   scaled by seeded per-type speeds. CPU seconds of this process. Target: at most 1 s.
2. Fidelity (with `--profiles PATH --workload NAME=CSV`): `shock run --preset sia --policy sia
   --trace CSV --goodput-profiles PATH` through the CLI, CPU seconds of the process
   tree; its average JCT and makespan against the artifact's recorded ones for NAME. Target:
   within 10%.

    python benchmarks/goodput_sia.py [--jobs 20,40,80,160] [--rounds 5] [--profiles PATH]
        [--workload saturn-w1-first20=PATH.csv ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.core.trace import read_trace
from shock.plugins.policies.sia import Sia, SiaOptions

WORKLOAD = Path(
    str(package_files.files("shock") / "data" / "pollux" / "workloads" / "workload-6.csv")
)
CLUSTER = {"a100": 16, "rtx2080ti": 24, "t4": 24}
NODE_GPUS = "t4:4,a100:8,rtx2080ti:8"
ROUND_S = 60.0


@dataclass(frozen=True)
class ArtifactRun:
    """One run of Sia's artifact simulator, as measured (see the module docstring)."""

    workload: str  # what was run
    avg_jct_s: float
    makespan_s: float
    cpu_s: float  # user + system of the simulator's process


# Workload name -> the artifact's numbers (its makespan as its utils/print_run_stats.py
# counts it: last completion - first arrival). `saturn-w1-first20`: the first 20 jobs (header
# and lines 2-21) of its workloads/saturn/workload-1.csv; measured 2026-11-28 on the shared
# 2-core machine (9 min 23 s wall beside other work).
ARTIFACT: dict[str, ArtifactRun] = {
    "saturn-w1-first20": ArtifactRun(
        "first 20 jobs of workloads/saturn/workload-1.csv",
        avg_jct_s=1393.4,
        makespan_s=8929.0 - 401.0,
        cpu_s=77.37 + 0.28,
    ),
    # The whole of its workloads/saturn/workload-1.csv (160 jobs); 1 h 10 min wall.
    "saturn-w1": ArtifactRun(
        "workloads/saturn/workload-1.csv",
        avg_jct_s=2091.0375,
        makespan_s=44859.0,
        cpu_s=602.69 + 1.14,
    ),
}


@dataclass(frozen=True)
class Fidelity:
    workload: str
    shock: dict[str, float]
    artifact: ArtifactRun | None


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def active_jobs(count: int, seed: int) -> tuple[PolicyJob, ...]:
    trace = read_trace(WORKLOAD, default_registry())
    rng = np.random.default_rng(seed)
    return tuple(
        PolicyJob(
            job_id=spec.job_id,
            job_type=spec.job_type,
            scale_factor=spec.scale_factor,
            priority_weight=1.0,
            arrival_time=0.0,
            total_steps=spec.total_steps,
            steps_done=float(rng.uniform(0, 0.8) * spec.total_steps),
        )
        for spec in trace.jobs[:count]
    )


def advanced(jobs: tuple[PolicyJob, ...], fraction: float) -> tuple[PolicyJob, ...]:
    return tuple(
        dataclasses.replace(
            j, steps_done=min(j.total_steps - 1.0, j.steps_done + fraction * j.total_steps)
        )
        for j in jobs
    )


def problem_for(jobs: tuple[PolicyJob, ...], now: float, profiles: str = "") -> PolicyInput:
    rng = np.random.default_rng(len(jobs))
    # Per-type speeds (used without profiles): the T4 slowest.
    speeds = np.column_stack(
        [rng.uniform(2.5, 4.0, len(jobs)), rng.uniform(1.2, 2.0, len(jobs)), np.ones(len(jobs))]
    )
    return PolicyInput(
        now=now,
        jobs=jobs,
        worker_types=tuple(CLUSTER),
        capacity=np.array(list(CLUSTER.values()), dtype=float),
        throughputs=speeds,
        goodput_profiles=profiles or None,
    )


def bench_rounds(count: int, rounds: int, profiles: str) -> dict[str, float]:
    policy = Sia(SiaOptions(node_gpus=NODE_GPUS)).for_run(0)
    solver = SolverSpec()
    jobs = active_jobs(count, seed=1)
    start = cpu_seconds()
    policy.allocate(problem_for(jobs, 0.0, profiles), solver)
    first = cpu_seconds() - start
    # Bootstrapping: a few rounds in which jobs grow from one GPU.
    now = 0.0
    for _ in range(6):
        now += 600.0
        jobs = advanced(jobs, 0.005)
        policy.allocate(problem_for(jobs, now, profiles), solver)
    times, held = [], []
    for _ in range(rounds):
        now += ROUND_S
        jobs = advanced(jobs, 0.01)
        problem = problem_for(jobs, now, profiles)
        start = cpu_seconds()
        allocation = policy.allocate(problem, solver)
        times.append(cpu_seconds() - start)
        grants = (allocation.elastic or {}).values()
        held.append(max((g.gpus for g in grants), default=0))
    return {
        "jobs": count,
        "configurations": len(policy.configurations(problem_for(jobs, now))),
        "first_round_s": first,
        "round_s_mean": float(np.mean(times)),
        "round_s_max": float(np.max(times)),
        "largest_grant": float(max(held)),
    }


def run_shock(workload: Path, profiles: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.json"
        before = children_cpu_seconds()
        began = time.perf_counter()
        subprocess.run(
            [
                sys.executable, "-m", "shock", "run", "--quiet", "--preset", "sia",
                "--policy", "sia", "--trace", str(workload),
                "--goodput-profiles", profiles, "--json", str(out),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        cpu = children_cpu_seconds() - before
        metrics = json.loads(out.read_text())["metrics"]
    return {
        "avg_jct_s": float(metrics["avg_jct_s"]),
        "makespan_s": float(metrics["makespan_s"]),
        "cpu_s": cpu,
        "wall_s": time.perf_counter() - began,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default="20,40,80,160", help="active job counts")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profiles", default="", help="Sia's sia-simulator/traces folder")
    parser.add_argument(
        "--workload", action="append", default=[], help="NAME=CSV: a workload the artifact ran"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    console = Console(width=160)  # the fidelity table is wide
    counts = [int(c) for c in args.jobs.split(",") if c]
    rows = [bench_rounds(c, args.rounds, args.profiles) for c in counts]
    models = "Sia's profiles" if args.profiles else "Pollux's models x seeded speeds"
    table = Table(title=f"sia on sia-64 (t4=24, a100=16, rtx2080ti=24; {models}): CPU s/round")
    for column in ("jobs", "configs", "first round", "round mean", "round max", "<= 1 s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["jobs"]),
            str(row["configurations"]),
            f"{row['first_round_s']:.2f}",
            f"{row['round_s_mean']:.3f}",
            f"{row['round_s_max']:.3f}",
            "yes" if row["round_s_max"] <= 1.0 else "NO",
        )
    console.print(table)
    fidelity: list[Fidelity] = []
    for item in args.workload:
        name, _, path = item.partition("=")
        if not args.profiles:
            parser.error("--workload needs --profiles")
        fidelity.append(Fidelity(name, run_shock(Path(path), args.profiles), ARTIFACT.get(name)))
    if fidelity:
        table = Table(title="sia vs Sia's artifact simulator (same workload)")
        for column in (
            "workload", "avg JCT shock", "artifact", "ratio", "makespan shock", "artifact",
            "ratio", "shock CPU s", "artifact CPU s", "within 10%",
        ):  # fmt: skip
            table.add_column(column, justify="right")
        for item in fidelity:
            shock, artifact = item.shock, item.artifact
            if artifact is None:
                table.add_row(item.workload, f"{shock['avg_jct_s']:.0f}", "not run", "",
                              f"{shock['makespan_s']:.0f}", "not run", "", f"{shock['cpu_s']:.1f}",
                              "", "")  # fmt: skip
                continue
            jct = shock["avg_jct_s"] / artifact.avg_jct_s
            span = shock["makespan_s"] / artifact.makespan_s
            table.add_row(
                item.workload,
                f"{shock['avg_jct_s']:.0f}",
                f"{artifact.avg_jct_s:.0f}",
                f"{jct:.2f}",
                f"{shock['makespan_s']:.0f}",
                f"{artifact.makespan_s:.0f}",
                f"{span:.2f}",
                f"{shock['cpu_s']:.1f}",
                f"{artifact.cpu_s:.1f}",
                "yes" if abs(jct - 1) <= 0.1 and abs(span - 1) <= 0.1 else "NO",
            )
        console.print(table)
    if args.json is not None:
        document = {
            "rounds": rows,
            "fidelity": [dataclasses.asdict(item) for item in fidelity],
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
