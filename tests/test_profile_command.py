"""`shock profile` writes a Gavel-format throughput table that shock can load."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch", reason="shock profile needs PyTorch (pip install .[cluster])")

from shock.cli.app import app
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.throughputs import load_throughputs
from shock.core.trace import write_trace

FAST = ["--seconds", "0.05", "--warmup-steps", "1"]


def test_profile_writes_a_loadable_table_and_merges(tmp_path):
    output = tmp_path / "measured.json"
    result = CliRunner().invoke(
        app,
        [
            "profile",
            "--job-type",
            "LM (batch size 5)",
            "--job-type",
            "A3C",
            "--output",
            str(output),
            *FAST,
        ],
    )
    assert result.exit_code == 0, result.output
    raw = json.loads(output.read_text())
    assert set(raw) == {"v100"}
    assert set(raw["v100"]) == {"('LM (batch size 5)', 1)", "('A3C', 1)"}
    table = load_throughputs(output)
    assert table.throughput("LM (batch size 5)", 1, "v100") > 0
    assert table.throughput("A3C", 1, "v100") > 0

    result = CliRunner().invoke(
        app,
        [
            "profile",
            "--job-type",
            "LM (batch size 5)",
            "--gpu-type",
            "k80",
            "--merge",
            "--output",
            str(output),
            *FAST,
        ],
    )
    assert result.exit_code == 0, result.output
    merged = load_throughputs(output)
    assert merged.worker_types == ("k80", "v100")
    assert merged.throughput("A3C", 1, "v100") == table.throughput("A3C", 1, "v100")


def test_profile_takes_the_job_types_of_a_trace(tmp_path):
    trace = tmp_path / "small.trace"
    jobs = [
        JobSpec(job_id=0, job_type="Recommendation (batch size 512)", total_steps=10),
        JobSpec(job_id=1, job_type="LM (batch size 5)", total_steps=10),
        JobSpec(job_id=2, job_type="LM (batch size 5)", total_steps=20),
    ]
    write_trace(jobs, trace, default_registry(), "gavel")
    output = tmp_path / "out.json"
    result = CliRunner().invoke(
        app, ["profile", "--trace", str(trace), "--output", str(output), *FAST]
    )
    assert result.exit_code == 0, result.output
    table = load_throughputs(output)
    assert set(table.isolated) == {("Recommendation (batch size 512)", 1), ("LM (batch size 5)", 1)}


def test_profile_refuses_unknown_job_types_and_devices(tmp_path):
    output = tmp_path / "never.json"
    result = CliRunner().invoke(
        app, ["profile", "--job-type", "VGG-16 (batch size 8)", "--output", str(output)]
    )
    assert result.exit_code != 0
    assert "no workload for model family 'VGG-16'" in str(result.exception or result.output)
    result = CliRunner().invoke(
        app, ["profile", "--job-type", "A3C", "--device", "cuda:99", "--output", str(output)]
    )
    assert result.exit_code != 0
    assert "--device cuda:99" in str(result.exception or result.output)
    assert not output.exists()
