"""The third-party backend example (examples/shock-example-backend): `noisy`, an executor whose
jobs run at the planned rate times a seeded random factor per (job, round).

The CLI tests install the package (editable, once) and run it as a user would; the executor's
unit tests import its module from the source tree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from example_packages import EXAMPLES, example_module, install_example
from shock_cli import run_shock_wide

from shock.api import ExecutorCapabilities, PlannedUnit, RoundPlan

EXAMPLE_DIR = EXAMPLES / "shock-example-backend"
DISTRIBUTION = "shock-example-backend"
MODULE = "shock_example_backend"
BACKEND = "noisy"
# A heuristic policy keeps the runs short; the bundled trace has 96 jobs.
RUN = ("run", "--policy", "fifo_perf", "--quiet")


@pytest.fixture(scope="module")
def example_installed() -> None:
    install_example(EXAMPLE_DIR.name, DISTRIBUTION, MODULE)


_shock = run_shock_wide


def _document(tmp_path: Path, name: str, *args: str) -> dict[str, Any]:
    result = _shock(*RUN, *args, "--json", f"{name}.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
    return document


def _jcts(document: dict[str, Any]) -> dict[int, float]:
    return {job["id"]: job["jct_s"] for job in document["jobs"]}


@pytest.fixture(scope="module")
def simulator_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _document(tmp_path_factory.mktemp("simulator"), "simulator")


# Through the CLI.


@pytest.mark.usefixtures("example_installed")
def test_shock_plugins_lists_the_backend_with_its_package() -> None:
    result = _shock("plugins")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if f" {BACKEND} " in line]
    assert len(rows) == 1, result.stdout
    cells = [cell.strip() for cell in re.split(r"[│|]", rows[0]) if cell.strip()]
    assert cells[:3] == ["backend", BACKEND, DISTRIBUTION], rows[0]


@pytest.mark.usefixtures("example_installed")
def test_zero_noise_is_exactly_the_simulator(
    simulator_run: dict[str, Any], tmp_path: Path
) -> None:
    noisy = _document(tmp_path, "noisy", "--backend", BACKEND, "--noise", "0")
    assert noisy["backend"] == BACKEND
    assert simulator_run["backend"] == "simulator"
    assert noisy["jobs"] == simulator_run["jobs"]  # every arrival, completion, JCT and rho
    timing = {"wall_s", "solver_seconds"}
    assert {k: v for k, v in noisy["metrics"].items() if k not in timing} == {
        k: v for k, v in simulator_run["metrics"].items() if k not in timing
    }


@pytest.mark.usefixtures("example_installed")
def test_noise_changes_jcts_reproducibly_and_every_job_completes(
    simulator_run: dict[str, Any], tmp_path: Path
) -> None:
    long_options = _document(
        tmp_path, "long", "--backend", BACKEND, "--noise", "0.3", "--noise-seed", "3"
    )
    generic = _document(
        tmp_path, "generic", "--backend", BACKEND,
        "--backend-option", "noise=0.3", "--backend-option", "noise_seed=3",
    )  # fmt: skip
    other_seed = _document(
        tmp_path, "other", "--backend", BACKEND, "--noise", "0.3", "--noise-seed", "4"
    )
    for document in (long_options, other_seed):
        assert document["unfinished_jobs"] == 0
        assert document["metrics"]["jobs"] == 96
        assert all(job["completion_s"] > job["arrival_s"] for job in document["jobs"])
    simulated = _jcts(simulator_run)
    noisy = _jcts(long_options)
    assert noisy.keys() == simulated.keys()
    differing = [job_id for job_id in noisy if noisy[job_id] != simulated[job_id]]
    assert len(differing) > len(noisy) // 2, differing
    # The same options given either way, the same seed: the same run.
    assert generic["jobs"] == long_options["jobs"]
    assert _jcts(other_seed) != noisy


@pytest.mark.usefixtures("example_installed")
def test_help_with_the_backend_lists_its_options() -> None:
    result = _shock("run", "--backend", BACKEND, "--help")
    assert result.returncode == 0, result.stderr
    section = result.stdout[result.stdout.index(f"Options of backend '{BACKEND}'") :]
    flat = " ".join(section.split())
    assert "--noise <float>" in flat
    assert "--noise-seed <int>" in flat
    assert "per job and round" in flat
    assert "[default: 0.1]" in flat and "[default: 0]" in flat
    # Without --backend the simulator's (none) are described instead.
    plain = _shock("run", "--help")
    assert "--noise" not in plain.stdout
    assert "takes no options" in " ".join(plain.stdout.split())


@pytest.mark.usefixtures("example_installed")
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--noise", "lots"], "backend 'noisy': option --noise expects a number, got 'lots'"),
        (["--noise", "1.5"], "backend 'noisy': --noise must be in [0, 1), got 1.5"),
    ],
)
def test_bad_option_is_a_clear_error(args: list[str], expected: str, tmp_path: Path) -> None:
    result = _shock(*RUN, "--backend", BACKEND, *args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert expected in " ".join(result.stderr.split())


# The executor, in-process.


@pytest.fixture(scope="module")
def noisy() -> Iterator[ModuleType]:
    """`shock_example_backend.noisy`, installed or straight from the source tree."""
    with example_module(MODULE, EXAMPLE_DIR, "noisy") as module:
        yield module


def _unit(job_id: int, rate: float, left: float, overhead: float = 0.0) -> PlannedUnit:
    return PlannedUnit((job_id,), ("ResNet-18 (batch size 64)",), "v100", (job_id,), (rate,),
                       (left,), overhead, True)  # fmt: skip


def test_executor_simulates_jobs(noisy: ModuleType) -> None:
    executor = noisy.NoisyExecutor(noisy.NoisyOptions())
    assert executor.capabilities == ExecutorCapabilities(simulates_jobs=True)


def test_each_job_runs_within_its_noise_band(noisy: ModuleType) -> None:
    executor = noisy.NoisyExecutor(noisy.NoisyOptions(noise=0.2, noise_seed=7))
    units = tuple(_unit(job_id, 10.0 + job_id, 1e9, overhead=5.0) for job_id in range(50))
    report = executor.run_round(RoundPlan(1, 100.0, 400.0, units))
    speeds = []
    for unit, progress in zip(units, report.units, strict=True):
        (steps,) = progress.steps
        speed = steps / (300.0 - 5.0) / unit.rates[0]  # relative to the planned rate
        assert 0.8 - 1e-2 <= speed <= 1.2, (unit.job_ids, speed)
        assert progress.stopped_s[0] <= 400.0 + 1e-9
        speeds.append(speed)
    assert max(speeds) - min(speeds) > 0.1  # the factors do vary
    assert report.end_s == max(p.stopped_s[0] for p in report.units)


def test_a_jobs_factor_depends_on_job_round_and_seed_only(noisy: ModuleType) -> None:
    def steps_of_job_3(seed: int, round_index: int, others: int) -> float:
        executor = noisy.NoisyExecutor(noisy.NoisyOptions(noise=0.5, noise_seed=seed))
        units = [_unit(job_id, 3.0, 1e9) for job_id in range(4, 4 + others)] + [
            _unit(3, 3.0, 1e9)
        ]
        report = executor.run_round(RoundPlan(round_index, 0.0, 1000.0, tuple(units)))
        return float(report.units[-1].steps[0])

    alone = steps_of_job_3(seed=1, round_index=2, others=0)
    assert steps_of_job_3(seed=1, round_index=2, others=9) == alone
    assert {steps_of_job_3(seed=1, round_index=r, others=0) for r in range(1, 6)} != {alone}
    assert {steps_of_job_3(seed=s, round_index=2, others=0) for s in range(2, 7)} != {alone}


def test_a_job_never_runs_past_its_steps(noisy: ModuleType) -> None:
    executor = noisy.NoisyExecutor(noisy.NoisyOptions(noise=0.5, noise_seed=1))
    report = executor.run_round(RoundPlan(1, 0.0, 360.0, (_unit(0, 100.0, 42.0),)))
    assert report.units[0].steps == (42.0,)
    assert report.units[0].stopped_s[0] < 360.0
    assert executor.clock() == report.end_s
