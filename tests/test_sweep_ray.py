"""`shock sweep --ray`: cells as Ray tasks on a real Ray instance (loopback, 2 CPUs), with the
same cells, table, resume and failure records as the local process pool."""

from __future__ import annotations

import contextlib
import csv
import functools
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_exclusive import ray_to_ourselves
from shock_cli import run_shock
from typer.testing import CliRunner

from shock import __version__
from shock.cli.app import app
from shock.engine.runner import RunOptions, bundled_trace_path, run
from shock.sweep.cells import Cell, make_cell
from shock.sweep.ray_cells import CellJob, ShippedFile, file_digest, run_cell_job
from shock.sweep.ray_pool import RayTarget, run_on_ray
from shock.sweep.runner import DONE, FAILED, CellOutcome, plan_cells, run_cell, run_sweep
from shock.sweep.spec import CellSpec, load_spec

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (an optional extra: pip install 'shock[ray]')",
)

GRID_SPEC = """
[base]
cluster = "2:2:2"
preset = "gavel"
[generate]
jobs = 12
[grid]
policy = ["max_min_fairness_perf", "fifo_perf"]
rate = [1.0, 2.0]
seed = [0, 1]
"""
TIMING = {"wall_s", "solver_seconds"}  # the only columns two runs of a cell may disagree on
SMALL_TRACE = bundled_trace_path("small_test.trace")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _sweep(spec: Path, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out), "--quiet", *extra])
    return result.exit_code, result.output


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "runs.csv").open() as handle:
        return list(csv.DictReader(handle))


def _without_timing(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module", autouse=True)
def _only_ray_module_running() -> Iterator[None]:
    with ray_to_ourselves():
        yield


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """One Ray head per module and test process (`ray start --head --block`, 2 CPUs); stopping
    that process stops the processes it started, and no one else's Ray."""
    # The token (ray_exclusive) keeps others out, whatever token a home directory holds.
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="shock-ray-", dir="/tmp")  # short: Ray's socket paths
    command = [
        sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
        "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2",
        "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", temp_dir,
    ]
    head = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    assert head.stdout is not None
    seen = []
    for line in head.stdout:  # wait for the state "started", however long that takes
        seen.append(line)
        if "Ray runtime started" in line:
            break
    else:
        raise AssertionError("ray start --head ended:\n" + "".join(seen))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def swept(ray_head: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The 8-cell grid run on Ray and, beside it, locally: the local pool's cell function in
    this process (test_sweep.py shows the pool's table equals it)."""
    root = tmp_path_factory.mktemp("swept")
    spec = _write(root / "spec.toml", GRID_SPEC)
    code, output = _sweep(spec, root / "ray", "--ray", ray_head)
    assert code == 0, output
    assert "8 cells: 8 run, 0 done before, 0 failed" in output
    local = root / "local"
    sweep = load_spec(spec)
    summary = run_sweep(sweep, plan_cells(sweep, local), local, 1, dispatch=_one_by_one)
    assert summary.failed == 0
    return spec, root / "ray", local


def _one_by_one(cells: list[Cell], out_dir: Path) -> Iterator[CellOutcome]:
    return (run_cell(cell, out_dir) for cell in cells)


@needs_ray
def test_ray_cells_equal_the_local_pools(swept: tuple[Path, Path, Path]) -> None:
    _, on_ray, local = swept
    rows = _rows(on_ray)
    assert len(rows) == 8 and {row["status"] for row in rows} == {"done"}
    assert _without_timing(rows) == _without_timing(_rows(local))
    # The driver wrote every document and the generated traces, as the local pool does.
    assert sorted(p.name for p in (on_ray / "cells").iterdir()) == sorted(
        p.name for p in (local / "cells").iterdir()
    )
    for path in (local / "traces").iterdir():
        assert (on_ray / "traces" / path.name).read_text() == path.read_text()
    for row in rows:
        ray_document = json.loads((on_ray / "cells" / f"{row['cell']}.json").read_text())
        local_document = json.loads((local / "cells" / f"{row['cell']}.json").read_text())
        assert ray_document["jobs"] == local_document["jobs"]
        # The document names the trace where the driver keeps it, not a worker's copy.
        assert Path(ray_document["trace"]).parent == on_ray / "traces"


@needs_ray
def test_rerun_on_ray_runs_only_the_missing_cells(
    swept: tuple[Path, Path, Path], ray_head: str, tmp_path: Path
) -> None:
    spec, on_ray, _ = swept
    out = tmp_path / "out"
    shutil.copytree(on_ray, out)
    documents = sorted((out / "cells").glob("*.json"))
    for path in documents[:3]:
        path.unlink()  # as if the sweep had been stopped before these
    documents[3].write_text('{"metrics": {"avg')  # cut off mid-write
    kept = {p: p.stat().st_mtime_ns for p in documents[4:]}
    code, output = _sweep(spec, out, "--ray", ray_head)
    assert code == 0, output
    assert "8 cells: 4 run, 4 done before, 0 failed" in output
    assert {p: p.stat().st_mtime_ns for p in documents[4:]} == kept
    assert _without_timing(_rows(out)) == _without_timing(_rows(on_ray))


@needs_ray
def test_a_failing_cell_is_recorded_while_the_others_finish(
    ray_head: str, tmp_path: Path
) -> None:
    spec = _write(tmp_path / "spec.toml", f"""
[base]
cluster = "2:2:2"
trace = "{SMALL_TRACE}"
[grid]
policy = ["fifo_perf", "no_such_policy", "max_min_fairness_perf"]
""")
    out = tmp_path / "out"
    # The CLI refuses such a sweep before it runs (tests/test_sweep.py); the runner itself,
    # on Ray too, records a cell that fails and finishes the others.
    loaded = load_spec(spec)
    target = RayTarget.parse(ray_head)
    summary = run_sweep(loaded, plan_cells(loaded, out), out, 2,
                        dispatch=lambda cells, out_dir: run_on_ray(cells, out_dir, target, 2))
    assert (summary.ran, summary.skipped, summary.failed) == (3, 0, 1)
    rows = {row["policy"]: row for row in _rows(out)}
    assert rows["no_such_policy"]["status"] == "failed"
    assert "unknown policy 'no_such_policy'" in rows["no_such_policy"]["error"]
    assert rows["no_such_policy"]["avg_jct_s"] == ""
    for policy in ("fifo_perf", "max_min_fairness_perf"):
        assert rows[policy]["status"] == "done"
        plain = run(RunOptions(policy=policy, cluster="2:2:2", trace=str(SMALL_TRACE)))
        assert float(rows[policy]["avg_jct_s"]) == plain.metrics.avg_jct_s
    assert len(list((out / "cells").glob("*.json"))) == 2


def _dies_in(keys_always: frozenset[str], key_once: str, marker: Path):  # type: ignore[no-untyped-def]
    """A cell task whose worker process dies: always for some cells, on the first try for one."""

    def task(job: CellJob, *contents: bytes):  # type: ignore[no-untyped-def]
        if job.cell.key in keys_always:
            os._exit(1)
        if job.cell.key == key_once and not marker.exists():
            marker.touch()
            os._exit(1)
        return run_cell_job(job, *contents)

    return task


@needs_ray
def test_a_worker_dying_mid_cell_is_retried_then_recorded(
    ray_head: str, tmp_path: Path
) -> None:
    spec = load_spec(_write(tmp_path / "spec.toml", f"""
[base]
cluster = "2:2:2"
trace = "{SMALL_TRACE}"
[grid]
policy = ["fifo_perf", "max_min_fairness_perf", "fifo"]
"""))
    out = tmp_path / "out"
    cells = plan_cells(spec, out)
    always, once, healthy = cells
    task = _dies_in(frozenset({always.key}), once.key, tmp_path / "died-once")
    dispatch = functools.partial(
        run_on_ray, target=RayTarget.parse(ray_head), task=task, max_retries=1
    )
    summary = run_sweep(spec, cells, out, 2, dispatch=dispatch)
    outcomes = {outcome.key: outcome for outcome in summary.outcomes}
    assert outcomes[always.key].status == FAILED
    assert "the Ray worker running this cell died (2 attempts)" in outcomes[always.key].error
    assert (tmp_path / "died-once").exists()  # the second cell's first worker did die
    assert outcomes[once.key].status == DONE
    assert outcomes[healthy.key].status == DONE
    assert {p.stem for p in (out / "cells").glob("*.json")} == {once.key, healthy.key}


@needs_ray
def test_ctrl_c_keeps_the_done_cells_and_a_rerun_resumes(
    ray_head: str, tmp_path: Path
) -> None:
    spec = _write(tmp_path / "spec.toml", GRID_SPEC)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "shock", "sweep", str(spec), "--out", str(out), "--quiet",
         "--ray", ray_head],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    # Interrupt once the first cell is on disk (waiting for that state, not for time).
    cells = out / "cells"
    while sweep.poll() is None and not (cells.is_dir() and any(cells.glob("*.json"))):
        with contextlib.suppress(subprocess.TimeoutExpired):
            sweep.wait(timeout=0.05)
    sweep.send_signal(signal.SIGINT)
    _, stderr = sweep.communicate(timeout=120)
    assert "Traceback" not in stderr
    done = sorted(p.stem for p in cells.glob("*.json"))
    assert done  # the first cell was written before the interrupt
    for key in done:  # every document on disk is whole
        assert "metrics" in json.loads((cells / f"{key}.json").read_text())
    code, output = _sweep(spec, out, "--ray", ray_head)
    assert code == 0, output
    assert f"8 cells: {8 - len(done)} run, {len(done)} done before, 0 failed" in output


@needs_ray
def test_local_starts_a_ray_instance_of_its_own(tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.toml", f"""
[base]
cluster = "2:2:2"
trace = "{SMALL_TRACE}"
[grid]
policy = ["fifo_perf", "max_min_fairness_perf"]
""")
    result = run_shock("sweep", str(spec), "--out", "out", "--ray", "local", "--parallel", "2",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2 cells: 2 run, 0 done before, 0 failed" in result.stdout
    assert {row["status"] for row in _rows(tmp_path / "out")} == {"done"}


def test_without_ray_the_error_names_the_extra(tmp_path: Path) -> None:
    # A `ray` package that fails to import stands for an environment without the extra.
    fake = tmp_path / "no-ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    spec = _write(tmp_path / "spec.toml", "[grid]\nseed = [0]\n")
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    result = subprocess.run(
        [sys.executable, "-m", "shock", "sweep", str(spec), "--out", "out", "--ray", "local"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--ray needs Ray, an optional extra: pip install 'shock[ray]'" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("address", "reason"),
    [("somewhere", "is not local, auto nor HOST:PORT"), ("127.0.0.1:99999", "HOST:PORT")],
)
def test_a_bad_ray_address_is_named(tmp_path: Path, address: str, reason: str) -> None:
    spec = _write(tmp_path / "spec.toml", "[grid]\nseed = [0]\n")
    result = run_shock("sweep", str(spec), "--out", "out", "--ray", address, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert reason in result.stderr


@needs_ray
def test_an_address_where_no_ray_listens_is_named(tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.toml", "[grid]\nseed = [0]\n")
    address = f"127.0.0.1:{_free_port()}"
    result = run_shock("sweep", str(spec), "--out", "out", "--ray", address, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"--ray {address}: no Ray head answers there" in result.stderr


def test_a_worker_on_another_machine_runs_on_shipped_copies(tmp_path: Path) -> None:
    """Input files the worker cannot see at the driver's path arrive by content; the
    document and errors still name the driver's path."""
    elsewhere = tmp_path / "driver-only" / "jobs.trace"  # a path this "worker" lacks
    content = SMALL_TRACE.read_bytes()
    options: dict[str, object] = {"cluster": "2:2:2", "trace": str(elsewhere)}
    options["policy"] = "fifo_perf"
    cell = Cell(key="k", spec=CellSpec(run=options, generate=None), generated_trace=None)
    shipped = ShippedFile("trace", str(elsewhere), file_digest(content))
    report = run_cell_job(CellJob(cell, (shipped,), __version__, False), content)
    assert report.outcome.status == DONE, report.outcome.error
    assert report.outcome.document is not None
    assert report.outcome.document["trace"] == str(elsewhere)
    plain = run(RunOptions(policy="fifo_perf", cluster="2:2:2", trace=str(SMALL_TRACE)))
    assert report.outcome.document["metrics"]["avg_jct_s"] == plain.metrics.avg_jct_s  # type: ignore[index]

    broken = b"not a trace\n"
    shipped = ShippedFile("trace", str(elsewhere), file_digest(broken))
    report = run_cell_job(CellJob(cell, (shipped,), __version__, False), broken)
    assert report.outcome.status == FAILED
    assert str(elsewhere) in report.outcome.error and "shock-cell-" not in report.outcome.error


def test_a_worker_with_another_shock_version_refuses_the_cell(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path / "spec.toml", "[grid]\npolicy = ['fifo_perf']\n"))
    cell = make_cell(spec.cells()[0], spec.path, tmp_path / "out")
    report = run_cell_job(CellJob(cell, (), "0.0.0-other", False))
    assert report.outcome.status == FAILED
    assert "the sweep's driver 0.0.0-other" in report.outcome.error
