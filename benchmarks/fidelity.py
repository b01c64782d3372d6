"""Fidelity: the same trace on the gRPC cluster and in the simulator, job by job.

Three steps, all on this machine's local workers (2 workers, by default with one simulated
GPU per CPU core, at most 2 each: 2 x 1 on a 2-core machine):
1. calibrate: a short cluster run (two jobs per family, about one round each, so jobs are
   preempted and relaunched as in the real run) measures each family's rate; the trace's
   jobs are sized from these rates;
2. measure: the trace (8 jobs of 4 families, each `--job-seconds` long alone) on the
   cluster, starting from the calibrated throughputs;
3. simulate the trace with what that run measured, read from its journal
   (`shock/cluster/timeline.py`): each family's average rate (steps over the seconds from
   "started" until its runs stopped training) and its start overhead (median seconds from
   a round's start until a (re)launched job said "started"), charged on every start that
   does not keep its GPUs, first starts included, as real jobs pay them.

Prints every job's JCT on both and the difference, the makespan difference, where the
(re)launches lost their time, and for comparison the simulator with the earlier model (one
overhead: the mean launch-to-"started" time) and out of sample (rates and overheads from
the calibration run). Shockwave reports 5-12% between its physical cluster and its
simulator; the target here is 5%.

    python benchmarks/fidelity.py [--round-length 15] [--job-seconds 40,120] [--job-command ...]

The default job command is the training harness (`python -m shock.workloads.run`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from shock.cluster.journal import Journal
from shock.cluster.timeline import (
    RunTiming,
    average_rates,
    average_rates_by,
    read_rounds,
    round_lengths,
    run_timings,
    start_overheads,
    steady_rates,
)
from shock.core.events import RoundStarted
from shock.core.hookspecs import hookimpl
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.results import RunResult
from shock.core.throughputs import ThroughputTable, throughputs_to_dict
from shock.core.trace import write_trace as save_trace
from shock.engine.runner import RunOptions, run
from shock.plugins.backends.grpc import GrpcOptions

# Four of Gavel's families, two jobs each. Distinct weights give distinct shares: with equal
# ones, which of several equally owed jobs runs first is decided by timing noise on a
# cluster, and per-job JCTs swap.
FAMILIES = (
    "ResNet-18 (batch size 32)",
    "Transformer (batch size 32)",
    "LM (batch size 20)",
    "Recommendation (batch size 512)",
)
# Each job's length as a fraction of the way from --job-seconds' low to its high end.
LENGTH_FRACTIONS = (0.0, 1.0, 0.25, 0.75, 0.5, 0.125, 0.875, 0.375)
TARGET = 0.05


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_type: str
    steps: int
    weight: float


def write_trace(path: Path, jobs: list[TraceJob]) -> Path:
    """The jobs as a Gavel trace, all arriving at time 0."""
    specs = [
        JobSpec(i, job.job_type, job.steps, priority_weight=job.weight,
                command="python3 train.py", working_directory="wd", num_steps_arg="--num_steps")
        for i, job in enumerate(jobs)
    ]  # fmt: skip
    save_trace(specs, path, default_registry(), "gavel")
    return path


def sized_jobs(rates: dict[str, float], seconds: list[float]) -> list[TraceJob]:
    """Job i of family i mod 4, `seconds[i]` long alone at its family's rate."""
    return [
        TraceJob(FAMILIES[i % len(FAMILIES)],
                 max(1, round(length * rates[FAMILIES[i % len(FAMILIES)]])), 1.0 + 0.5 * i)
        for i, length in enumerate(seconds)
    ]  # fmt: skip


def first_guess_rates(job_command: tuple[str, ...], gpus: int) -> dict[str, float]:
    """Steps/s of each family, measured here in-process and divided by how many jobs share
    a core; only sizes the calibration jobs (the calibration run measures the real rates)."""
    if job_command:
        return dict.fromkeys(FAMILIES, 10.0)  # a stand-in job: its own step rate applies
    import torch

    from shock.workloads.profile import measure_throughput

    torch.set_num_threads(1)
    sharing = max(1.0, gpus / (os.cpu_count() or 1))
    return {f: measure_throughput(f, seconds=0.5).steps_per_s / sharing for f in FAMILIES}


class RoundRecorder:
    """A hook plugin: the jobs of every round the simulator plans."""

    def __init__(self) -> None:
        self.rounds: list[frozenset[int]] = []

    @hookimpl
    def round_started(self, event: RoundStarted) -> None:
        self.rounds.append(frozenset(j for ids, _, _ in event.assignments for j in ids))


def simulate(options: RunOptions) -> tuple[RunResult, list[frozenset[int]]]:
    """A simulator run and the jobs of each of its rounds."""
    registry = default_registry()
    recorder = RoundRecorder()
    registry.manager.register(recorder)
    try:
        return run(options, registry), recorder.rounds
    finally:
        registry.manager.unregister(recorder)  # the registry is shared (cached)


def cluster_rounds(state_dir: Path) -> list[frozenset[int]]:
    journal = Journal(state_dir)
    try:
        return [frozenset(r.placement) for r in read_rounds(journal)]
    finally:
        journal.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job-command", help="command that runs one job (default: the harness)")
    parser.add_argument("--round-length", type=float, default=15.0)
    parser.add_argument(
        "--job-seconds", default="40,120",
        help="LOW,HIGH: the 8 jobs run between LOW and HIGH seconds alone (calibrated rates)",
    )  # fmt: skip
    parser.add_argument(
        "--calibration-seconds", type=float, default=None,
        help="length of each calibration job alone (default: one round)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--gpus-per-worker", type=int, default=None,
        help="simulated GPUs per worker (default: one CPU core per simulated GPU, at most 2)",
    )  # fmt: skip
    parser.add_argument("--checkpoint-every", type=float, default=5.0)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--keep", help="keep the runs' journals, traces and logs in this directory")
    args = parser.parse_args()
    if args.job_command is None and importlib.util.find_spec("shock.workloads") is None:
        sys.exit("the training harness (shock.workloads) is not installed: pass --job-command")
    low, _, high = args.job_seconds.partition(",")
    try:
        low_s, high_s = float(low), float(high or low)
    except ValueError:
        sys.exit(f"--job-seconds: expected LOW,HIGH in seconds, got {args.job_seconds!r}")
    if not 0 < low_s <= high_s:
        sys.exit(f"--job-seconds: need 0 < LOW <= HIGH, got {args.job_seconds!r}")
    job_command = tuple(shlex.split(args.job_command)) if args.job_command else ()
    cores = os.cpu_count() or 1
    if args.gpus_per_worker is None:
        # Jobs on simulated GPUs run on the CPU: with more of them than cores, a job's speed
        # depends on how many others run, which no per-type rate can express.
        args.gpus_per_worker = max(1, min(2, cores // args.workers))
    gpus = args.workers * args.gpus_per_worker
    console = Console(width=150)
    console.print(
        f"{args.workers} workers x {args.gpus_per_worker} simulated GPUs on "
        f"{os.cpu_count()} CPU cores (load {os.getloadavg()[0]:.1f} at start); round "
        f"{args.round_length:g} s; jobs {low_s:g}-{high_s:g} s alone"
    )
    if not job_command and gpus > cores:
        console.print(f"note: {gpus} simulated GPUs share {cores} cores: rates depend on how "
                      "many jobs run at once")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="shock-fidelity-") as scratch_name:
        scratch = Path(args.keep) if args.keep else Path(scratch_name)
        scratch.mkdir(parents=True, exist_ok=True)
        common = RunOptions(
            policy=args.policy, cluster=f"v100={gpus}", gpus_per_server=args.gpus_per_worker,
            round_length_s=args.round_length,
        )  # fmt: skip
        calibration_s = args.calibration_seconds or args.round_length
        guess = first_guess_rates(job_command, gpus)
        calibration = sized_jobs(guess, [calibration_s] * 2 * len(FAMILIES))
        calibrated = cluster_run(common, calibration, job_command, scratch / "calibrate", args)
        calibration_timings = run_timings(scratch / "calibrate", {})
        rates = average_rates(calibration_timings)
        table_path = write_rates(scratch / "calibrated_rates.json", rates)
        calibration_timings = run_timings(scratch / "calibrate", rates)
        overheads = start_overheads(calibration_timings)
        console.print(f"calibration run: makespan {calibrated.metrics.makespan_s:.1f} s")

        seconds = [low_s + f * (high_s - low_s) for f in LENGTH_FRACTIONS]
        jobs = sized_jobs(rates, seconds)
        trace = str(write_trace(scratch / "fidelity.trace", jobs))
        measured_dir = scratch / "measured"
        cluster = cluster_run(
            replace(common, throughputs=table_path), jobs, job_command, measured_dir, args,
            trace=trace,
        )  # fmt: skip
        own_rates = average_rates(run_timings(measured_dir, {}))
        own_table = write_rates(scratch / "measured_rates.json", own_rates)
        timings = run_timings(measured_dir, own_rates)
        own_overheads = start_overheads(timings)
        lengths = round_lengths(measured_dir)
        sim_options = replace(common, trace=trace, overhead_on_first_start=True)
        # As the issue asks: the simulator with the throughputs measured in that run, and
        # the per-family (re)launch overheads measured there too.
        simulated, sim_rounds = simulate(replace(
            sim_options, throughputs=own_table, overhead_by_job_type=own_overheads
        ))  # fmt: skip
        real_rounds = cluster_rounds(measured_dir)
        startups = [t.startup_s for t in timings if t.startup_s is not None]
        old_overhead = statistics.fmean(startups) if startups else 0.0
        old_model = run(replace(sim_options, throughputs=own_table,
                                preemption_overhead_s=old_overhead))  # fmt: skip
        out_of_sample = run(replace(sim_options, throughputs=table_path,
                                    overhead_by_job_type=overheads))  # fmt: skip
        steady = steady_rates(timings)
        steady_table = write_rates(scratch / "steady_rates.json",
                                   {k: v.steps_per_s for k, v in steady.items()})  # fmt: skip
        steady_overheads = {k: own_overheads.get(k, 0.0) + v.warmup_s for k, v in steady.items()}
        steady_model = run(replace(sim_options, throughputs=steady_table,
                                   overhead_by_job_type=steady_overheads))  # fmt: skip
        per_job = simulate_with_job_rates(
            replace(common, overhead_on_first_start=True), jobs, job_rates(timings),
            own_overheads, scratch,
        )  # fmt: skip
    report(console, jobs, cluster, simulated, own_overheads, job_rates(timings), own_rates)
    report_causes(console, timings, calibration_timings)
    report_order(console, real_rounds, sim_rounds)
    if lengths:
        console.print(
            f"rounds: {len(lengths) + 1}, median length {statistics.median(lengths):.2f} s, "
            f"mean {statistics.fmean(lengths):.2f} s (--round-length {args.round_length:g})"
        )
    summary(console, "earlier model (measured rates, one overhead: mean launch->started "
            f"{old_overhead:.2f} s)", cluster, old_model)  # fmt: skip
    summary(console, "out of sample (rates and overheads from the calibration run: "
            + ", ".join(f"{k.split(' ')[0]} {v:.2f} s" for k, v in overheads.items()) + ")",
            cluster, out_of_sample)  # fmt: skip
    summary(console, "steady rate + warm-up per launch (" + ", ".join(
        f"{k.split(' ')[0]} {v.steps_per_s:.1f}/s + {v.warmup_s:.2f} s" for k, v in steady.items()
    ) + ")", cluster, steady_model)  # fmt: skip
    if per_job is not None:
        summary(console, "diagnostic only, not the comparison: the simulator given each job's "
                "own average rate (separates rate noise from scheduling)", cluster, per_job)
    console.print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def simulate_with_job_rates(
    options: RunOptions,
    jobs: list[TraceJob],
    rates: dict[int, float],
    overheads: dict[str, float],
    scratch: Path,
) -> RunResult | None:
    """The simulator with every job its own job type at its own measured rate (a
    diagnostic: how much of the per-job difference is jobs of one family running at
    different speeds, e.g. as the neighbours' load moved)."""
    if any(i not in rates for i in range(len(jobs))):
        return None
    own = [replace(job, job_type=f"{job.job_type} [job {i}]") for i, job in enumerate(jobs)]
    trace = write_trace(scratch / "per_job.trace", own)
    table = write_rates(scratch / "per_job_rates.json",
                        {job.job_type: rates[i] for i, job in enumerate(own)})  # fmt: skip
    by_job = {job.job_type: overheads.get(jobs[i].job_type, 0.0) for i, job in enumerate(own)}
    return run(replace(options, trace=str(trace), throughputs=table,
                       overhead_by_job_type=by_job))  # fmt: skip


def write_rates(path: Path, rates: dict[str, float]) -> str:
    """A throughput table (Gavel's format) with each family's rate on the run's v100s."""
    table = ThroughputTable(source="fidelity: average rates of a cluster run")
    for job_type, steps_per_s in rates.items():
        table.set(job_type, 1, "v100", steps_per_s)
    path.write_text(json.dumps(throughputs_to_dict(table)))
    return str(path)


def cluster_run(
    options: RunOptions,
    jobs: list[TraceJob],
    job_command: tuple[str, ...],
    state_dir: Path,
    args: argparse.Namespace,
    trace: str | None = None,
) -> RunResult:
    trace = trace or str(write_trace(state_dir.with_suffix(".trace"), jobs))
    local = GrpcOptions(
        local_workers=args.workers, gpus_per_worker=args.gpus_per_worker,
        job_command=shlex.join(job_command) if job_command else None, state_dir=state_dir,
        checkpoint_every=args.checkpoint_every,
    )  # fmt: skip
    return run(replace(options, trace=trace, backend="grpc", backend_options=local))


def _diff(a: float, b: float) -> float:
    return (a - b) / b if b else float("nan")


def job_rates(timings: list[RunTiming]) -> dict[int, float]:
    """Each job's own average rate over its runs (as `average_rates` per family)."""
    return average_rates_by(timings, lambda timing: timing.job_id)


def report_order(
    console: Console, real: list[frozenset[int]], simulated: list[frozenset[int]]
) -> None:
    """How often the cluster ran the same jobs in a round as the simulator did."""
    same = sum(a == b for a, b in zip(real, simulated, strict=False))
    first = next((i for i, (a, b) in enumerate(zip(real, simulated, strict=False)) if a != b),
                 None)  # fmt: skip
    console.print(
        f"rounds: cluster {len(real)}, simulator {len(simulated)}; same jobs in "
        f"{same} of {min(len(real), len(simulated))} rounds"
        + ("" if first is None else f" (first difference in round {first + 1}: cluster "
           f"{sorted(real[first])}, simulator {sorted(simulated[first])})")
    )  # fmt: skip


def report(
    console: Console,
    jobs: list[TraceJob],
    cluster: RunResult,
    simulated: RunResult,
    overheads: dict[str, float],
    own_rates: dict[int, float],
    family_rates: dict[str, float],
) -> None:
    table = Table(title="fidelity: gRPC cluster vs simulator (rates and overheads measured)")
    for column in ("job", "type", "steps", "JCT cluster (s)", "JCT simulator (s)", "diff",
                   "own rate / family rate"):  # fmt: skip
        table.add_column(column, justify="right")
    sim_jct = {r.job_id: r.jct_s for r in simulated.records}
    worst = 0.0
    for record in cluster.records:
        job = jobs[record.job_id]
        diff = _diff(record.jct_s, sim_jct[record.job_id])
        worst = max(worst, abs(diff))
        family = family_rates.get(job.job_type, 0.0)
        own = own_rates.get(record.job_id)
        table.add_row(str(record.job_id), job.job_type, str(job.steps), f"{record.jct_s:.1f}",
                      f"{sim_jct[record.job_id]:.1f}", f"{diff:+.1%}",
                      "-" if own is None or family <= 0 else f"{own / family:.2f}")  # fmt: skip
    console.print(table)
    console.print("per-(re)launch overhead given to the simulator: " + ", ".join(
        f"{job_type.split(' ')[0]} {seconds:.2f} s" for job_type, seconds in overheads.items()
    ))  # fmt: skip
    makespan = _diff(cluster.metrics.makespan_s, simulated.metrics.makespan_s)
    summary(console, "simulator", cluster, simulated)
    console.print(
        f"worst per-job JCT diff {worst:.1%}; target within {TARGET:.0%}: "
        + ("met" if max(worst, abs(makespan)) <= TARGET else "NOT met")
    )


def summary(console: Console, label: str, cluster: RunResult, simulated: RunResult) -> None:
    makespan = _diff(cluster.metrics.makespan_s, simulated.metrics.makespan_s)
    average = _diff(cluster.metrics.avg_jct_s, simulated.metrics.avg_jct_s)
    sim_jct = {r.job_id: r.jct_s for r in simulated.records}
    worst = max(abs(_diff(r.jct_s, sim_jct[r.job_id])) for r in cluster.records)
    console.print(
        f"{label}: makespan cluster {cluster.metrics.makespan_s:.1f} s vs "
        f"{simulated.metrics.makespan_s:.1f} s ({makespan:+.1%}); avg JCT "
        f"{cluster.metrics.avg_jct_s:.1f} vs {simulated.metrics.avg_jct_s:.1f} s "
        f"({average:+.1%}); worst job {worst:.1%}"
    )


def report_causes(
    console: Console, timings: list[RunTiming], calibration: list[RunTiming]
) -> None:
    """Medians per family of where a (re)launch's time went, in the measured run."""
    table = Table(title="measured run: seconds per (re)launch, median (calibration in brackets)")
    for column in ("type", "launches", "round start->launch", "launch->started",
                   "lost (all)", "relaunched on kept GPUs"):  # fmt: skip
        table.add_column(column, justify="right")

    def median(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}" if values else "-"

    for family in FAMILIES:
        own = [t for t in timings if t.job_type == family]
        cal = [t for t in calibration if t.job_type == family]
        table.add_row(
            family, str(len(own)),
            f"{median([t.dispatch_wait_s for t in own])} "
            f"({median([t.dispatch_wait_s for t in cal])})",
            f"{median([t.startup_s for t in own if t.startup_s is not None])} "
            f"({median([t.startup_s for t in cal if t.startup_s is not None])})",
            f"{median([t.lost_s for t in own])} ({median([t.lost_s for t in cal])})",
            str(sum(t.relaunched_on_kept_gpus for t in own)),
        )  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
