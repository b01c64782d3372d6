"""`shock run --backend ray`: real training jobs (the gRPC cluster's harness) as Ray actors,
on a local Ray instance and on a two-node local Ray cluster that loses a node mid-run; and
the backend's options, cluster reading and missing-Ray error."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_procs import HERE, SHOCK, query, wait_for, write_trace
from ray_exclusive import ray_to_ourselves

from shock.cluster.ray_nodes import parse_local_gpus, workers_of_nodes
from shock.core.errors import ShockError
from shock.plugins.backends.ray_backend import RayOptions, import_ray

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(
    not HAS_RAY, reason="ray is not installed (pip install 'shock[ray]')"
)
# The Ray driver needs only the ray extra; the training jobs its actors run need PyTorch
# (tox -e ray-driver runs this module without it: those tests skip there).
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the training jobs need PyTorch on the workers (pip install 'shock[cluster]')",
)

# Three job families, five jobs on four GPUs: jobs take turns (preempted and resumed), and
# each finishes in a few 20 s rounds.
THREE_FAMILIES = [
    ("ResNet-18 (batch size 32)", 200),
    ("LM (batch size 32)", 300),
    ("Recommendation (batch size 32)", 400),
    ("ResNet-18 (batch size 32)", 200),
    ("LM (batch size 32)", 300),
]


@pytest.fixture(scope="module", autouse=True)
def _only_ray_module_running() -> Iterator[None]:
    with ray_to_ourselves():
        yield


def runs_by_job(state_dir: Path) -> dict[int, list[tuple[object, ...]]]:
    """(run_id, worker_id, resumed_from_step, last_step, end_reason) of each job's runs."""
    runs: dict[int, list[tuple[object, ...]]] = {}
    for job_id, *row in query(
        state_dir,
        "SELECT job_id, run_id, worker_id, resumed_from_step, last_step, end_reason "
        "FROM runs ORDER BY run_id",
    ):
        runs.setdefault(int(str(job_id)), []).append(tuple(row))
    return runs


def assert_every_job_done_once(state_dir: Path, jobs: list[tuple[str, int]]) -> None:
    done = query(state_dir, "SELECT job_id, step, completed_at FROM jobs ORDER BY job_id")
    assert [(job_id, step) for job_id, step, _ in done] == [
        (i, steps) for i, (_, steps) in enumerate(jobs)
    ]
    for job_id, job_runs in runs_by_job(state_dir).items():
        finished = [run for run in job_runs if run[4] == "done"]
        assert len(finished) == 1, (job_id, job_runs)
        assert finished[0][3] == jobs[job_id][1]  # the job itself reported its target step
        assert job_runs[-1] is finished[0], "launched again after it completed"


def shock_run(args: list[str], timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SHOCK, "run", "--backend", "ray", *args],
        capture_output=True, text=True, timeout=timeout_s, start_new_session=True,
    )  # fmt: skip


@pytest.mark.slow
@needs_ray
@needs_torch
def test_three_job_families_complete_on_a_local_ray_instance(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "three.trace", THREE_FAMILIES)
    state_dir, json_path = tmp_path / "state", tmp_path / "result.json"
    completed = shock_run(
        ["--ray-address", "local", "--local-gpus", "v100=2,k80=2", "--trace", str(trace),
         "--round-length", "20", "--state-dir", str(state_dir), "--checkpoint-every", "2",
         "--json", str(json_path)],
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "max_min_fairness_perf · ray" in completed.stdout
    document = json.loads(json_path.read_text())
    assert document["backend"] == "ray"
    assert document["unfinished_jobs"] == 0
    assert [job["id"] for job in document["jobs"]] == list(range(len(THREE_FAMILIES)))
    assert all(job["jct_s"] > 0 for job in document["jobs"])
    assert document["metrics"]["rounds"] >= 2
    assert_every_job_done_once(state_dir, THREE_FAMILIES)
    # The cluster is the instance's resources: one server per declared worker type.
    workers = query(state_dir, "SELECT gpu_type, gpus, dead_at FROM workers ORDER BY gpu_type")
    assert workers == [("k80", 2, None), ("v100", 2, None)]
    runs = runs_by_job(state_dir)
    for job_id, job_runs in runs.items():
        # A run whose turn ended before its actor started (a slow machine) never reported a
        # step: it was stopped ("preempted", or "killed") and the next run resumes as if it
        # had not been.
        unstarted = [run for run in job_runs if run[2] is None]
        assert all(run[4] in ("preempted", "killed") for run in unstarted), job_runs
        started = [run for run in job_runs if run[2] is not None]
        runs[job_id] = started
        for before, after in itertools.pairwise(started):
            # Preempted (or, not yet training when its turn ended, cancelled: "killed").
            assert before[4] in ("preempted", "killed"), job_runs
            assert after[2] == before[3]  # resumed exactly where the previous run stopped
    # Whether a job's turn ends before it finishes depends on the machine's speed, so the
    # run need not preempt anyone; every preemption that happened was checked above.
    # Throughputs measured on the worker types the jobs ran on, written for the next run.
    rows = query(state_dir, "SELECT job_type, worker_type FROM throughputs WHERE steps_per_s > 0")
    measured = {(str(job_type), str(worker_type)) for job_type, worker_type in rows}
    ran_on = {
        (THREE_FAMILIES[job_id][0], str(run[1]).split("@")[0])
        for job_id, job_runs in runs.items()
        for run in job_runs
        if int(str(run[3])) > int(str(run[2]))
    }
    assert measured <= ran_on
    assert {job_type for job_type, _ in measured} == {t for t, _ in THREE_FAMILIES}
    table = json.loads((state_dir / "measured_throughputs.json").read_text())
    assert table
    # No job process outlives the run (their command lines name the state directory).
    leftover = subprocess.run(["pgrep", "-f", str(state_dir)], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""


# Two jobs on two nodes of two GPUs each: after a node dies, both still fit on the other, so
# the run's end does not depend on how fast jobs restart on a loaded machine.
# Long enough that a job is still running for several checkpoints (2 s apart) after its first
# one, however fast the machine: the test must see one running and checkpointed to kill it.
NODE_LOSS_JOBS = [
    ("LM (batch size 32)", 2000),
    ("Recommendation (batch size 32)", 4000),
]


@pytest.mark.slow
@needs_ray
@needs_torch
def test_a_dead_node_s_jobs_resume_from_their_checkpoints_elsewhere(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    trace = write_trace(tmp_path / "two.trace", NODE_LOSS_JOBS)
    state_dir, json_path = tmp_path / "state", tmp_path / "result.json"
    # A head node without GPUs (it cannot be killed without ending the cluster) and two
    # nodes with GPUs of a type each.
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1, "include_dashboard": False,
            # A dead node is noticed within seconds, not Ray's default 15 s or more.
            "_system_config": {"health_check_period_ms": 500,
                               "health_check_failure_threshold": 4},
        },
    )  # fmt: skip
    process = None
    log_path = tmp_path / "run.log"
    try:
        nodes = [
            cluster.add_node(num_cpus=1, resources={"v100": 2}),
            cluster.add_node(num_cpus=1, resources={"k80": 2}),
        ]
        by_id = {node.node_id[:8]: node for node in nodes}
        cluster.wait_for_nodes()
        process = subprocess.Popen(
            [*SHOCK, "run", "--backend", "ray", "--ray-address", cluster.address,
             "--trace", str(trace), "--round-length", "20", "--state-dir", str(state_dir),
             "--checkpoint-every", "2", "--json", str(json_path), "--quiet"],
            stdout=log_path.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        victim_query = (
            "SELECT worker_id, job_id FROM runs JOIN jobs USING (job_id) "
            "WHERE runs.ended_at IS NULL AND last_step > 0 AND checkpoint_step > 0"
        )
        wait_for(lambda: bool(query(state_dir, victim_query)), 150, "a job's checkpoint")
        victim_worker, victim_job = query(state_dir, victim_query)[0]
        victim = str(victim_worker)
        cluster.remove_node(by_id[victim.split("@")[1]], allow_graceful=False)
        assert process.wait(timeout=200) == 0, log_path.read_text(errors="replace")
    finally:
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        cluster.shutdown()
    document = json.loads(json_path.read_text())
    assert document["unfinished_jobs"] == 0
    assert_every_job_done_once(state_dir, NODE_LOSS_JOBS)
    dead = query(state_dir, "SELECT worker_id FROM workers WHERE dead_at IS NOT NULL")
    assert dead == [(victim,)]
    runs = runs_by_job(state_dir)
    # Which of the victim node's jobs are still there when it dies depends on timing (a round
    # may end, preempting one, between the look and the kill), so check what always holds.
    lost = [run for job_runs in runs.values() for run in job_runs if run[4] == "lost"]
    assert lost and all(run[1] == victim for run in lost), runs
    for job_id, job_runs in runs.items():
        for run in job_runs[1:]:
            # A run resumes from a checkpoint an earlier run wrote. A run killed with its node
            # may have checkpointed past the last step it reported, so the journal's steps are
            # no upper bound here; the job's exact total (checked above) is what must hold.
            assert run[2] is None or int(str(run[2])) >= 0, (job_id, job_runs)
        assert job_runs[-1][4] == "done", (job_id, job_runs)
        if any(run[4] == "lost" for run in job_runs):  # finished on the node left
            assert job_runs[-1][1] != victim, (job_id, job_runs)
    # The job the test saw checkpointed on the victim resumed from a checkpoint, not step 0.
    victim_runs = runs[int(str(victim_job))]
    assert any(run[2] is not None and int(str(run[2])) > 0 for run in victim_runs[1:]), runs


# Two jobs on one GPU, short enough to take turns in 5 s rounds; the stand-in job speaks the
# job contract without PyTorch.
DRIVER_JOBS = [("LM (batch size 32)", 150), ("ResNet-18 (batch size 32)", 100)]


@pytest.mark.slow
@needs_ray
def test_the_driver_schedules_without_grpc_protobuf_or_torch(tmp_path: Path) -> None:
    """`shock run --backend ray` with grpc, torch and shock's protobuf stubs refused to the
    driver process before shock is imported (tests/blocked_driver.py), protobuf to shock's
    own modules: the run completes, and nothing of them was asked for or is held."""
    trace = write_trace(tmp_path / "two.trace", DRIVER_JOBS)
    state_dir, json_path, report = tmp_path / "state", tmp_path / "r.json", tmp_path / "b.json"
    completed = subprocess.run(
        [sys.executable, str(HERE / "blocked_driver.py"), str(report), "run",
         "--backend", "ray", "--ray-address", "local", "--local-gpus", "v100=1",
         "--trace", str(trace), "--round-length", "5", "--state-dir", str(state_dir),
         "--checkpoint-every", "1", "--job-command", f"{sys.executable} {HERE / 'fake_job.py'}",
         "--json", str(json_path), "--quiet"],
        capture_output=True, text=True, timeout=240, start_new_session=True,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    blocked = json.loads(report.read_text())
    assert blocked == {"refused": [], "loaded": [], "held": []}
    document = json.loads(json_path.read_text())
    assert document["backend"] == "ray" and document["unfinished_jobs"] == 0
    assert_every_job_done_once(state_dir, DRIVER_JOBS)


def test_the_blocker_refuses_what_it_names(tmp_path: Path) -> None:
    """The driver's blocker is not vacuous: an import of shock's protobuf stubs fails."""
    report = tmp_path / "b.json"
    code = (
        f"import sys; sys.argv = ['blocked_driver', {str(report)!r}, 'plugins']; "
        f"sys.path.insert(0, {str(HERE)!r}); import blocked_driver, runpy; "
        "runpy.run_module = lambda *a, **k: __import__('shock.cluster.service'); "
        "blocked_driver.main()"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode != 0
    refused = json.loads(report.read_text())["refused"]
    assert refused and refused[0]["module"] in ("grpc", "shock.cluster.proto")


def test_local_gpus_parse_and_refuse_bad_input() -> None:
    assert parse_local_gpus("v100=2, k80=1") == {"v100": 2, "k80": 1}
    for text, message in [
        ("v100", "TYPE=COUNT"),
        ("v100=two", "integer"),
        ("v100=0", ">= 1"),
        ("v100=1,v100=2", "twice"),
        ("CPU=2", "Ray's own"),
        ("", "at least one"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_local_gpus(text)
    with pytest.raises(ValueError, match="only to --ray-address local"):
        RayOptions(ray_address="10.0.0.1:6379", local_gpus="v100=2")
    with pytest.raises(ValueError, match="cannot be a worker type"):
        RayOptions(gpu_types="v100,memory")


def test_worker_types_are_a_node_s_custom_resources() -> None:
    nodes = [
        {"NodeID": "aaaaaaaa11", "Alive": True, "Resources": {
            "CPU": 8.0, "memory": 16 * 2**30, "object_store_memory": 1e9, "node:10.0.0.1": 1.0,
            "v100": 2.0, "k80": 2.0, "GPU": 4.0,
            "v100_group_0123456789abcdef0123": 1.0, "bundle_group_0123456789abcdef0123": 1e3,
        }},
        {"NodeID": "bbbbbbbb22", "Alive": False, "Resources": {"v100": 4.0}},
        {"NodeID": "cccccccc33", "Alive": True, "Resources": {"CPU": 2.0, "p100": 0.5}},
    ]  # fmt: skip
    workers = workers_of_nodes(nodes)
    assert [(w.worker_id, w.gpu_type, w.gpus, w.cuda) for w in workers] == [
        ("k80@aaaaaaaa", "k80", 2, True),
        ("v100@aaaaaaaa", "v100", 2, True),
    ]
    assert [w.cpus for w in workers] == [4.0, 4.0]  # the node's CPUs, shared by GPU count
    assert [w.gpu_type for w in workers_of_nodes(nodes, frozenset({"v100"}))] == ["v100"]


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    with pytest.raises(ShockError, match=r"pip install 'shock\[ray\]'"):
        import_ray()
    trace = write_trace(tmp_path / "one.trace", THREE_FAMILIES[:1])
    code = (
        "import sys, runpy; sys.modules['ray'] = None; "
        f"sys.argv = ['shock', 'run', '--backend', 'ray', '--trace', {str(trace)!r}]; "
        "runpy.run_module('shock', run_name='__main__')"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0
    assert "pip install 'shock[ray]'" in output
    assert "Traceback" not in output
