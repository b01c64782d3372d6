"""What the results document costs: writing it (CPU seconds and peak memory of the whole
`shock run`, with and without `--json`), its size on disk, and reading it back.

Rows:
  large:      50,000 jobs (Gavel's generator, 75 jobs/h, seed 0) on 683:683:682,
              max_min_fairness_perf, run to the end (target: peak <= 512 MB with --json)
  continuous: 5,600 jobs at 1.4 jobs/h on 12:12:12, --preset gavel, window 4000:4999; its
              document read back by `shock compare` (target: reading <= 0.5 s)

Every run is a fresh `shock run` process as a user types it; CPU seconds are user+system of
the process and everything it waited for, peak memory its max RSS. The baseline, measured in
the same run, is the same simulation writing the inline layout (schema version 1: one JSON
text with the timeline inside, what `shock run --json` wrote before the side-car), by a short
Python script, and `shock compare` reading that inline file. "read" is the in-process time of
`load_run` (what `shock compare` and `shock plot` call), the best of the repeats; "compare" is
the whole `shock compare` command, start-up included.

    python benchmarks/results_document.py [--rows large,continuous] [--repeat 3]
                                          [--jobs N] [--no-baseline]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

SHOCK = [sys.executable, "-m", "shock"]
# The same run, written in the inline layout (the baseline).
INLINE_WRITER = """
import ast, sys
from shock.core.results import document_text
from shock.engine.runner import RunOptions, run
options = ast.literal_eval(sys.argv[1])
result = run(RunOptions(**options))
with open(sys.argv[2], "w") as handle:
    handle.write(document_text(result.to_document()))
"""
READER = """
import sys, time
from shock.results.runs import load_run
best = float("inf")
for _ in range(int(sys.argv[2])):
    started = time.process_time()
    load_run(sys.argv[1])
    best = min(best, time.process_time() - started)
print(best)
"""


@dataclass(frozen=True)
class Measured:
    cpu_s: float
    wall_s: float
    peak_mb: float


@dataclass
class Samples:
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

    def text(self, name: str, unit: str = "") -> str:
        found = self.values.get(name)
        if not found:
            return "-"
        low, high = min(found), max(found)
        if abs(high - low) < 0.005 * max(abs(high), 1e-9):
            return f"{low:.2f}{unit}"
        return f"{low:.2f}-{high:.2f}{unit}"

    def best(self, name: str) -> float | None:
        found = self.values.get(name)
        return min(found) if found else None


def measure(command: list[str], cwd: Path) -> Measured:
    """One process to its end: CPU seconds (user+system, its children included) and peak RSS."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}")
    # ru_maxrss is in KiB on Linux.
    return Measured(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def generate(folder: Path, jobs: int, rate: float) -> Path:
    trace = folder / f"gavel-{jobs}.trace"
    if not trace.exists():
        command = [*SHOCK, "trace", "generate", str(trace), "--jobs", str(jobs)]
        subprocess.run([*command, "--rate", str(rate), "--seed", "0"], check=True,
                       stdout=subprocess.DEVNULL)
    return trace


def sizes(path: Path) -> float:
    """MB on disk of a document and its side-car."""
    sidecar = path.with_name(path.name.removesuffix(".json") + ".timeline.npz")
    total = path.stat().st_size + (sidecar.stat().st_size if sidecar.exists() else 0)
    return total / 1e6


def run_row(name: str, args: list[str], options: dict[str, object], folder: Path,
            repeat: int, baseline: bool, samples: Samples) -> None:
    new = folder / f"{name}.json"
    inline = folder / f"{name}-inline.json"
    for _ in range(repeat):
        with_json = measure([*SHOCK, "run", "--quiet", *args, "--json", str(new)], folder)
        samples.add("json cpu", with_json.cpu_s)
        samples.add("json peak", with_json.peak_mb)
        without = measure([*SHOCK, "run", "--quiet", *args], folder)
        samples.add("plain cpu", without.cpu_s)
        samples.add("plain peak", without.peak_mb)
        if baseline:
            old = measure([sys.executable, "-c", INLINE_WRITER, repr(options), str(inline)],
                          folder)
            samples.add("inline cpu", old.cpu_s)
            samples.add("inline peak", old.peak_mb)
    samples.add("size", sizes(new))
    documents = [("read", new)] + ([("inline read", inline)] if baseline else [])
    for label, path in documents:
        if label == "inline read":
            samples.add("inline size", sizes(path))
        for _ in range(repeat):
            samples.add(label.replace("read", "compare"),
                        measure([*SHOCK, "compare", str(path)], folder).cpu_s)
        best = subprocess.run([sys.executable, "-c", READER, str(path), str(repeat)],
                              check=True, capture_output=True, text=True, cwd=folder)
        samples.add(label, float(best.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="large,continuous")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs of the large row")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--keep", type=Path, help="folder for traces and documents (kept)")
    options = parser.parse_args()
    console = Console()
    table = Table(title="Results document: write, size, read back")
    for column in ("row", "layout", "CPU s (run)", "peak MB (run)", "size MB", "read s",
                   "compare CPU s", "target"):
        table.add_column(column, justify="left" if column in ("row", "layout") else "right")
    context = tempfile.TemporaryDirectory() if options.keep is None else None
    folder = Path(context.name) if context is not None else options.keep
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for name in options.rows.split(","):
            if name == "large":
                trace = generate(folder, options.jobs, 75.0)
                args = ["--trace", str(trace), "--cluster", "683:683:682"]
                run_options: dict[str, object] = {"trace": str(trace), "cluster": "683:683:682"}
                target = "peak <= 512 MB"
            elif name == "continuous":
                trace = generate(folder, 5600, 1.4)
                args = ["--trace", str(trace), "--cluster", "12:12:12", "--preset", "gavel",
                        "--window", "4000:5000"]
                run_options = {"trace": str(trace), "cluster": "12:12:12", "preset": "gavel",
                               "window": (4000, 5000)}
                target = "read <= 0.5 s"
            else:
                raise SystemExit(f"unknown row {name!r} (large, continuous)")
            samples = Samples()
            run_row(name, args, run_options, folder, options.repeat, not options.no_baseline,
                    samples)
            table.add_row(name, "no --json", samples.text("plain cpu"),
                          samples.text("plain peak"), "", "", "", "")
            table.add_row("", "--json (side-car)", samples.text("json cpu"),
                          samples.text("json peak"), samples.text("size"),
                          samples.text("read"), samples.text("compare"), target)
            if not options.no_baseline:
                table.add_row("", "inline (baseline)", samples.text("inline cpu"),
                              samples.text("inline peak"), samples.text("inline size"),
                              samples.text("inline read"), samples.text("inline compare"), "")
                new, old = samples.best("read"), samples.best("inline read")
                peak_new, peak_old = samples.best("json peak"), samples.best("inline peak")
                if new and old and peak_new and peak_old:
                    console.print(
                        f"{name}: read {old / new:.1f}x faster, peak memory "
                        f"{peak_new / peak_old:.2f}x the inline layout's"
                    )
    finally:
        if context is not None:
            context.cleanup()
    console.print(table)
    console.print(f"(this process's own peak: "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
