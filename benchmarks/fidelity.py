"""Fidelity: the same trace on the gRPC cluster and in the simulator, job by job.

Runs a small trace with `--backend grpc` (local workers, real job processes), then simulates
it with the measured throughputs (the state directory's `measured_throughputs.json`) and, as the
launch overhead, the mean time a job took from its launch to its "started" report, charged on
every start that does not keep its GPUs (first starts included, as real jobs pay them).
A first cluster run (skip it with --no-profile-run) measures throughputs that the measured
run starts from, so that both sides plan their first rounds with the same rates.
Prints each job's JCT on both and their difference, and the makespan difference. Shockwave
reports 5-12% between its physical cluster and its simulator; the target here is 5%.

    python benchmarks/fidelity.py [--job-command "python tests/fake_job.py"] [--round-length 10]

The default job command is the training harness (`python -m shock.workloads.run`).
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sqlite3
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from shock.core.results import RunResult
from shock.core.run import ClusterRuntime
from shock.core.runner import RunOptions, run

# (job type, steps, priority weight): five families, ~6-12 s each alone on the stand-in job.
# Distinct weights give distinct shares: with equal ones, which of several equally owed jobs
# runs first is decided by timing noise on a cluster, and per-job JCTs swap.
JOBS = [
    ("ResNet-18 (batch size 32)", 240, 1.0),
    ("ResNet-50 (batch size 32)", 120, 1.5),
    ("Transformer (batch size 32)", 150, 2.0),
    ("LM (batch size 32)", 300, 2.5),
    ("ResNet-18 (batch size 32)", 200, 3.0),
    ("Recommendation (batch size 32)", 400, 3.5),
]
TARGET = 0.05


def write_trace(path: Path) -> Path:
    lines = [
        "\t".join([job_type, "python3 train.py", "wd", "--num_steps", "0", str(steps), "1",
                   str(weight), "-1.000000", "0"])
        for job_type, steps, weight in JOBS
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def launch_overhead(state_dir: Path) -> float:
    """Mean seconds from a launch to the job's "started" report (process start, imports,
    checkpoint restore), over every run."""
    db = sqlite3.connect(state_dir / "journal.sqlite")
    rows = db.execute(
        "SELECT started_at - launched_at FROM runs WHERE started_at IS NOT NULL"
    ).fetchall()
    db.close()
    return sum(r[0] for r in rows) / len(rows) if rows else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job-command", help="command that runs one job")
    parser.add_argument("--round-length", type=float, default=10.0)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument(
        "--no-profile-run", dest="profile_run", action="store_false",
        help="skip the first cluster run that measures throughputs for the second",
    )  # fmt: skip
    args = parser.parse_args()
    if args.job_command is None and importlib.util.find_spec("shock.workloads") is None:
        sys.exit("the training harness (shock.workloads) is not installed: pass --job-command")
    job_command = tuple(shlex.split(args.job_command)) if args.job_command else ()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="shock-fidelity-") as scratch:
        trace = write_trace(Path(scratch) / "fidelity.trace")
        state_dir = Path(scratch) / "state"
        common = RunOptions(
            policy=args.policy, trace=str(trace), cluster="v100=4", gpus_per_server=2,
            round_length_s=args.round_length,
        )  # fmt: skip
        prior = None
        if args.profile_run:
            # A first cluster run measures the throughputs, so that the measured run and the
            # simulator plan their first rounds with the same rates.
            cluster_run(common, job_command, Path(scratch) / "profile")
            prior = str(Path(scratch) / "profile" / "measured_throughputs.json")
        cluster = cluster_run(replace(common, throughputs=prior), job_command, state_dir)
        overhead = launch_overhead(state_dir)
        # The simulator gets the rates the measured run started from (the profile run's
        # measurements, or the measured run's own without one).
        measured = prior or str(state_dir / "measured_throughputs.json")
        simulated = run(replace(
            common, throughputs=measured, preemption_overhead_s=overhead,
            overhead_on_first_start=True,
        ))  # fmt: skip
    report(console, cluster, simulated, overhead)


def cluster_run(options: RunOptions, job_command: tuple[str, ...], state_dir: Path) -> RunResult:
    runtime = ClusterRuntime(job_command=job_command, state_dir=str(state_dir),
                             checkpoint_every_s=5.0)  # fmt: skip
    return run(replace(options, backend="grpc", cluster_runtime=runtime))


def _diff(a: float, b: float) -> float:
    return (a - b) / b if b else float("nan")


def report(console: Console, cluster: RunResult, simulated: RunResult, overhead: float) -> None:
    table = Table(title="fidelity: gRPC cluster vs simulator (measured throughputs)")
    for column in ("job", "type", "steps", "JCT cluster (s)", "JCT simulator (s)", "diff"):
        table.add_column(column, justify="right")
    sim_jct = {r.job_id: r.jct_s for r in simulated.records}
    worst = 0.0
    for record in cluster.records:
        job_type, steps, _ = JOBS[record.job_id]
        diff = _diff(record.jct_s, sim_jct[record.job_id])
        worst = max(worst, abs(diff))
        table.add_row(str(record.job_id), job_type, str(steps), f"{record.jct_s:.1f}",
                      f"{sim_jct[record.job_id]:.1f}", f"{diff:+.1%}")  # fmt: skip
    console.print(table)
    makespan = _diff(cluster.metrics.makespan_s, simulated.metrics.makespan_s)
    average = _diff(cluster.metrics.avg_jct_s, simulated.metrics.avg_jct_s)
    console.print(
        f"makespan: cluster {cluster.metrics.makespan_s:.1f} s, simulator "
        f"{simulated.metrics.makespan_s:.1f} s, diff {makespan:+.1%}\n"
        f"average JCT: cluster {cluster.metrics.avg_jct_s:.1f} s, simulator "
        f"{simulated.metrics.avg_jct_s:.1f} s, diff {average:+.1%}\n"
        f"worst per-job JCT diff {worst:.1%}; launch overhead given to the simulator "
        f"{overhead:.2f} s; target within {TARGET:.0%}: "
        + ("met" if max(worst, abs(makespan)) <= TARGET else "NOT met")
    )


if __name__ == "__main__":
    main()
