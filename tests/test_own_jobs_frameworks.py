"""The Lightning and Hugging Face callbacks on the cluster, end to end: tiny models trained
by `Trainer`s whose scripts add shock's callback, submitted with `shock submit -- python
SCRIPT`, preempted by competing jobs and resumed from their own checkpoints, ending at
exactly their step count."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest
from cluster_procs import SHOCK, free_port, processes, query, wait_for
from test_own_jobs import SCRIPT, TOKEN, Service

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent / "own_jobs"


def _missing(*modules: str) -> str | None:
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return f"needs {', '.join(absent)} (pip install -e '.[lightning,huggingface]')"


@pytest.mark.parametrize(
    ("script", "modules"),
    [("lightning_job.py", ("lightning",)),
     ("huggingface_job.py", ("transformers", "accelerate"))],
)  # fmt: skip
def test_a_framework_job_is_preempted_resumed_and_ends_at_its_step_count(
    tmp_path: Path, script: str, modules: tuple[str, ...]
) -> None:
    reason = _missing(*modules)
    if reason is not None:
        pytest.skip(reason)
    with processes(tmp_path / "logs") as procs:
        port = free_port()
        state_dir, address = tmp_path / "state", f"127.0.0.1:{port}"
        # Rounds long enough for a framework's imports (seconds) to leave time for steps.
        serve_args = [*SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port),
                      "--policy", "max_min_fairness", "--round-length", "8", "--heartbeat",
                      "0.3", "--dead-after", "10"]  # fmt: skip
        procs.start("serve", serve_args, {"SHOCK_TOKEN": TOKEN})
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        procs.start("worker", [
            *SHOCK, "worker", "--scheduler", address, "--gpus", "1", "--gpu-type", "v100",
            "--simulated", "--heartbeat", "0.3", "--checkpoint-every", "1",
            "--log-dir", str(tmp_path / "worker-logs"), "--report-timeout", "120",
        ], {"SHOCK_TOKEN": TOKEN, "PATH": path})  # fmt: skip
        wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM workers")), 60, "the worker")
        workdir = tmp_path / "work"
        workdir.mkdir()
        shutil.copy(HERE / script, workdir / script)
        (workdir / "script.py").write_text(SCRIPT)
        service = Service(procs, state_dir, address, serve_args, workdir)
        framework = service.submit("--", "python", script)
        # Once it trains, a competitor: the fair policy gives it the GPU from the next round.
        wait_for(lambda: service.job_row(framework).get("step", 0) > 0, 180, "training")
        competitor = service.submit("--", "python", "script.py")
        row = service.wait_over(framework, timeout_s=300)
        assert row["state"] == "done" and (row["step"], row["target"]) == (400, 400), row
        runs = service.runs(framework)
        assert "preempted" in [end for _, _, end in runs], runs
        assert any(resumed and resumed > 0 for _, resumed, _ in runs), runs
        assert service.wait_over(competitor)["state"] == "done"
        logs = service.cli("logs", str(framework)).stdout
        assert f"python {script}" in logs and "ended (done) at step 400" in logs
