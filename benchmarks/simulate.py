"""Simulation speed: shock's wall time and results beside in-run baselines and targets.

Rows (`--rows NAME,...` runs some; `--quick` only `static`):
  static:        100 single-GPU jobs at t = 0 on 4:4:4, max_min_fairness_perf, --preset gavel
  continuous:    5,600 single-GPU jobs at 1.4 jobs/h on 12:12:12, measured over jobs
                 4000-4999, max_min_fairness_perf, --preset gavel (target 8 s)
  continuous-ftf: the same with finish_time_fairness_perf
  synergy-proportional, synergy-tune: 5,200 single-GPU Synergy jobs at 9 jobs/h on
                 synergy-128, jobs 4000-4999, fifo, --preset synergy (target 15 s each)
  shockwave-<policy>: a 460-job dynamic trace (Shockwave's generator, seed 0) on 128 GPUs with
                 the WISR table, --preset shockwave, for Shockwave's baselines (target 1.2 s
                 each) and shockwave itself
  large:         50,000 jobs (Gavel's generator, 75 jobs/h) on 2,048 GPUs (683:683:682),
                 max_min_fairness_perf, run to the end (target 30 s, 512 MB peak)
  startup:       `shock run --quiet` on the bundled default, as a command, with shock
                 byte-compiled as an installed package is (target 1 s), and the heavy
                 modules loading the plugins imports

Each simulation runs in a fresh process (so peak memory is the row's own); `--repeat N` runs
each N times and gives the range of wall times. The baseline of the Gavel rows is the same
simulation with the policy formulated as Gavel does it (a cvxpy problem solved by ECOS at
every allocation), timed in the same run; Gavel's own simulator on this kind of machine needs
about 4 s and 104 s for the first two, and 351 s for finish_time_fairness_perf on the second
(the last column is shock's speed-up against those).

    python benchmarks/simulate.py [--quick | --rows continuous,large] [--repeat 3]
                                  [--no-baseline] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shock.core.results import RunResult
from shock.core.trace import Trace
from shock.engine.runner import RunOptions, bundled_trace_path

WISR = str(bundled_trace_path().parent.parent / "shockwave_wisr_throughputs.json")
# Shockwave's paper's baselines, by shock's names (Gavel's LAS, Themis, AlloX, Gandiva-fair,
# MST); shockwave itself is timed beside them.
SHOCKWAVE_BASELINES = (
    "max_min_fairness",
    "finish_time_fairness",
    "allox",
    "gandiva_fair",
    "min_total_duration",
)
# Modules no `shock run` of the default policy needs; loading the plugins must not import them.
HEAVY_MODULES = ("pyomo", "scipy", "cvxpy", "torch", "grpc", "pyscipopt", "gurobipy")


def gavel_trace(jobs: int, rate: float | None) -> Trace:
    from shock.core.throughputs import default_throughputs
    from shock.traces.generator import WorkloadConfig, generate_jobs

    config = WorkloadConfig(num_jobs=jobs, jobs_per_hour=rate, seed=0)
    return Trace(tuple(generate_jobs(config, default_throughputs())), f"gavel-{jobs}", "gavel")


def synergy_trace() -> Trace:
    from shock.traces.synergy_generator import SynergyWorkload, generate_synergy_jobs

    workload = SynergyWorkload(5200, jobs_per_hour=9.0, multi_gpu=False, seed=0)
    return Trace(tuple(generate_synergy_jobs(workload)), "synergy-5200", "synergy")


def shockwave_trace() -> Trace:
    from shock.core.throughputs import load_throughputs
    from shock.traces.shockwave_generator import DynamicWorkloadConfig, generate_dynamic_jobs

    config = DynamicWorkloadConfig(num_jobs=460, seed=0)
    jobs = generate_dynamic_jobs(config, load_throughputs(WISR))
    return Trace(tuple(jobs), "shockwave-460", "shockwave")


@dataclass(frozen=True)
class Row:
    name: str
    trace: Callable[[], Trace]
    options: RunOptions
    target_s: float | None = None
    target_mb: float | None = None
    baseline: str | None = None  # the cvxpy+ECOS policy timed beside it
    gavel_seconds: float | None = None  # Gavel's own simulator on this kind of machine


def _rows() -> list[Row]:
    continuous = RunOptions(cluster="12:12:12", preset="gavel", window=(4000, 5000))
    synergy = RunOptions(
        policy="fifo", cluster="synergy-128", preset="synergy", window=(4000, 5000)
    )
    shockwave = RunOptions(
        cluster="128:0:0", throughputs=WISR, preset="shockwave", prices="v100=2.48"
    )
    rows = [
        Row(
            "static",
            partial(gavel_trace, 100, None),
            RunOptions(cluster="4:4:4", preset="gavel"),
            baseline="cvxpy_max_min_fairness_perf",
            gavel_seconds=4.0,
        ),
        Row(
            "continuous",
            partial(gavel_trace, 5600, 1.4),
            continuous,
            target_s=8.0,
            baseline="cvxpy_max_min_fairness_perf",
            gavel_seconds=104.0,
        ),
        # A cvxpy baseline here would take ~10 minutes; Gavel's own time is the reference.
        Row(
            "continuous-ftf",
            partial(gavel_trace, 5600, 1.4),
            replace(continuous, policy="finish_time_fairness_perf"),
            gavel_seconds=351.0,
        ),
    ]
    for placement in ("proportional", "tune"):
        options = replace(synergy, placement=placement)
        rows.append(Row(f"synergy-{placement}", synergy_trace, options, target_s=15.0))
    for policy in (*SHOCKWAVE_BASELINES, "shockwave"):
        options = replace(shockwave, policy=policy)
        target = 1.2 if policy != "shockwave" else None
        rows.append(Row(f"shockwave-{policy}", shockwave_trace, options, target_s=target))
    rows.append(
        Row(
            "large",
            partial(gavel_trace, 50_000, 75.0),
            RunOptions(cluster="683:683:682"),
            target_s=30.0,
            target_mb=512.0,
        )
    )
    return rows


@dataclass
class Measured:
    label: str
    result: RunResult | None = None
    walls: list[float] = field(default_factory=list)
    peak_mb: float = 0.0


def _simulate(row: Row, policy: str) -> tuple[RunResult, float, float]:
    """One simulation in this (fresh) process: result, wall seconds, peak RSS in MB."""
    import cvxpy_baselines

    from shock.core.plugins import PluginRegistry, load_plugins
    from shock.engine.runner import build_request

    registry = PluginRegistry(load_plugins(extra_plugins=[cvxpy_baselines]))
    options = replace(row.options, policy=policy)
    request = build_request(options, registry, trace=row.trace())
    started = time.perf_counter()
    result: RunResult = registry.get("backend", "simulator").run(request)
    wall = time.perf_counter() - started
    return result, wall, peak_rss_mb()


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux carries `ru_maxrss` over from the forked
    parent into the started process (it counts the parent's pages the fork shared), so it
    reads the memory's own high-water mark there."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(row: Row, policy: str, label: str, repeat: int) -> Measured:
    measured = Measured(label)
    context = multiprocessing.get_context("spawn")
    for _ in range(repeat):
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            result, wall, peak = pool.submit(_simulate, row, policy).result()
        measured.result = result
        measured.walls.append(wall)
        measured.peak_mb = max(measured.peak_mb, peak)
    return measured


def startup(repeat: int) -> tuple[list[float], list[str]]:
    """Wall times of `shock run --quiet`, and the heavy modules loading the plugins imports.
    shock's modules are byte-compiled first, as installing a package does (an editable
    install under PYTHONDONTWRITEBYTECODE would otherwise compile every module at each start)."""
    import shock

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(shock.__file__).parent)], check=True
    )
    walls = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "shock", "run", "--quiet"], check=True, capture_output=True
        )
        walls.append(time.perf_counter() - started)
    probe = (
        "import sys; from shock.core.plugins import default_registry; default_registry(); "
        f"print(' '.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout.split()
    return walls, loaded


def wall_range(walls: list[float]) -> str:
    low, high = min(walls), max(walls)
    return f"{low:.2f}" if len(walls) == 1 else f"{low:.2f}-{high:.2f}"


def verdict(value: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"{target:g} {'met' if value <= target else 'MISSED'}"


def relative(a: float, b: float) -> str:
    return f"{(a - b) / b:+.1%}" if b else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the static row")
    parser.add_argument("--rows", help="comma-separated row names (see above), or 'startup'")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row (wall ranges)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the cvxpy+ECOS runs")
    parser.add_argument("--json", type=Path, help="write every run's metrics here")
    args = parser.parse_args()
    rows = _rows()
    names = [row.name for row in rows] + ["startup"]
    wanted = ["static"] if args.quick else (args.rows.split(",") if args.rows else names)
    unknown = [name for name in wanted if name not in names]
    if unknown:
        parser.error(f"unknown row(s) {', '.join(unknown)}; rows: {', '.join(names)}")
    console = Console(width=180)
    table = Table(title="Simulation speed")
    for column in (
        "row",
        "policy",
        "run",
        "jobs",
        "avg JCT (h)",
        "makespan (h)",
        "util",
        "rounds",
        "allocations",
        "wall (s)",
        "target (s)",
        "peak MB",
        "speed-up vs baseline",
        "speed-up vs Gavel",
    ):
        table.add_column(column, justify="right")
    documents = []
    for row in rows:
        if row.name not in wanted:
            continue
        policy = row.options.policy
        runs = [measure(row, policy, "shock (HiGHS)", args.repeat)]
        if row.baseline and not args.no_baseline:
            runs.append(measure(row, row.baseline, "baseline (cvxpy+ECOS)", args.repeat))
        baseline_wall = min(runs[-1].walls) if len(runs) > 1 else None
        for run in runs:
            assert run.result is not None
            m = run.result.metrics
            wall = min(run.walls)
            memory = f"{run.peak_mb:.0f}"
            if row.target_mb is not None and run is runs[0]:
                memory += f" ({verdict(run.peak_mb, row.target_mb)})"
            table.add_row(
                row.name,
                policy if run is runs[0] else row.baseline,
                run.label,
                str(m.jobs),
                f"{m.avg_jct_s / 3600:.3f}",
                f"{m.makespan_s / 3600:.1f}",
                f"{m.utilization:.3f}",
                str(m.rounds),
                str(m.allocations),
                wall_range(run.walls),
                verdict(wall, row.target_s) if run is runs[0] else "",
                memory,
                f"{baseline_wall / wall:.1f}x" if baseline_wall else "",
                f"{row.gavel_seconds / wall:.1f}x" if row.gavel_seconds else "",
            )
            documents.append({"row": row.name, "run": run.label, **run.result.to_document()})
        if len(runs) > 1 and runs[0].result and runs[1].result:
            ours, theirs = runs[0].result.metrics, runs[1].result.metrics
            jct = relative(ours.avg_jct_s, theirs.avg_jct_s)
            makespan = relative(ours.makespan_s, theirs.makespan_s)
            console.print(f"{row.name}: shock vs baseline: avg JCT {jct}, makespan {makespan}")
    if "startup" in wanted:
        walls, loaded = startup(args.repeat)
        table.add_row(
            "startup",
            "max_min_fairness_perf",
            "shock run --quiet",
            *[""] * 6,
            wall_range(walls),
            verdict(min(walls), 1.0),
            "",
            "",
            "",
        )
        console.print(
            "heavy modules imported by loading the plugins: " + (", ".join(loaded) or "none")
        )
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(documents, indent=2))


if __name__ == "__main__":
    main()
