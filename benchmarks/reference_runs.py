"""Reference runs: twelve short `shock run` invocations whose results documents must not change
when the code is reorganised or made faster.

Each run goes through the CLI as a user types it, writes its results document with `--json`,
and the document, read back by shock's own reader in the version-1 layout (timeline inline,
whichever layout the file has), is reduced to what the run decided (wall-clock and solver
timings removed) before hashing. `--write DIR` stores the digests, `--check DIR` compares
against them:

    python benchmarks/reference_runs.py --write /tmp/ref       # before a change
    python benchmarks/reference_runs.py --check /tmp/ref       # after it
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shock.results.document import version_1_document

WISR = "shock/data/shockwave_wisr_throughputs.json"
SHOCKWAVE_TRACE = "shock/data/traces/shockwave_120_multigpu_dynamic.trace"
SHOCKWAVE = ("--trace", SHOCKWAVE_TRACE, "--cluster", "32:0:0", "--throughputs", WISR)
SYNERGY = ("--cluster", "synergy-128", "--preset", "synergy", "--policy", "fifo")

RUNS: dict[str, tuple[str, ...]] = {
    "default": (),
    "gavel": ("--preset", "gavel"),
    "synergy-proportional": (*SYNERGY, "--placement", "proportional"),
    "synergy-tune": (*SYNERGY, "--placement", "tune"),
    "synergy-greedy": (*SYNERGY, "--placement", "greedy"),
    # Its MILPs stop at a wall-clock limit (2 s by default), so a busy machine changes the
    # schedule; a limit no solve reaches makes the run reproducible.
    "shockwave": (
        *SHOCKWAVE,
        "--preset",
        "shockwave",
        "--policy",
        "shockwave",
        "--policy-option",
        "time_limit_s=600",
    ),
    "shockwave-las": (*SHOCKWAVE, "--preset", "shockwave", "--policy", "max_min_fairness"),
    "packed": ("--preset", "gavel", "--policy", "max_min_fairness_packed"),
    "ftf": ("--preset", "gavel", "--policy", "finish_time_fairness_perf"),
    "water-filling": (
        "--policy",
        "max_min_fairness_water_filling_perf",
        "--entities",
        "alice,bob",
        "--entity-weights",
        "alice=2",
    ),
    "agnostic": ("--preset", "gavel", "--policy", "max_min_fairness"),
    "tiresias": ("--policy", "tiresias"),
}

# Fields that measure the machine, not the schedule.
TIMING_METRICS = ("wall_s", "solver_seconds")


def decisions(document: dict) -> dict:
    """The document without its timings."""
    metrics = {k: v for k, v in document["metrics"].items() if k not in TIMING_METRICS}
    timeline = dict(document.get("timeline") or {})
    if "rounds" in timeline:
        timeline["rounds"] = {k: v for k, v in timeline["rounds"].items() if k != "solve_s"}
    # The trace by its file name: the same run from another checkout hashes the same.
    trace = Path(document["trace"]).name
    return {**document, "trace": trace, "metrics": metrics, "timeline": timeline}


def run_one(name: str, args: tuple[str, ...], root: Path, out: Path) -> str:
    path = out / f"{name}.json"
    command = ["shock", "run", "--quiet", "--json", str(path), *args]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name}: {' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    text = json.dumps(decisions(version_1_document(path)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def digests(names: list[str]) -> dict[str, str]:
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        futures = {n: pool.submit(run_one, n, RUNS[n], root, Path(tmp)) for n in names}
        return {n: f.result() for n, f in futures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="store the digests in this folder")
    group.add_argument("--check", type=Path, help="compare with the digests in this folder")
    parser.add_argument("--runs", help="comma-separated names (default: all twelve)")
    options = parser.parse_args()
    names = options.runs.split(",") if options.runs else list(RUNS)
    found = digests(names)
    if options.write:
        options.write.mkdir(parents=True, exist_ok=True)
        (options.write / "digests.json").write_text(json.dumps(found, indent=1) + "\n")
        print(f"{len(found)} digests written to {options.write}")
        return
    stored = json.loads((options.check / "digests.json").read_text())
    changed = [n for n in names if stored.get(n) != found[n]]
    for name in names:
        print(f"{name:24} {'CHANGED' if name in changed else 'same'}")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
