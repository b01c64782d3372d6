"""Water filling: one warm-started LP sequence against re-solving every LP from scratch.

One allocation of `max_min_fairness_water_filling_perf` (and `_packed` at the smaller sizes)
on `bench_instance(N, jitter=0.05)` with the jobs spread round-robin over four entities of
weights 1, 2, 3 and 4, so there are several water levels. "warm" keeps one HiGHS instance and
changes bounds, costs and coefficients between the LPs of the sequence (each solve starts
from the previous basis); "cold" passes the whole LP again before every solve (HiGHS starts
from scratch). Both must find the same levels. Each cell is the median of --repeats calls
after a warm-up call, on whatever machine runs it (shared CPUs inflate the numbers).

    python benchmarks/water_filling_timings.py [--sizes 128 512 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from shock.core.policy import PolicyInput
from shock.core.solver import SolverSpec
from shock.engine.bench import bench_instance
from shock.plugins.policies.max_min_fairness_water_filling import entity_job_weights
from shock.plugins.policies.units import job_units
from shock.plugins.policies.water_filling import WaterFillingResult, water_fill

ENTITY_WEIGHTS = {"e0": 1.0, "e1": 2.0, "e2": 3.0, "e3": 4.0}


def instance(num_jobs: int) -> PolicyInput:
    problem = bench_instance(num_jobs, jitter=0.05)
    jobs = tuple(
        dataclasses.replace(job, entity=f"e{row % 4}") for row, job in enumerate(problem.jobs)
    )
    return dataclasses.replace(problem, jobs=jobs, entity_weights=ENTITY_WEIGHTS)


def timed(
    problem: PolicyInput, packed: bool, warm: bool, repeats: int
) -> tuple[float, WaterFillingResult]:
    units = job_units(problem, packed)
    equal = problem.throughputs @ (problem.capacity / problem.capacity.sum())
    weights = problem.scale_factors / (entity_job_weights(problem) * equal)
    result = water_fill(units, weights, SolverSpec(), warm_start=warm)  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = water_fill(units, weights, SolverSpec(), warm_start=warm)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--packed-sizes", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    table = Table(title="Water filling: warm-started sequence vs every LP from scratch (HiGHS)")
    for column in ("policy", "N", "LP solves", "levels", "warm (s)", "cold (s)", "cold / warm"):
        table.add_column(column, justify="right")
    cases = [("_perf", n, False) for n in args.sizes] + [
        ("_packed", n, True) for n in args.packed_sizes
    ]
    for suffix, n, packed in cases:
        problem = instance(n)
        warm_s, warm = timed(problem, packed, True, args.repeats)
        cold_s, cold = timed(problem, packed, False, args.repeats)
        same = np.allclose(warm.levels, cold.levels, rtol=1e-6, atol=1e-9)
        levels = len(np.unique(np.round(warm.levels / warm.levels.max(), 7)))
        print(f"  {suffix} N = {n} done", flush=True)
        table.add_row(
            f"max_min_fairness_water_filling{suffix}",
            str(n),
            f"{warm.lp_solves} / {cold.lp_solves}",
            str(levels) + ("" if same else " (levels differ!)"),
            f"{warm_s:.4f}",
            f"{cold_s:.4f}",
            f"{cold_s / warm_s:.2f}x",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
