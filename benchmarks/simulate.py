"""Simulation speed: CPU seconds of `shock run` as users run it, beside in-run baselines.

Every row is one command, `shock run ... --json out.json`, started as a child process; the row
reports the user+system CPU seconds of that process and everything it started (`os.wait4`),
its wall time and its peak resident memory. `--repeat N` runs each row N times and reports
ranges (the baselines run once, after every row). Traces are written once with
`shock trace generate ...` into a temporary folder.

Rows (`--rows NAME,...` runs some, in that order; `--quick` only `static` and `startup`;
the table is rewritten after every measurement, so a stopped session keeps what it measured):
  static:          100 single-GPU jobs at t = 0 on 4:4:4, max_min_fairness_perf, --preset gavel
  continuous:      5,600 single-GPU jobs at 1.4 jobs/h on 12:12:12, jobs 4000-4999 measured
                   (--window 4000:5000), max_min_fairness_perf (LAS), --preset gavel
                   (target 8 CPU-s)
  continuous-ftf:  the same with finish_time_fairness_perf
  synergy-proportional, synergy-tune: 5,200 single-GPU Synergy jobs at 9 jobs/h on
                   synergy-128, jobs 4000-4999, fifo, --preset synergy (target 15 CPU-s each)
  shockwave-<policy>: 460 dynamic jobs (Shockwave's generator, seed 0) on 128 GPUs with the
                   WISR table, --preset shockwave: Shockwave's baselines (target 1.2 CPU-s each)
                   and shockwave itself
  large:           50,000 jobs (Gavel's generator, 75 jobs/h) on 2,048 GPUs (683:683:682),
                   max_min_fairness_perf, run to the end (target 30 CPU-s, 512 MB peak)
  startup:         `shock run` on the bundled default trace (target 1 CPU-s), with shock
                   byte-compiled as an installed package is, after one untimed `shock plugins`
                   (a user's first command, which writes the plugin manifest)

The baseline of the Gavel rows is the same command with the policy formulated as Gavel's
artifact does it (a cvxpy problem solved by ECOS at every allocation,
`benchmarks/cvxpy_baselines.py`), installed for the baseline's child only as a third-party
plugin package would be. The last column quotes each artifact's own simulator as measured
elsewhere (not in this run).

    python benchmarks/simulate.py [--quick | --rows continuous,large] [--repeat 3]
                                  [--no-baseline] [--markdown docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
WISR = str(ROOT / "shock" / "data" / "shockwave_wisr_throughputs.json")
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

# Each trace: its file name and the `shock trace` arguments that write it.
TRACES: dict[str, tuple[str, ...]] = {
    "gavel-100.trace": ("generate", "--jobs", "100", "--seed", "0"),
    "gavel-5600.trace": ("generate", "--jobs", "5600", "--rate", "1.4", "--seed", "0"),
    "gavel-50000.trace": ("generate", "--jobs", "50000", "--rate", "75", "--seed", "0"),
    "synergy-5200.csv": (
        "synergy",
        "--jobs",
        "5200",
        "--rate",
        "9",
        "--single-gpu",
        "--seed",
        "0",
    ),
    "shockwave-460.trace": (
        "generate-dynamic",
        "--jobs",
        "460",
        "--seed",
        "0",
        "--throughputs",
        WISR,
    ),
}


@dataclass(frozen=True)
class Row:
    name: str
    policy: str
    arguments: tuple[str, ...]  # `shock run` arguments besides --policy and --json
    trace: str | None = None  # a file name of TRACES; None: the bundled default
    target_cpu_s: float | None = None
    target_mb: float | None = None
    baseline: str | None = None  # the cvxpy+ECOS policy run beside it
    elsewhere: str = ""  # the artifact's own simulator, measured elsewhere


def rows() -> list[Row]:
    continuous = ("--cluster", "12:12:12", "--preset", "gavel", "--window", "4000:5000")
    synergy = ("--cluster", "synergy-128", "--preset", "synergy", "--window", "4000:5000")
    shockwave = (
        *("--cluster", "128:0:0", "--throughputs", WISR),
        *("--preset", "shockwave", "--prices", "v100=2.48"),
    )
    table = [
        Row(
            "static",
            "max_min_fairness_perf",
            ("--cluster", "4:4:4", "--preset", "gavel"),
            "gavel-100.trace",
            baseline="cvxpy_max_min_fairness_perf",
        ),
        Row(
            "continuous",
            "max_min_fairness_perf",
            continuous,
            "gavel-5600.trace",
            target_cpu_s=8.0,
            baseline="cvxpy_max_min_fairness_perf",
            elsewhere="Gavel: 254 CPU-s (2 cores), 151 CPU-s (16 cores)",
        ),
        # A cvxpy baseline here would take about ten minutes.
        Row(
            "continuous-ftf",
            "finish_time_fairness_perf",
            continuous,
            "gavel-5600.trace",
            elsewhere="Gavel: 351 s wall",
        ),
    ]
    for placement in ("proportional", "tune"):
        table.append(
            Row(
                f"synergy-{placement}",
                "fifo",
                (*synergy, "--placement", placement),
                "synergy-5200.csv",
                target_cpu_s=15.0,
                elsewhere="Synergy: 170 s",
            )
        )
    for policy in (*SHOCKWAVE_BASELINES, "shockwave"):
        baseline = policy != "shockwave"
        table.append(
            Row(
                f"shockwave-{policy}",
                policy,
                shockwave,
                "shockwave-460.trace",
                target_cpu_s=1.2 if baseline else None,
                elsewhere="Shockwave: 5.9-6.7 s" if baseline else "",
            )
        )
    table.append(
        Row(
            "large",
            "max_min_fairness_perf",
            ("--cluster", "683:683:682"),
            "gavel-50000.trace",
            target_cpu_s=30.0,
            target_mb=512.0,
        )
    )
    table.append(Row("startup", "max_min_fairness_perf", (), target_cpu_s=1.0))
    return table


@dataclass(frozen=True)
class Sample:
    """One child process: CPU seconds (user+system, with its own children), wall seconds,
    peak resident memory in MB."""

    cpu_s: float
    wall_s: float
    peak_mb: float


@dataclass
class Measured:
    label: str
    policy: str
    samples: list[Sample] = field(default_factory=list)
    metrics: dict[str, float] | None = None


def shock_command() -> list[str]:
    """`shock` as installed next to this interpreter (what a user types)."""
    script = Path(sys.executable).parent / "shock"
    return [str(script)] if script.exists() else [sys.executable, "-m", "shock"]


def measured_child(command: list[str], log: Path, env: dict[str, str] | None = None) -> Sample:
    """Run a command to its end; its resource use from the kernel's accounting (`wait4`
    covers the child and every descendant it waited for)."""
    with log.open("w") as output:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{log.read_text()[-3000:]}")
    # Linux gives ru_maxrss in kilobytes.
    return Sample(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def write_traces(names: set[str], folder: Path) -> None:
    for name in sorted(names):
        command = [*shock_command(), "trace", *TRACES[name][:1], str(folder / name)]
        subprocess.run([*command, *TRACES[name][1:]], check=True, capture_output=True)


def baseline_environment(folder: Path) -> dict[str, str]:
    """An environment in which `benchmarks/cvxpy_baselines.py` is an installed plugin: a
    distribution record with its entry point, as `pip install` would leave it."""
    site = folder / "baseline-plugin"
    record = site / "shock_cvxpy_baselines-0.dist-info"
    record.mkdir(parents=True, exist_ok=True)
    (record / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shock-cvxpy-baselines\nVersion: 0\n"
    )
    (record / "entry_points.txt").write_text("[shock]\ncvxpy_baselines = cvxpy_baselines\n")
    paths = [str(site), str(BENCHMARKS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def measure(
    row: Row,
    policy: str,
    label: str,
    folder: Path,
    repeat: int,
    env: dict[str, str] | None = None,
) -> Measured:
    measured = Measured(label, policy)
    out = folder / f"{row.name}-{policy}.json"
    command = [*shock_command(), "run", "--policy", policy, *row.arguments]
    if row.trace is not None:
        command += ["--trace", str(folder / row.trace)]
    if row.name != "startup":
        command += ["--quiet", "--json", str(out)]
    for _ in range(repeat):
        measured.samples.append(measured_child(command, folder / "log.txt", env))
    if out.exists():
        measured.metrics = document_metrics(out)
        out.unlink()
    return measured


def document_metrics(path: Path) -> dict[str, float]:
    """A results document's metrics, read in a child process: a child started later inherits
    this process's peak memory (Linux counts it into the child's at exec), so this process
    must never hold a large document."""
    probe = "import json, sys; print(json.dumps(json.load(open(sys.argv[1]))['metrics']))"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path)], check=True, capture_output=True, text=True
    )
    metrics: dict[str, float] = json.loads(done.stdout)
    return metrics


def byte_compile() -> None:
    """shock's modules byte-compiled, as installing a package does (an editable install under
    PYTHONDONTWRITEBYTECODE would otherwise compile every module at each start)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "shock")],
        check=True,
        capture_output=True,
    )


def write_plugin_manifest() -> None:
    """One command before the timed ones, as any user's first: it loads every plugin and
    writes the manifest from which later commands import only the plugin modules they use
    (`shock.util.plugin_manifest`)."""
    subprocess.run([*shock_command(), "plugins"], check=True, capture_output=True)


def heavy_modules_loaded() -> list[str]:
    probe = (
        # Every plugin module imported (as `shock plugins` does), not only those a run uses.
        "import sys; from shock.core.plugins import PluginRegistry, load_plugins; "
        "PluginRegistry(load_plugins()); "
        f"print(' '.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return done.stdout.split()


def spread(values: list[float], digits: int = 2) -> str:
    low, high = min(values), max(values)
    if len(values) == 1 or f"{low:.{digits}f}" == f"{high:.{digits}f}":
        return f"{low:.{digits}f}"
    return f"{low:.{digits}f}-{high:.{digits}f}"


def verdict(value: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"<= {target:g}: {'met' if value <= target else 'MISSED'}"


COLUMNS = (
    "row",
    "policy",
    "run",
    "CPU-s",
    "wall s",
    "peak MB",
    "target CPU-s",
    "CPU ratio vs baseline",
    "jobs",
    "avg JCT (h)",
    "makespan (h)",
    "rounds",
    "allocations",
    "own simulator (elsewhere)",
)


def table_rows(row: Row, runs: list[Measured]) -> list[list[str]]:
    lines = []
    cpu = [min(s.cpu_s for s in run.samples) for run in runs]
    for index, run in enumerate(runs):
        ours = index == 0
        peak = max(s.peak_mb for s in run.samples)
        memory = f"{peak:.0f}"
        if ours and row.target_mb is not None:
            memory += f" ({verdict(peak, row.target_mb)})"
        m = run.metrics
        lines.append(
            [
                row.name,
                run.policy,
                run.label,
                spread([s.cpu_s for s in run.samples]),
                spread([s.wall_s for s in run.samples]),
                memory,
                verdict(cpu[0], row.target_cpu_s) if ours else "",
                f"{cpu[-1] / cpu[0]:.1f}x" if ours and len(runs) > 1 else "",
                str(m["jobs"]) if m else "",
                f"{m['avg_jct_s'] / 3600:.3f}" if m else "",
                f"{m['makespan_s'] / 3600:.1f}" if m else "",
                str(m["rounds"]) if m else "",
                str(m["allocations"]) if m else "",
                row.elsewhere if ours else "",
            ]
        )
    return lines


def markdown(lines: list[list[str]], notes: list[str], repeat: int) -> str:
    cores = os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    text = [
        "# Simulation speed",
        "",
        "Written by `python benchmarks/simulate.py --markdown docs/benchmarks.md` "
        "(see the script's docstring for each row). Each row is `shock run ... --json` as a "
        "user runs it, in its own process; CPU-s counts user+system seconds of that process "
        f"and its children. Ranges are over {repeat} run(s) per row (baselines: one); the "
        "target and the ratio use the lowest. The baseline is the same run with the policy "
        "stated as Gavel's artifact states it (cvxpy, solved by ECOS at every allocation). "
        "The last column quotes each artifact's own simulator as measured elsewhere, not in "
        "this run.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {cores} cores, "
        f"Python {platform.python_version()}, load average at the end {load} "
        "(other work was running beside it if that is above 1).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    text += ["| " + " | ".join(line) + " |" for line in lines]
    text += ["", *notes, ""]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the static and startup rows")
    parser.add_argument("--rows", help="comma-separated row names (see above)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row (ranges)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the cvxpy+ECOS runs")
    parser.add_argument("--markdown", type=Path, help="write the table as a Markdown page")
    args = parser.parse_args()
    every = rows()
    names = [row.name for row in every]
    wanted = ["static", "startup"] if args.quick else names
    if args.rows:
        wanted = args.rows.split(",")
    unknown = [name for name in wanted if name not in names]
    if unknown:
        parser.error(f"unknown row(s) {', '.join(unknown)}; rows: {', '.join(names)}")
    by_name = {row.name: row for row in every}
    chosen = [by_name[name] for name in wanted]  # in the order asked for
    console = Console(width=200)
    notes: list[str] = []
    if "startup" in wanted:
        loaded = heavy_modules_loaded()
        notes.append(
            "Heavy modules imported by loading the plugins: " + (", ".join(loaded) or "none") + "."
        )
    measured: dict[str, list[Measured]] = {}

    def report(final: bool) -> None:
        """The table so far (each row as soon as it is measured, so a long session that is
        stopped keeps what it measured)."""
        lines = [
            line
            for row in chosen
            if row.name in measured
            for line in table_rows(row, measured[row.name])
        ]
        if args.markdown:
            args.markdown.write_text(markdown(lines, notes, args.repeat))
        if final:
            table = Table(title="Simulation speed (CPU-s: user+system of the whole process tree)")
            for column in COLUMNS:
                table.add_column(column, justify="right")
            for line in lines:
                table.add_row(*line)
            console.print(table)
            for note in notes:
                console.print(note)

    byte_compile()
    write_plugin_manifest()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_traces({row.trace for row in chosen if row.trace}, folder)
        for row in chosen:
            measured[row.name] = [measure(row, row.policy, "shock (HiGHS)", folder, args.repeat)]
            first = measured[row.name][0].samples
            console.print(f"{row.name}: CPU-s {spread([s.cpu_s for s in first])}")
            report(final=False)
        # The baselines after every row's own runs (they are the slow side); each once, as
        # only its lowest time enters the ratio.
        env = None if args.no_baseline else baseline_environment(folder)
        for row in chosen:
            if row.baseline and env is not None:
                label = "baseline (cvxpy+ECOS)"
                measured[row.name].append(measure(row, row.baseline, label, folder, 1, env))
                console.print(f"{row.name}: baseline done")
                report(final=False)
    report(final=True)


if __name__ == "__main__":
    main()
