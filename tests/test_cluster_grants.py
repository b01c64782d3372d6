"""CPU and memory grants bound job processes: the Launch fields from a placement's grant, the
agent's choice of CPUs, and real job processes started by a worker agent (cold and warm)
under the threads, CPU affinity and RLIMIT_DATA their grant gives them."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import resource
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cluster_procs import HERE, SHOCK, processes

from shock.cluster.auth import TokenInterceptor
from shock.cluster.bounds import (
    GIB,
    UNBOUNDED,
    BoundsKeeper,
    JobBounds,
    pick_cpus,
)
from shock.cluster.grpc_wire import launch_from_pb
from shock.cluster.jobproc import JobProcess, event_from_message
from shock.cluster.launch import launch_grant
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.runtime.messages import JobEvent, JobLimits, Started
from shock.core.executor import PlannedUnit
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.resource_placement import GrantPart, ResourceGrant
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.engine.cluster_file import cluster_from_option
from shock.engine.mechanism import Mechanism
from shock.engine.units import Assignment
from shock.plugins.placement.synergy import TunePlacement

TOKEN = "grants-token"
WAIT_S = 120.0  # a safety net against hanging, never a timing assumption
HEADROOM_GB = 2.0
linux_only = pytest.mark.skipif(
    not (hasattr(os, "sched_setaffinity") and hasattr(resource, "prlimit")),
    reason="CPU affinity and prlimit are Linux-only",
)


# -- the Launch fields from a placement's grant ------------------------------------------


def _planned(assignment: Assignment) -> PlannedUnit:
    members = assignment.unit.members
    return PlannedUnit(
        assignment.unit.member_ids, tuple(m.spec.job_type for m in members),
        assignment.worker_type, assignment.gpus, assignment.rates,
        tuple(m.remaining for m in members), 0.0, assignment.kept_gpus, assignment.grant,
    )  # fmt: skip


def _planned_round() -> dict[int, PlannedUnit]:
    """One round of two jobs on 2 servers x 4 V100s (Synergy's fair share per GPU: 3 CPUs,
    62.5 GB), placed by Synergy's tune."""
    mechanism = Mechanism(
        cluster_from_option("v100=8", gpus_per_server=4),
        default_registry().get("policy", "fifo"),
        SolverSpec(),
        TunePlacement(),
        default_throughputs(),
        MechanismConfig(round_length_s=300.0),
    )
    mechanism.admit(JobSpec(0, "ResNet-18 (batch size 32)", 1000))
    mechanism.admit(JobSpec(1, "LM (batch size 20)", 1000, scale_factor=2))
    return {a.job.job_id: _planned(a) for a in mechanism.plan_round(0.0)}


def test_a_launch_carries_the_grant_of_its_placement() -> None:
    for assignment in _planned_round().values():
        grant = assignment.grant
        assert grant is not None and len(grant.parts) == 1
        assert launch_grant(assignment) == {"cpus": grant.cpus, "memory_gb": grant.memory_gb}
        assert grant.cpus > 0 and grant.memory_gb > 0
    assert launch_grant(None) == {}
    assert launch_grant(_planned_round()[0]._replace(grant=None)) == {}


def test_a_launch_gets_its_workers_part_and_packed_jobs_share_it() -> None:
    resnet = _planned_round()[0]
    two_servers = ResourceGrant(
        (GrantPart(0, (0, 1), 6.0, 100.0), GrantPart(1, (8, 9), 4.0, 50.0)), speed=1.0
    )
    spread = resnet._replace(gpus=(0, 1, 8, 9), grant=two_servers)
    assert launch_grant(spread) == {"cpus": 6.0, "memory_gb": 100.0}  # the first GPU's server
    pair = spread._replace(job_ids=(0, 1))
    assert launch_grant(pair) == {"cpus": 3.0, "memory_gb": 50.0}
    # A gang's rank holds one GPU: that GPU's share of the part on its own server.
    assert launch_grant(spread, gpu=1) == {"cpus": 3.0, "memory_gb": 50.0}
    assert launch_grant(spread, gpu=9) == {"cpus": 2.0, "memory_gb": 25.0}
    assert launch_grant(pair, gpu=8) == {"cpus": 1.0, "memory_gb": 12.5}


# -- the agent's choice of bounds --------------------------------------------------------


def test_concurrent_jobs_get_distinct_cpus_while_there_are_enough() -> None:
    assert pick_cpus(2, [0, 1, 2, 3], held=[]) == (0, 1)
    assert pick_cpus(2, [0, 1, 2, 3], held=[(0, 1)]) == (2, 3)
    assert pick_cpus(1, [0, 1, 2, 3], held=[(0, 1), (2,)]) == (3,)
    # Not enough free CPUs: the least shared ones.
    assert pick_cpus(2, [0, 1, 2], held=[(0, 1), (0,), (2,)]) == (1, 2)
    assert pick_cpus(5, [4, 6], held=[]) == (4, 6)


def test_a_grant_becomes_threads_cpus_and_a_data_limit() -> None:
    keeper = BoundsKeeper(memory_headroom_gb=HEADROOM_GB, available_cpus=(0, 1, 2, 3))
    bounds = keeper.bounds_for(2.7, 3.0, held=[(0,)])
    assert bounds.threads == 2
    assert bounds.cpus == (1, 2)
    if hasattr(resource, "prlimit"):
        assert bounds.memory_bytes == int((3.0 + HEADROOM_GB) * GIB)
    assert keeper.bounds_for(0.4, 0.0).threads == 1  # a fraction of a CPU is still a thread
    assert keeper.bounds_for(0.4, 0.0).memory_bytes is None
    assert keeper.bounds_for(0.0, 0.0) == UNBOUNDED and not UNBOUNDED.bounded


# -- real processes ----------------------------------------------------------------------


class FakeScheduler(pb_grpc.SchedulerServicer):
    """The scheduler's side of the protocol, scripted by the test: commands go out on the next
    heartbeat, events are collected."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._commands: list[pb.Command] = []
        self._shutdown = False
        self.events: list[pb.JobEvent] = []

    def Register(self, request: pb.RegisterRequest, context: object) -> pb.RegisterReply:
        return pb.RegisterReply(worker_id="worker-1", heartbeat_s=0.2)

    def Heartbeat(self, request: pb.HeartbeatRequest, context: object) -> pb.HeartbeatReply:
        with self._changed:
            self._changed.wait_for(lambda: self._commands or self._shutdown, request.wait_s)
            commands, self._commands = self._commands, []
            return pb.HeartbeatReply(commands=commands, shutdown=self._shutdown)

    def ReportEvents(
        self, request: pb.ReportEventsRequest, context: object
    ) -> pb.ReportEventsReply:
        with self._changed:
            seen = {event.seq for event in self.events}
            self.events += [event for event in request.events if event.seq not in seen]
            self._changed.notify_all()
            return pb.ReportEventsReply(acked_seq=max(event.seq for event in request.events))

    def RenewLease(self, request: pb.RenewLeaseRequest, context: object) -> pb.RenewLeaseReply:
        return pb.RenewLeaseReply(granted=True, seconds=600.0)

    def launch(self, *launches: pb.Launch) -> None:
        with self._changed:
            self._commands += [pb.Command(launch=launch) for launch in launches]
            self._changed.notify_all()

    def shut_down(self) -> None:
        with self._changed:
            self._shutdown = True
            self._changed.notify_all()

    def wait_for(self, what: str, done: Callable[[list[pb.JobEvent]], bool]) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: done(self.events), WAIT_S):
                raise AssertionError(f"no {what} within {WAIT_S} s: {self.events}")


@pytest.fixture
def scheduler() -> Iterator[tuple[FakeScheduler, str]]:
    fake = FakeScheduler()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8), interceptors=[TokenInterceptor(TOKEN)]
    )
    pb_grpc.add_SchedulerServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield fake, f"127.0.0.1:{port}"
    finally:
        server.stop(grace=0).wait(timeout=5)


def _launch(run_id: int, gpu: int, directory: Path, **grant: float) -> pb.Launch:
    return pb.Launch(
        run_id=run_id, job_id=run_id, job_type="LM (batch size 20)", target_steps=10**7,
        checkpoint_dir=str(directory / f"job-{run_id}"), gpus=[gpu], lease_s=600.0,
        adaptation="static", **grant,
    )  # fmt: skip


def _started(events: list[pb.JobEvent]) -> dict[int, pb.Started]:
    return {e.run_id: e.started for e in events if e.WhichOneof("event") == "started"}


def _thread_affinities(pid: int) -> set[tuple[int, ...]]:
    tasks = os.listdir(f"/proc/{pid}/task")
    return {tuple(sorted(os.sched_getaffinity(int(tid)))) for tid in tasks}


def _job_pids(worker_pid: int) -> dict[int, int]:
    """run id -> pid of the worker's job processes, told apart by the log their stderr goes
    to (`job-J-run-R.log`; a warm process points its stderr there at its launch)."""
    pids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            log = os.readlink(f"/proc/{entry}/fd/2")
            match = re.search(r"job-\d+-run-(\d+)\.log$", log)
            if ppid == worker_pid and match:
                pids[int(match.group(1))] = int(entry)
    return pids


@linux_only
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_worker_bounds_a_granted_job_and_leaves_others_unbounded(
    scheduler: tuple[FakeScheduler, str], tmp_path: Path, warm: bool
) -> None:
    """A `shock worker` process (as deployed: the test process only plays the scheduler)
    gets two launches, one with a grant of 2 CPUs and 3 GB, one without."""
    pytest.importorskip("torch", reason="job processes need PyTorch (pip install .[cluster])")
    fake, address = scheduler
    with processes(tmp_path / "procs") as group:
        worker = group.start("worker", [
            *SHOCK, "worker", "--scheduler", address, "--gpus", "2", "--simulated",
            "--log-dir", str(tmp_path / "logs"), "--heartbeat", "0.2",
            "--memory-headroom", str(HEADROOM_GB), "--warm" if warm else "--no-warm",
        ], env={"SHOCK_TOKEN": TOKEN})  # fmt: skip
        fake.launch(
            _launch(1, 0, tmp_path, cpus=2.0, memory_gb=3.0),
            _launch(2, 1, tmp_path),  # no grant
        )
        fake.wait_for("two started jobs", lambda events: len(_started(events)) == 2)
        started = _started(fake.events)
        pids = _job_pids(worker.pid)
        assert sorted(pids) == [1, 2], group.log("worker")
        own_cpus = tuple(sorted(os.sched_getaffinity(0)))  # the worker's, inherited from here
        own_hard = resource.getrlimit(resource.RLIMIT_DATA)[1]

        granted, pid = started[1].limits, pids[1]
        assert granted.threads == 2  # torch.get_num_threads() in the job
        cpus = tuple(granted.cpus)
        assert len(cpus) == min(2, len(own_cpus)) and set(cpus) <= set(own_cpus)
        assert _thread_affinities(pid) == {cpus}  # every thread of the process
        expected = int((3.0 + HEADROOM_GB) * GIB)
        if own_hard != resource.RLIM_INFINITY:
            expected = min(expected, own_hard)
        assert granted.memory_limit_bytes == expected
        assert resource.prlimit(pid, resource.RLIMIT_DATA) == (expected, expected)
        if not warm:  # a warm process's environment was fixed before its launch
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert b"OMP_NUM_THREADS=2" in environment and b"MKL_NUM_THREADS=2" in environment

        free, pid = started[2].limits, pids[2]
        assert free.threads == 1  # the agent's default for jobs without a grant
        assert tuple(free.cpus) == own_cpus and _thread_affinities(pid) == {own_cpus}
        assert free.memory_limit_bytes == 0  # unlimited
        assert resource.prlimit(pid, resource.RLIMIT_DATA) == resource.getrlimit(
            resource.RLIMIT_DATA
        )

        fake.shut_down()
        assert worker.wait(timeout=WAIT_S) == 0
    exits = [e.exit.reason for e in fake.events if e.WhichOneof("event") == "exit"]
    assert sorted(exits) == ["preempted", "preempted"]


@linux_only
def test_a_bound_that_cannot_be_applied_warns_once_and_the_job_still_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A CPU the machine does not have: the kernel refuses the affinity.
    keeper = BoundsKeeper(memory_headroom_gb=HEADROOM_GB, available_cpus=(4095,))
    started = threading.Semaphore(0)

    def on_event(job: JobProcess, event: JobEvent) -> None:
        if isinstance(event.payload, Started):
            started.release()

    jobs = []
    with caplog.at_level(logging.WARNING, logger="shock.cluster.bounds"):
        for run_id in (1, 2):
            bounds = keeper.bounds_for(1.0, 0.0)
            assert bounds == JobBounds(threads=1, cpus=(4095,))
            job = JobProcess(
                launch_from_pb(_launch(run_id, 0, tmp_path, cpus=1.0)),
                [sys.executable, str(HERE / "fake_job.py"), "--seconds-per-step", "0.01"],
                "cpu", tmp_path / f"job-{run_id}.log", on_event=on_event,
                on_lease_request=lambda job, step: None, bounds=bounds,
            )  # fmt: skip
            jobs.append(job)
            keeper.check(job.process.pid, bounds)
        try:
            for _ in jobs:
                assert started.acquire(timeout=WAIT_S), "a job did not start"
        finally:
            for job in jobs:
                job.kill(grace_s=5)
    warnings = [r for r in caplog.records if "could not bind a job to CPUs" in r.getMessage()]
    assert len(warnings) == 1


def test_reported_limits_reach_the_started_event_and_malformed_ones_are_dropped() -> None:
    line = {"type": "started", "step": 0, "batch_size": 20, "resumed_from_step": 0}
    limits = {"threads": 2, "cpus": [0, 3], "memory_limit_bytes": None}
    event = event_from_message(line | {"limits": limits})
    assert event is not None and isinstance(event.payload, Started)
    assert event.payload.limits == JobLimits(threads=2, cpus=(0, 3), memory_limit_bytes=0)
    for malformed in ({"threads": "2", "cpus": []}, {"threads": 2, "cpus": "0-3"}, [2]):
        event = event_from_message(line | {"limits": malformed})
        assert event is not None and isinstance(event.payload, Started)
        assert event.payload.limits is None
