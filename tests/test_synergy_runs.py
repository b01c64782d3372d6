"""End to end: --preset synergy, --placement on shock run, the results document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shock.cli.app import app
from shock.engine.runner import RunOptions, build_request, run

HEADER = "job_id,model_name,arrival_time_s,total_iterations,gpu_demand\n"


def small_trace(tmp_path: Path) -> Path:
    path = tmp_path / "small.csv"
    path.write_text(
        HEADER
        + "0,res18,0,2000,1\n"  # 0.64 s per iteration: 1280 s at the fair share
        + "1,gnmt,0,5000,2\n"  # 0.12 s: 600 s
        + "2,m5,100,1000,1\n"  # 0.6 s: 600 s
    )
    return path


def test_synergy_preset_finishes_jobs_at_round_ends(tmp_path: Path) -> None:
    trace = str(small_trace(tmp_path))
    result = run(RunOptions(policy="fifo", trace=trace, cluster="synergy-128", preset="synergy"))
    completions = {r.job_id: r.completion_s for r in result.records}
    # Rounds start at 0, 300, 600, ...: res18 needs 1280 s -> 5 rounds; gnmt 600 s -> 2 rounds;
    # m5 arrives at 100, starts at the next round boundary (300) and needs 2 rounds.
    assert completions == {0: 1500.0, 1: 600.0, 2: 900.0}
    assert result.placement == "proportional"


def test_tune_speeds_up_sensitive_jobs_under_the_synergy_preset(tmp_path: Path) -> None:
    options = {"policy": "fifo", "trace": str(small_trace(tmp_path)), "cluster": "synergy-128"}
    tuned = run(RunOptions(**options, preset="synergy", placement="tune"))
    completions = {r.job_id: r.completion_s for r in tuned.records}
    # res18 with its best case (9 CPUs) runs 2.4x faster: 1280 / 2.4 = 533 s -> 2 rounds.
    assert completions[0] == 600.0
    # m5's best case: 6 CPUs, 187.5 GB per GPU (2.5x): 240 s -> 1 round from 300 s.
    assert completions[2] == 600.0
    assert completions[1] == 600.0  # gnmt is insensitive
    optimal = run(RunOptions(**options, preset="synergy", placement="opt"))
    assert {r.job_id: r.completion_s for r in optimal.records} == completions


@pytest.mark.parametrize("placement", ["proportional", "greedy", "tune"])
def test_every_placement_composes_with_a_heterogeneous_gavel_run(placement: str) -> None:
    result = run(
        RunOptions(policy="max_min_fairness_perf", cluster="hetero-96", placement=placement)
    )
    assert result.unfinished_jobs == 0
    assert result.placement == placement


def test_cli_run_with_placement_writes_it_to_the_document(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    trace = tmp_path / "t.csv"
    runner = CliRunner()
    made = runner.invoke(app, ["trace", "synergy", str(trace), "--jobs", "8", "--seed", "1"])
    assert made.exit_code == 0, made.output
    result = runner.invoke(
        app,
        [
            "run", "--trace", str(trace), "--cluster", "synergy-128", "--policy", "srtf",
            "--preset", "synergy", "--placement", "tune", "--quiet", "--json", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["placement"] == "tune"
    assert document["preset"] == "synergy"
    assert document["cluster"] == "synergy-128 (v100=128)"
    assert document["unfinished_jobs"] == 0


def test_a_synergy_trace_runs_on_synergys_cluster_unless_told_otherwise(tmp_path: Path) -> None:
    """The trace format supplies the default cluster; --cluster still wins."""
    trace = str(small_trace(tmp_path))
    assert build_request(RunOptions(trace=trace)).cluster.name == "synergy-128"
    assert build_request(RunOptions(trace=trace, cluster="v100=16")).cluster.total_gpus == 16
    # A Gavel trace has no default of its own: Gavel's physical cluster.
    gavel = build_request(RunOptions())
    assert gavel.cluster.gpus_per_type == {"v100": 8, "p100": 16, "k80": 24}
