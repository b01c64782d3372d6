"""One allocation of each policy of the Gavel family on N active jobs, beside cvxpy + ECOS.

Instances are `shock.engine.bench.bench_instance(N)` (N single-GPU jobs of Gavel's job types,
N/4 GPUs of each of k80, p100, v100; `--jitter` perturbs every throughput so no two jobs are
alike). Each cell is the median wall time of --repeats calls after one warm-up call. The
cvxpy baselines state finish-time fairness and makespan as their convex originals (inv_pos)
and solve them with ECOS, once with one expression per job (as Gavel builds its problems) and
once vectorised (much less cvxpy overhead, a stronger baseline).

    python benchmarks/policy_family_timings.py [--sizes 256 1024 2048] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
import warnings
from collections.abc import Callable
from functools import partial

import numpy as np

from shock.core.policy import Policy, PolicyInput
from shock.core.solver import SolverSpec
from shock.engine.bench import bench_instance
from shock.plugins.policies.cost import CostNormalisedThroughput
from shock.plugins.policies.finish_time_fairness import FinishTimeFairness
from shock.plugins.policies.isolated import isolated_fractions
from shock.plugins.policies.max_sum_throughput import MaxSumThroughput
from shock.plugins.policies.min_total_duration import MinTotalDuration

PRICES = np.array([0.9, 1.46, 2.48])  # k80, p100, v100 ($/GPU-hour)


def cvxpy_ftf(problem: PolicyInput, per_job: bool) -> float:
    """min max_j (t_j + R_j inv_pos(a_j(x))) / (R_j / iso_j) (a fresh run: C = 0)."""
    import cvxpy as cp

    t, r, s = problem.throughputs, problem.steps_remaining, problem.scale_factors
    isolated = (t * isolated_fractions(problem.capacity, s)).sum(axis=1)
    elapsed = problem.times_since_arrival
    x = cp.Variable(t.shape)
    if per_job:
        terms = [
            (elapsed[j] + r[j] * cp.inv_pos(cp.sum(cp.multiply(t[j], x[j])))) / (r[j] / isolated[j])
            for j in range(len(r))
        ]
        objective = cp.Minimize(cp.maximum(*terms) if len(terms) > 1 else terms[0])
    else:
        rates = cp.sum(cp.multiply(t, x), axis=1)
        ratio = cp.multiply(isolated / r, elapsed + cp.multiply(r, cp.inv_pos(rates)))
        objective = cp.Minimize(cp.max(ratio))
    return _solve(cp, objective, x, problem)


def cvxpy_makespan(problem: PolicyInput, per_job: bool) -> float:
    import cvxpy as cp

    t, r = problem.throughputs, problem.steps_remaining
    x = cp.Variable(t.shape)
    if per_job:
        terms = [r[j] * cp.inv_pos(cp.sum(cp.multiply(t[j], x[j]))) for j in range(len(r))]
        objective = cp.Minimize(cp.maximum(*terms) if len(terms) > 1 else terms[0])
    else:
        objective = cp.Minimize(cp.max(cp.multiply(r, cp.inv_pos(cp.sum(cp.multiply(t, x), 1)))))
    return _solve(cp, objective, x, problem)


def _solve(cp, objective, x, problem: PolicyInput) -> float:  # type: ignore[no-untyped-def]
    constraints = [x >= 0, cp.sum(x, axis=1) <= 1, problem.scale_factors @ x <= problem.capacity]
    with warnings.catch_warnings():  # "too many subexpressions", "may be inaccurate"
        warnings.simplefilter("ignore")
        program = cp.Problem(objective, constraints)
        program.solve(solver="ECOS")
    return float(program.value)


def timed(
    call: Callable[[PolicyInput], float | None], problem: PolicyInput, repeats: int
) -> tuple[float, float | None]:
    call(problem)  # warm-up (imports, caches)
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = call(problem)
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def shock(policy: Policy) -> Callable[[PolicyInput], float | None]:
    """One allocation by a fresh run of `policy` (no state carried between calls)."""
    return lambda problem: policy.for_run(0).allocate(problem, SolverSpec()).objective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--no-per-job", action="store_true", help="skip the slow per-job cvxpy")
    args = parser.parse_args()
    rows: list[tuple[str, Callable[[PolicyInput], float | None]]] = [
        ("finish_time_fairness_perf (HiGHS)", shock(FinishTimeFairness(True))),
        ("  cvxpy+ECOS vectorised", partial(cvxpy_ftf, per_job=False)),
        ("  cvxpy+ECOS per job (Gavel-style)", partial(cvxpy_ftf, per_job=True)),
        ("min_total_duration_perf (HiGHS)", shock(MinTotalDuration(True))),
        ("  cvxpy+ECOS vectorised", partial(cvxpy_makespan, per_job=False)),
        ("max_sum_throughput_perf (HiGHS)", shock(MaxSumThroughput())),
        (
            "max_sum_throughput_normalized_by_cost_perf (HiGHS)",
            shock(CostNormalisedThroughput(False)),
        ),
    ]
    if args.no_per_job:
        rows = [row for row in rows if "per job" not in row[0]]
    for n in args.sizes:
        problem = dataclasses.replace(bench_instance(n, jitter=args.jitter), prices=PRICES)
        print(f"N = {n} jobs, {int(problem.capacity[0])} GPUs of each type")
        for label, call in rows:
            seconds, value = timed(call, problem, args.repeats)
            shown = f"{value:.8g}" if value is not None else "-"
            print(f"  {label:52s} {seconds:8.3f} s   objective {shown}")


if __name__ == "__main__":
    main()
