"""Regenerate the figures of docs/gallery.md from bundled traces: python docs/make_gallery.py

Runs Shockwave's bundled 220-job trace under three policies and a small load sweep, then draws
every `shock plot` kind into docs/images/, and a paper-style set (PDF beside PNG) into
docs/images/paper/, with the same commands a user would type."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
IMAGES = DOCS / "images"
PAPER = IMAGES / "paper"
RUN = [
    "--preset", "shockwave", "--cluster", "64:0:0", "--trace", "shockwave_220_multigpu_dynamic",
    "--throughputs", "shockwave_wisr",
]
# The legends a paper would print.
LABELS = [
    "--label", "shockwave=Shockwave", "--label", "max_min_fairness=Gavel",
    "--label", "fifo=FIFO", "--label", "fifo_perf=FIFO", "--label", "max_min_fairness_perf=Gavel",
    "--label", "max_sum_throughput_perf=Max throughput",
]
POLICIES = ("shockwave", "max_min_fairness", "fifo")
SWEEP_SPEC = """\
[base]
cluster = "4:4:4"
preset = "gavel"
[generate]
jobs = 60
[grid]
policy = ["fifo_perf", "max_min_fairness_perf", "max_sum_throughput_perf"]
rate = [0.5, 1.0, 2.0, 4.0]
seed = [0, 1, 2]
"""
TIMELINE_KINDS = ("utilization", "queue", "gantt", "solve-time")


def shock(*args: str) -> None:
    print("shock", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "shock", *args], cwd=DOCS.parent, check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        runs = {policy: work / f"{policy}.json" for policy in POLICIES}
        for policy, path in runs.items():
            shock("run", "--quiet", "--policy", policy, *RUN, "--json", str(path))
        # Gavel's 96-job trace on its heterogeneous cluster (K80, P100, V100) for utilisation.
        gavel = work / "gavel_las.json"
        shock("run", "--quiet", "--preset", "gavel", "--json", str(gavel))
        spec = work / "load.toml"
        spec.write_text(SWEEP_SPEC)
        shock("sweep", str(spec), "--out", str(work / "load"), "--quiet")

        all_runs = [str(path) for path in runs.values()]
        has_timeline = "timeline" in json.loads(runs["shockwave"].read_text())
        figures = {
            "jct-cdf": all_runs,
            "rho-cdf": all_runs,
            "summary": [*all_runs, "--baseline", "max_min_fairness"],
            "utilization": [str(gavel)],
            "queue": [str(runs["shockwave"]), str(runs["fifo"])],
            "gantt": [str(runs["shockwave"])],
            "solve-time": all_runs,
            "jct-vs-load": [str(work / "load")],
        }
        for kind, inputs in figures.items():
            if kind in TIMELINE_KINDS and not has_timeline:
                print(f"skipped {kind}: this shock's results documents have no timeline")
                continue
            shock("plot", kind, *inputs, "-o", str(IMAGES / f"{kind}.png"))

        # The paper set: one column wide, serif type, legends below, PDF beside PNG.
        PAPER.mkdir(exist_ok=True)
        paper = {
            "jct-cdf": [*all_runs, "--title", ""],
            "summary": [*all_runs, "--baseline", "max_min_fairness", "--title", ""],
            "jct-vs-load": [str(work / "load"), "--title", ""],
            "p99-jct-vs-load": [str(work / "load"), "--metric", "p99_jct", "--title", ""],
            "utilization": [str(gavel), "--title", "", "--size", "3.4,2.2"],
        }
        for name, inputs in paper.items():
            kind = name.removeprefix("p99-")
            for suffix in (".pdf", ".png"):
                shock("plot", kind, *inputs, *LABELS, "--style", "paper",
                      "-o", str(PAPER / f"{name}{suffix}"))


if __name__ == "__main__":
    main()
