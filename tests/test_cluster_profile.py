"""`shock profile --local-workers`: rates measured through real worker agents."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_procs import HERE, SHOCK

from shock.cluster.journal import Journal
from shock.core.throughputs import load_throughputs

RESNET, LM = "ResNet-18 (batch size 32)", "LM (batch size 32)"


def test_profile_through_local_workers_measures_each_job_types_rate(tmp_path: Path) -> None:
    # The stand-in job sleeps 0.05 s (ResNet-18) and 0.04 s (LM) per step at batch size 32.
    output = tmp_path / "measured.json"
    completed = subprocess.run(
        [*SHOCK, "profile", "--local-workers", "1", "--gpus-per-worker", "2",
         "--job-type", RESNET, "--job-type", LM, "--seconds", "2", "--output", str(output),
         "--state-dir", str(tmp_path / "state"),
         "--job-command", f"python {HERE / 'fake_job.py'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    table = load_throughputs(output)
    # Sleeping bounds a step from below; reporting and a loaded machine only slow it down.
    assert 0.7 * 20.0 < table.throughput(RESNET, 1, "v100") <= 20.5
    assert 0.7 * 25.0 < table.throughput(LM, 1, "v100") <= 25.5
    # Each job ran in its own process, both at once (two GPUs).
    journal = Journal(tmp_path / "state" / "run")
    runs = journal.runs()
    journal.close()
    assert len(runs) == 2 and all(run.end_reason == "done" for run in runs)
    first, second = runs
    assert first.started_at is not None and second.started_at is not None
    assert max(first.started_at, second.started_at) < min(first.ended_at, second.ended_at)  # type: ignore[type-var]
