"""Time `shock sweep` on 40 Gavel-preset cells: serial, `--parallel 2` and `--ray local`.

    python benchmarks/sweep.py [--policies a,b,...] [--seeds N] [--jobs N] [--parallel N]

Each mode runs the same sweep (policies x seeds, each cell a small generated trace) from
scratch, as a user would (`python -m shock sweep ...`, so wall time includes start-up). The
table gives wall time, cells per second, throughput against serial, and the overhead per
cell: the worker time not spent inside cells, (wall x workers - sum of the cells' own
`wall_s`) / cells. For `--ray local` a second line takes out starting and stopping the
Ray instance, timed on its own. The modes must agree on every metric but the timings.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

POLICIES = "max_min_fairness_perf,fifo_perf,finish_time_fairness_perf,max_sum_throughput_perf"
TIMING = {"wall_s", "solver_seconds"}
RAY_START_STOP = """
import logging, ray
ray.init(address="local", num_cpus={cpus}, include_dashboard=False,
         _node_ip_address="127.0.0.1", logging_level=logging.ERROR, log_to_driver=False)
ray.shutdown()
"""


@dataclass(frozen=True)
class Timing:
    mode: str
    workers: int
    wall_s: float
    cells: int
    inside_s: float  # the cells' own run time, summed

    def overhead_per_cell(self, excluded_s: float = 0.0) -> float:
        return ((self.wall_s - excluded_s) * self.workers - self.inside_s) / self.cells


def _spec(policies: list[str], seeds: int, jobs: int) -> str:
    return f"""
[base]
cluster = "4:4:4"
preset = "gavel"
[generate]
jobs = {jobs}
rate = 2.0
[grid]
policy = {policies!r}
seed = {list(range(seeds))!r}
"""


def _sweep(spec: Path, out: Path, extra: list[str]) -> tuple[float, list[dict[str, str]]]:
    command = [sys.executable, "-m", "shock", "sweep", str(spec), "--out", str(out),
               "--quiet", *extra]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    with (out / "runs.csv").open() as handle:
        return wall, list(csv.DictReader(handle))


def _ray_start_stop_s(cpus: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", RAY_START_STOP.format(cpus=cpus)], check=True,
                   capture_output=True)
    return time.perf_counter() - started


def _without_timing(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--seeds", type=int, default=10)
    # 200 jobs: cells of about a second, as a real sweep's; tiny cells time pool start-up.
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    policies = args.policies.split(",")
    workers = args.parallel
    modes = [
        ("serial (--parallel 1)", 1, ["--parallel", "1"]),
        (f"--parallel {workers}", workers, ["--parallel", str(workers)]),
        (f"--ray local --parallel {workers}", workers,
         ["--ray", "local", "--parallel", str(workers)]),
    ]
    timings: list[Timing] = []
    tables: list[list[dict[str, str]]] = []
    with tempfile.TemporaryDirectory(prefix="shock-sweep-bench-") as folder:
        root = Path(folder)
        spec = root / "spec.toml"
        spec.write_text(_spec(policies, args.seeds, args.jobs))
        for index, (mode, slots, extra) in enumerate(modes):
            wall, rows = _sweep(spec, root / f"out{index}", extra)
            inside = sum(float(row["wall_s"]) for row in rows)
            timings.append(Timing(mode, slots, wall, len(rows), inside))
            tables.append(rows)
        ray_start_stop = _ray_start_stop_s(workers)
    for rows in tables[1:]:
        if _without_timing(rows) != _without_timing(tables[0]):
            raise SystemExit("the modes disagree on a metric")
    serial = timings[0]
    print(f"{serial.cells} cells ({len(policies)} policies x {args.seeds} seeds, "
          f"{args.jobs}-job generated traces, cluster 4:4:4, --preset gavel); "
          f"cells' own run time {serial.inside_s:.1f} s serial")
    header = f"{'mode':34} {'wall s':>8} {'cells/s':>8} {'x serial':>9} {'overhead/cell s':>16}"
    print(header)
    print("-" * len(header))
    for timing in timings:
        print(f"{timing.mode:34} {timing.wall_s:8.1f} {timing.cells / timing.wall_s:8.2f} "
              f"{serial.wall_s / timing.wall_s:9.2f} {timing.overhead_per_cell():16.3f}")
    ray = timings[-1]
    # Start-up timed apart, at another moment of a possibly shared machine: an estimate, so
    # no throughput ratio is drawn from it.
    print(f"{'  without Ray start + stop (est.)':34} {ray.wall_s - ray_start_stop:8.1f} "
          f"{'':8} {'':9} {ray.overhead_per_cell(ray_start_stop):16.3f}")
    print(f"(Ray start + stop alone: {ray_start_stop:.1f} s; every mode gave the same metrics)")


if __name__ == "__main__":
    main()
