"""Policy scaling: one allocation of each policy on N active jobs, beside cvxpy + ECOS.

For N = 32, 64, ..., --max-jobs (2048; --quick: 256) it times one allocation (after a warm-up
call on a tiny instance) of max_min_fairness_perf, finish_time_fairness_perf and
max_min_fairness_packed on `shock.engine.bench.bench_instance(N)` (N single-GPU jobs of
Gavel's job types, N/4 GPUs of each of v100, p100, k80), and of the same problem stated in
cvxpy and solved with ECOS (benchmarks/cvxpy_baselines.py) in the same run. A policy that
is not installed is reported as such. The packed problem has a row per pair of jobs (N^2/2),
so it runs up to --packed-max-jobs (512, where Gavel's reference number is).

The partitions section times max_min_fairness_perf on 10,000 active jobs with POP
partitioning (--partitions K) against the unpartitioned HiGHS optimum, on the instance as
generated (26 job types: identical jobs, which the policy merges into one LP row each) and
with every throughput jittered by up to 5% (no two jobs alike: an LP with 10,000 job rows).

Each cell is the fastest of --repeats timings (3; only cells under 2 s are repeated).

    python benchmarks/policy_scaling.py [--quick] [--max-jobs N] [--json results.json]
                                        [--plugin MODULE ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cvxpy_baselines

from shock.core.errors import ShockError, UnknownPluginError
from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.solver import SolverSpec
from shock.engine.bench import Timing, bench_instance, time_allocation
from shock.lp.partition import PartitionedPolicy
from shock.plugins.policies.max_min_fairness import normalised_rates


@dataclass(frozen=True)
class Case:
    policy: str
    baseline: str
    baseline_note: str
    gavel_jobs: int  # Gavel's reference number on this kind of machine
    gavel_seconds: float
    target_speedup: float  # shock must be at least this much faster than Gavel
    max_jobs: int | None = None  # None: every N


CASES = (
    Case(
        "max_min_fairness_perf",
        "cvxpy_max_min_fairness_perf",
        "Gavel's own (vectorised) cvxpy form",
        2048,
        0.065,
        1.0,
    ),
    Case(
        "finish_time_fairness_perf",
        "cvxpy_finish_time_fairness_perf",
        "per-job cvxpy terms, as Gavel builds them",
        2048,
        6.7,
        10.0,
    ),
    Case(
        "max_min_fairness_packed",
        "cvxpy_max_min_fairness_packed",
        "sparse-matrix cvxpy form (stronger than Gavel's per-job loops)",
        512,
        33.0,
        10.0,
    ),
)
VECTORISED_FTF = "cvxpy_finish_time_fairness_perf_vectorised"
PARTITION_JOBS = 10_000
PARTITION_COUNTS = (4, 8, 16)
OPTIMUM_LIMIT_S = 60.0
NOT_INSTALLED = "n/a (not installed)"
REPEAT_BELOW_S = 2.0


def lookup(registry: PluginRegistry, name: str) -> Policy | None:
    try:
        policy: Policy = registry.get("policy", name)
    except UnknownPluginError:
        return None
    return policy


def timed(
    policy: Policy | None, problem: PolicyInput, solver: SolverSpec, repeats: int = 1
) -> Timing | None:
    """The fastest of `repeats` timed allocations (repeated only while one takes under
    REPEAT_BELOW_S), each on a fresh instance for the run, so stateful policies start clean."""
    if policy is None:
        return None
    best = time_allocation(policy.for_run(0), problem, solver)
    for _ in range(repeats - 1):
        if best.status != "optimal" or best.seconds >= REPEAT_BELOW_S:
            break
        again = time_allocation(policy.for_run(0), problem, solver, warm_up=False)
        if again.seconds < best.seconds:
            best = again
    return best


def seconds(timing: Timing | None) -> str:
    if timing is None:
        return NOT_INSTALLED
    if timing.status != "optimal":
        return f"failed: {timing.status}"
    return f"{timing.seconds:.4f}"


def relative(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0:
        return None
    return (value - reference) / abs(reference)


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3%}"


def mmf_floor(problem: PolicyInput, allocation: Allocation) -> float:
    """The max-min objective of an allocation on the whole problem: the smallest normalised
    throughput over all jobs (so a partitioned allocation is judged on the full instance)."""
    rates = normalised_rates(problem, heterogeneity_aware=True)
    rows = {key: row for row, key in enumerate(allocation.keys)}
    order = [rows[job.job_id] for job in problem.jobs]
    return float((rates * allocation.fractions[order]).sum(axis=1).min())


def scaling(
    registry: PluginRegistry,
    sizes: list[int],
    packed_max: int,
    repeats: int,
    jitter: float,
    console: Console,
) -> tuple[Table, list[dict[str, object]], dict[str, dict[int, Timing | None]]]:
    solver = SolverSpec()
    instance = f", throughputs jittered by up to {jitter:.0%}" if jitter else ""
    table = Table(title=f"One allocation: shock (HiGHS) vs cvxpy + ECOS, same run{instance}")
    for column in (
        "N",
        "policy",
        "shock (s)",
        "cvxpy+ECOS (s)",
        "speed-up",
        "cvxpy vectorised (s)",
        "objective rel. diff",
    ):
        table.add_column(column, justify="right")
    documents: list[dict[str, object]] = []
    shock_timings: dict[str, dict[int, Timing | None]] = {c.policy: {} for c in CASES}
    vectorised = lookup(registry, VECTORISED_FTF)
    for n in sizes:
        problem = bench_instance(n, seed=0, jitter=jitter)
        for case in CASES:
            if n > packed_max and case.policy == "max_min_fairness_packed":
                table.add_row(str(n), case.policy, "skipped (> --packed-max-jobs)", "", "", "", "")
                continue
            policy = lookup(registry, case.policy)
            ours = timed(policy, problem, solver, repeats)
            shock_timings[case.policy][n] = ours
            theirs = timed(lookup(registry, case.baseline), problem, solver, repeats)
            extra = (
                timed(vectorised, problem, solver, repeats)
                if case.policy.startswith("finish")
                else None
            )
            speedup = (
                f"{theirs.seconds / ours.seconds:.1f}x"
                if ours is not None and theirs is not None and ours.status == "optimal"
                else "n/a"
            )
            gap = relative(ours.objective if ours else None, theirs.objective if theirs else None)
            table.add_row(
                str(n),
                case.policy,
                seconds(ours),
                seconds(theirs),
                speedup,
                seconds(extra) if extra is not None else "",
                percent(gap),
            )
            documents.append(
                {
                    "jobs": n,
                    "policy": case.policy,
                    "shock": None if ours is None else ours.to_document(),
                    "cvxpy": None if theirs is None else theirs.to_document(),
                    "cvxpy_vectorised": None if extra is None else extra.to_document(),
                    "objective_relative_difference": gap,
                }
            )
        console.print(f"  N = {n} done", style="dim")
    return table, documents, shock_timings


def reference_table(shock_timings: dict[str, dict[int, Timing | None]]) -> Table:
    table = Table(title="Against Gavel's numbers on this kind of machine")
    for column in ("policy", "N", "Gavel (s)", "target", "shock (s)", "vs Gavel", "met"):
        table.add_column(column, justify="right")
    for case in CASES:
        target = (
            "no slower than Gavel"
            if case.target_speedup == 1.0
            else f">= {case.target_speedup:.0f}x faster"
        )
        timings = shock_timings[case.policy]
        ours = timings.get(case.gavel_jobs)
        ratio, met = "", ""
        if case.gavel_jobs not in timings:
            measured = f"N = {case.gavel_jobs} not run"
        elif ours is None:
            measured = NOT_INSTALLED
        elif ours.status != "optimal":
            measured, met = f"failed: {ours.status}", "no"
        else:
            speedup = case.gavel_seconds / ours.seconds
            measured = f"{ours.seconds:.4f}"
            ratio = f"{speedup:.1f}x faster" if speedup >= 1 else f"{1 / speedup:.1f}x slower"
            met = "yes" if speedup >= case.target_speedup else "no"
        table.add_row(
            case.policy,
            str(case.gavel_jobs),
            f"{case.gavel_seconds:g}",
            target,
            measured,
            ratio,
            met,
        )
    return table


def unpartitioned_optimum(
    policy: Policy, jobs: int, jitter: float, console: Console
) -> tuple[int, PolicyInput, Timing]:
    """The unpartitioned optimum at `jobs`, or at the largest halved N where HiGHS finishes
    within OPTIMUM_LIMIT_S."""
    limited = SolverSpec(time_limit_s=OPTIMUM_LIMIT_S)
    n = jobs
    while True:
        problem = bench_instance(n, seed=0, jitter=jitter)
        timing = time_allocation(policy, problem, limited)
        if timing.status == "optimal" or n <= 32:
            return n, problem, timing
        console.print(
            f"  unpartitioned optimum at {n} jobs not found within {OPTIMUM_LIMIT_S:.0f} s "
            f"({timing.status}); trying {n // 2}"
        )
        n //= 2


def partitions_section(
    registry: PluginRegistry, console: Console
) -> tuple[Table, list[dict[str, object]], list[str]]:
    policy = lookup(registry, "max_min_fairness_perf")
    assert policy is not None, "max_min_fairness_perf is built in"
    solver = SolverSpec()
    table = Table(title=f"POP partitioning: max_min_fairness_perf, {PARTITION_JOBS:,} active jobs")
    for column in (
        "instance",
        "jobs",
        "partitions",
        "seconds",
        "speed-up",
        "objective (min over all jobs)",
        "vs unpartitioned optimum",
    ):
        table.add_column(column, justify="right")
    documents: list[dict[str, object]] = []
    notes: list[str] = []
    for label, jitter in (("as generated", 0.0), ("distinct jobs (5% jitter)", 0.05)):
        n, problem, optimum = unpartitioned_optimum(policy, PARTITION_JOBS, jitter, console)
        if n != PARTITION_JOBS:
            notes.append(
                f"{label}: the unpartitioned optimum took over {OPTIMUM_LIMIT_S:.0f} s at "
                f"{PARTITION_JOBS:,} jobs; this section uses {n:,} jobs, the largest N where it "
                "finished."
            )
        best = mmf_floor(problem, optimum.allocation) if optimum.allocation else None
        rows: list[tuple[int, Timing]] = [(1, optimum)]
        for k in PARTITION_COUNTS:
            partitioned = PartitionedPolicy(policy.for_run(0), k, seed=0)
            rows.append((k, time_allocation(partitioned, problem, solver)))
        for k, timing in rows:
            value = mmf_floor(problem, timing.allocation) if timing.allocation is not None else None
            if value is not None and timing.objective is not None:
                # The stacked objective (smallest part floor) is the whole problem's floor.
                assert abs(value - timing.objective) <= 1e-6 * max(1.0, abs(value)), (
                    value,
                    timing.objective,
                )
            gap = relative(value, best)
            table.add_row(
                label,
                f"{n:,}",
                "1 (unpartitioned)" if k == 1 else str(k),
                f"{timing.seconds:.4f}" if timing.status == "optimal" else timing.status,
                f"{optimum.seconds / timing.seconds:.2f}x" if k > 1 else "",
                "n/a" if value is None else f"{value:.6f}",
                percent(gap),
            )
            documents.append(
                {
                    "instance": label,
                    "jobs": n,
                    "partitions": k,
                    **timing.to_document(),
                    "objective_min_over_jobs": value,
                    "objective_relative_to_unpartitioned": gap,
                }
            )
        console.print(f"  partitions: {label} done", style="dim")
    return table, documents, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-jobs", type=int, default=2048, help="largest N (default 2048)")
    parser.add_argument("--quick", action="store_true", help="N up to 256 only")
    parser.add_argument(
        "--packed-max-jobs",
        type=int,
        default=512,
        help="largest N for max_min_fairness_packed (pairs grow as N^2; default 512)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help=f"best of this many timings per cell (only below {REPEAT_BELOW_S:g} s; default 3)",
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="also load this plugin module (e.g. a policy not yet registered as entry point)",
    )
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="scaling instances with every throughput jittered by up to this fraction, so no "
        "two jobs are alike and no policy can merge identical jobs (default 0: as generated)",
    )
    parser.add_argument("--no-partitions", action="store_true", help="skip the POP section")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args()
    max_jobs = min(args.max_jobs, 256) if args.quick else args.max_jobs
    sizes = [n for n in (2**e for e in range(5, 30)) if n <= max_jobs]
    extra = [cvxpy_baselines, *(importlib.import_module(name) for name in args.plugin)]
    registry = PluginRegistry(load_plugins(extra_plugins=extra))
    console = Console(width=170)
    missing = [c.policy for c in CASES if lookup(registry, c.policy) is None]
    if missing:
        console.print(f"not installed (rows say so): {', '.join(missing)}")
    table, documents, shock_timings = scaling(
        registry, sizes, args.packed_max_jobs, max(1, args.repeats), args.jitter, console
    )
    console.print(table)
    console.print("baselines: " + "; ".join(f"{c.policy}: {c.baseline_note}" for c in CASES))
    console.print(reference_table(shock_timings))
    output: dict[str, object] = {"scaling": documents}
    if not args.no_partitions:
        try:
            partition_table, partition_documents, notes = partitions_section(registry, console)
        except ShockError as exc:
            console.print(f"partitions section failed: {exc}")
        else:
            console.print(partition_table)
            for note in notes:
                console.print(note)
            output["partitions"] = partition_documents
    if args.json:
        args.json.write_text(json.dumps(output, indent=2, default=_jsonable))


def _jsonable(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


if __name__ == "__main__":
    main()
