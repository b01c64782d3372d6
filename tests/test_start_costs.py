"""Start costs: `shock profile --start-costs` measures launch, checkpoint and restore; the
simulator charges them at every (re)start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shock.core.errors import InputError
from shock.engine.runner import RunOptions, run
from shock.engine.start_costs import load_start_costs

LM = "LM (batch size 20)"


def _costs(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(document))
    return path


def test_a_types_cost_is_the_sum_of_its_parts_at_its_largest_over_the_runs_types(
    tmp_path: Path,
) -> None:
    path = _costs(tmp_path, {
        "v100": {LM: {"launch_s": 4.0, "checkpoint_s": 0.5, "restore_s": 0.25}},
        "k80": {LM: {"launch_s": 9.0, "checkpoint_s": 1.0, "restore_s": 1.0}},
        "h200": {LM: {"launch_s": 2.0, "checkpoint_s": 0.1, "restore_s": 0.1}},
    })  # fmt: skip
    assert load_start_costs(path, ("v100",)) == {LM: 4.75}
    assert load_start_costs(path, ("v100", "k80")) == {LM: 11.0}
    # None of the run's types measured: every type in the file counts.
    assert load_start_costs(path, ("p100",)) == {LM: 11.0}


def test_bad_start_costs_name_the_file_and_field(tmp_path: Path) -> None:
    path = _costs(tmp_path, {"v100": {LM: {"launch_s": "slow", "checkpoint_s": 0, "restore_s": 0}}})
    with pytest.raises(InputError, match=r"costs\.json.*v100\.LM \(batch size 20\)\.launch_s"):
        load_start_costs(path, ("v100",))
    path.write_text("{")
    with pytest.raises(InputError, match="invalid JSON"):
        load_start_costs(path, ("v100",))


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "one.trace"
    fields = [LM, "python3 main.py", "lm", "--steps", "0", "3000", "1", "1", "-1", "0"]
    path.write_text("\t".join(fields) + "\n")
    return path


def test_the_simulator_charges_the_launch_of_a_job_alone(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    costs = _costs(
        tmp_path, {"v100": {LM: {"launch_s": 25.0, "checkpoint_s": 3.0, "restore_s": 2.0}}}
    )
    plain = run(RunOptions(trace=trace, cluster="v100=1", round_length_s=6000))
    charged = run(
        RunOptions(trace=trace, cluster="v100=1", round_length_s=6000, start_costs=str(costs))
    )
    assert charged.metrics.avg_jct_s == pytest.approx(plain.metrics.avg_jct_s + 30.0, rel=1e-9)


def test_profile_writes_start_costs(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="shock profile needs PyTorch (pip install .[cluster])")
    from typer.testing import CliRunner

    from shock.cli.app import app

    costs = tmp_path / "costs.json"
    result = CliRunner().invoke(
        app,
        ["profile", "--job-type", "A3C", "--seconds", "0.05", "--warmup-steps", "1",
         "--output", str(tmp_path / "t.json"), "--gpu-type", "t4", "--start-costs", str(costs)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    measured = json.loads(costs.read_text())["t4"]["A3C"]
    assert measured["launch_s"] > 0.1  # a fresh interpreter importing torch
    assert measured["checkpoint_s"] > 0 and measured["restore_s"] > 0
    assert load_start_costs(costs, ("t4",))["A3C"] == pytest.approx(sum(measured.values()))
