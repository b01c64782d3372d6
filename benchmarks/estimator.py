"""Gavel's throughput estimator: what estimating costs in JCT, and what it costs in time.

Experiment (Gavel's): single-GPU jobs from Gavel's generator (Poisson arrivals) on 4 V100,
4 P100 and 4 K80 GPUs, LAS with space sharing (`max_min_fairness_packed`). The oracle row
gives the policy Gavel's measured table; the estimated rows hide it (`--estimate-throughputs
all`): each job type is measured alone on every worker type and next to a fraction of the
reference job types (`--profiling-fraction`), the rest comes from matrix completion and the
nearest reference job type, and the simulator runs jobs at the measured rates and reports
them, which replace the estimates as jobs run; one row samples the isolated rates at the
profiling fraction too (`--no-profile-isolated`). LAS without space sharing
(`max_min_fairness_perf`) is the baseline a bad estimate would fall below.

Cost: 100 job types the table lacks (each a Gavel type with its rates scaled by a random
factor per worker type and its co-located shares perturbed), 10 jobs of each, all active:
estimating the 100 types once (matrix completion each), and per round folding in a rate
report from every one of the 1,000 jobs (the engine's `_observe_rates`, with reports that
change every round, as a real cluster's smoothed measurements do). Target: at most 0.1 s
per round.

    python benchmarks/estimator.py [--jobs 300] [--rate 0.8] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shock.core.executor import MeasuredRate
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.throughputs import ThroughputTable, default_throughputs, throughputs_to_dict
from shock.core.trace import Trace
from shock.engine.engine import Engine
from shock.engine.runner import RunOptions, build_request
from shock.engine.throughput_estimator import EstimatorOptions, ThroughputEstimator
from shock.plugins.backends.simulator import OracleSimulatedExecutor
from shock.traces.generator import WorkloadConfig, generate_jobs

CLUSTER = "v100=4,p100=4,k80=4"
GPU_TYPES = ("k80", "p100", "v100")
ROUND_TARGET_S = 0.1


def experiment(jobs: int, rate: float, window: tuple[int, int], seed: int) -> Table:
    table = default_throughputs()
    trace = Trace(
        tuple(generate_jobs(WorkloadConfig(jobs, rate, seed=seed), table)), "generated"
    )
    registry = default_registry()
    base = RunOptions(
        policy="max_min_fairness_packed", cluster=CLUSTER, window=window, seed=seed
    )
    rows: list[tuple[str, RunOptions]] = [
        ("oracle table, space sharing", base),
        ("estimated, profiling 100%, 26 references", replace(base, estimate_throughputs="all")),
    ]
    for fraction, references in ((0.5, None), (0.2, None), (0.2, 16), (0.05, None)):
        label = f"estimated, profiling {fraction:.0%}, {references or 26} references"
        options = EstimatorOptions(
            profiling_fraction=fraction, reference_types=references, seed=seed
        )
        rows.append((label, replace(base, estimate_throughputs="all", estimator=options)))
    hidden_alone = EstimatorOptions(profiling_fraction=0.2, profile_isolated=False, seed=seed)
    rows.append((
        "estimated, profiling 20% (alone too), 26 references",
        replace(base, estimate_throughputs="all", estimator=hidden_alone),
    ))  # fmt: skip
    rows.append(("oracle table, no space sharing", replace(base, policy="max_min_fairness_perf")))
    result = Table(
        title=f"Gavel's estimator experiment: {jobs} jobs at {rate} jobs/h on {CLUSTER}, "
        f"jobs {window[0]}-{window[1] - 1} measured, LAS"
    )
    columns = ("policy input", "avg JCT (h)", "vs oracle", "makespan (h)", "rounds", "CPU s",
               "CPU ms/round")  # fmt: skip
    for column in columns:
        result.add_column(column, justify="left" if column == "policy input" else "right")
    oracle_jct = None
    for label, options in rows:
        started = time.process_time()
        request = build_request(options, registry, trace)
        outcome = registry.get("backend", "simulator").run(request)
        seconds = time.process_time() - started
        jct = outcome.metrics.avg_jct_s
        oracle_jct = oracle_jct or jct
        result.add_row(
            label,
            f"{jct / 3600:.2f}",
            f"{jct / oracle_jct:.3f}",
            f"{outcome.metrics.makespan_s / 3600:.1f}",
            str(outcome.metrics.rounds),
            f"{seconds:.1f}",
            f"{1000 * seconds / max(outcome.metrics.rounds, 1):.1f}",
        )
    return result


def synthetic_oracle(
    types: int, rng: random.Random
) -> tuple[ThroughputTable, list[str], dict[str, tuple[str, int]]]:
    """Gavel's table plus `types` new job types, each a Gavel type's rates times a random
    factor per worker type, with perturbed co-located shares next to every Gavel type."""
    gavel = default_throughputs()
    oracle = ThroughputTable(
        isolated={k: dict(v) for k, v in gavel.isolated.items()},
        pairs={k: dict(v) for k, v in gavel.pairs.items()},
        source="gavel + synthetic",
    )
    bases = sorted(k for k in gavel.isolated if k[1] == 1)
    names = []
    derived_from = {}
    for index in range(types):
        base = rng.choice(bases)
        name = f"Net{index} (batch size {rng.choice((8, 16, 32, 64))})"
        names.append(name)
        derived_from[name] = base
        key = (name, 1)
        for w in GPU_TYPES:
            oracle.set(name, 1, w, gavel.throughput(*base, w) * math.exp(rng.gauss(0, 0.2)))
        for other in bases:
            per_type = {}
            for w in GPU_TYPES:
                a, b = gavel.pair_throughput(base, other, w)
                alone_base, alone_other = gavel.throughput(*base, w), gavel.throughput(*other, w)
                share_a = min(1.0, a / alone_base * math.exp(rng.gauss(0, 0.1)))
                share_b = min(1.0, b / alone_other * math.exp(rng.gauss(0, 0.1)))
                per_type[w] = (share_a * oracle.throughput(*key, w), share_b * alone_other)
            oracle.pairs[(key, other)] = per_type
            oracle.pairs[(other, key)] = {w: (b, a) for w, (a, b) in per_type.items()}
    return oracle, names, derived_from


def cost(types: int, per_type: int, rounds: int, seed: int) -> Table:
    rng = random.Random(seed)
    oracle, names, derived_from = synthetic_oracle(types, rng)
    gavel = default_throughputs()
    estimator = ThroughputEstimator(
        gavel,
        GPU_TYPES,
        EstimatorOptions(profiling_fraction=0.2, profile_isolated=False, seed=seed),
    )
    profiles = [estimator.sample_profile((name, 1), oracle, rng) for name in names]
    started = time.process_time()
    estimates = [estimator.estimate(profile) for profile in profiles]
    estimating_s = time.process_time() - started
    started = time.process_time()
    estimated_table = estimator.estimated_table(estimates)
    table_s = time.process_time() - started
    errors = [
        abs(math.log(e.isolated[w] / oracle.throughput(*e.key, w)))
        for e in estimates
        for w in GPU_TYPES
        if w not in e.measured
    ]
    matched = sum(e.reference == derived_from[e.key[0]] for e in estimates)

    # 1,000 active jobs: an engine with all of them admitted, on enough GPUs for each.
    jobs = tuple(
        JobSpec(job_id=i, job_type=names[i % types], total_steps=10**9, scale_factor=1)
        for i in range(types * per_type)
    )
    merged = ThroughputTable(
        isolated={**gavel.isolated, **estimated_table.isolated},
        pairs={**gavel.pairs, **estimated_table.pairs},
    )
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "estimated.json"
        path.write_text(json.dumps(throughputs_to_dict(merged)))
        options = RunOptions(
            cluster=f"v100={len(jobs)},p100={len(jobs)},k80={len(jobs)}", throughputs=str(path)
        )
        request = replace(build_request(options, trace=Trace(jobs, "synthetic")), oracle=oracle)
    engine = Engine(request, OracleSimulatedExecutor(oracle), "simulator")
    mechanism = engine._prepare(request.cluster)
    engine._admit_arrived(mechanism, 0.0)
    timings = []
    for round_index in range(rounds):
        # Every job reports its type's rate on the type it ran on, drifting round to round.
        reports = []
        for i, job in enumerate(jobs):
            w = GPU_TYPES[(i + round_index) % 3]
            drift = 1.0 + 0.01 * ((i + round_index) % 7 - 3)
            reports.append(
                MeasuredRate(job.job_type, 1, w, oracle.throughput(job.job_type, 1, w) * drift)
            )
        started = time.process_time()
        engine._observe_rates(mechanism, reports)
        timings.append(time.process_time() - started)
    per_round = statistics.median(timings)
    result = Table(
        title=f"Estimator cost: {types} unknown job types, {len(jobs)} active jobs "
        f"(profiling 20%, 26 reference types)"
    )
    for column in ("what", "CPU s", "target", "within"):
        result.add_column(column, justify="left" if column == "what" else "right")
    result.add_row(
        f"estimate {types} new types once (matrix completion each)", f"{estimating_s:.3f}", "", ""
    )
    result.add_row(
        f"their co-located rates with each other ({len(estimated_table.pairs)} pairs)",
        f"{table_s:.3f}",
        "",
        "",
    )
    result.add_row(
        f"per round: {len(jobs)} rate reports folded in (median of {rounds})",
        f"{per_round:.4f}",
        f"{ROUND_TARGET_S}",
        "yes" if per_round <= ROUND_TARGET_S else "NO",
    )
    result.caption = (
        f"every entry (alone or co-located, per worker type) measured with probability 20%; "
        f"{matched} of {types} new types matched to the type they were derived from; "
        f"isolated rates not measured: median error {math.exp(statistics.median(errors)) - 1:.0%}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=0.8, help="jobs per hour")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="the cost part only")
    args = parser.parse_args()
    console = Console(width=120)
    if not args.quick:
        window = (args.jobs // 3, 2 * args.jobs // 3)
        console.print(experiment(args.jobs, args.rate, window, args.seed))
    console.print(cost(100, 10, 20, args.seed))


if __name__ == "__main__":
    main()
