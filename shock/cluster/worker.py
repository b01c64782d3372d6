"""The worker agent (`shock worker`): runs the scheduler's jobs on its GPUs.

It registers, then long-polls the scheduler with heartbeats whose replies carry commands.
Job events go to an outbox that a sender thread flushes with `ReportEvents`; an event stays
there until the scheduler acknowledges its sequence number, so nothing is lost while the
scheduler restarts. Job processes are launched from the main thread (their parent-death
signal is tied to the thread that forks them).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from shock.cluster import grpc_wire as wire
from shock.cluster.auth import TlsFiles, open_channel, token_metadata
from shock.cluster.bounds import DEFAULT_MEMORY_HEADROOM_GB, BoundsKeeper
from shock.cluster.command_launch import CommandStartError
from shock.cluster.defaults import DEFAULT_JOB_COMMAND
from shock.cluster.jobproc import JobProcess
from shock.cluster.oplog import log_event
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.runtime.messages import (
    Command,
    Exit,
    ExtendLease,
    FetchLog,
    JobEvent,
    Launch,
    Preempt,
    SetBatchSize,
)
from shock.cluster.warm import WarmPool
from shock.core.errors import ShockError

_RPC_TIMEOUT_S = 10.0


class AuthenticationError(ShockError):
    """The scheduler refused this worker's token."""


class WorkerRefused(ShockError):
    """The scheduler refused to register this worker: retrying cannot help, so the agent
    exits at once (non-zero, so that a service manager does not restart it in a loop)."""


# Registration answers that say the worker itself is wrong (not that the scheduler is away).
_REFUSALS = (
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
)


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    scheduler: str  # host:port
    token: str
    gpus: int = 1
    gpu_type: str = "v100"
    simulated: bool = False  # run on the CPU even when CUDA devices are present
    job_command: tuple[str, ...] = DEFAULT_JOB_COMMAND
    log_dir: Path = field(default_factory=lambda: Path("shock-worker-logs"))
    tls: TlsFiles | None = None
    heartbeat_s: float = 1.0
    # Give up (stop jobs, exit) when the scheduler has been unreachable this long.
    scheduler_timeout_s: float = 120.0
    checkpoint_every_s: float | None = None
    stop_grace_s: float = 10.0
    # Keep a job process per GPU started ahead of its launch (default job command only).
    warm_processes: bool = True
    # A job's memory limit is its grant plus this (GB), for the runtime itself.
    memory_headroom_gb: float = DEFAULT_MEMORY_HEADROOM_GB
    # CPU cores and memory (GB) it offers to jobs; None: what this machine has.
    cpus: float | None = None
    memory_gb: float | None = None
    # Where other workers reach this one's jobs (a gang's rendezvous); None: the hostname.
    rendezvous_host: str | None = None
    # A person's own command that says nothing for this long (no progress report) loses
    # its lease and fails: a job reports through shock.job.
    report_timeout_s: float = 120.0


def machine_cpus() -> float:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return float(len(os.sched_getaffinity(0)))
    return float(os.cpu_count() or 1)


def machine_memory_gb() -> float:
    """This machine's physical memory (0 where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


def detect_devices(gpus: int, simulated: bool) -> list[pb.Device]:
    """Real CUDA devices when present (asked through torch only if a driver exists), else
    `gpus` simulated devices that run on the CPU."""
    if not simulated and (os.path.exists("/proc/driver/nvidia") or shutil.which("nvidia-smi")):
        try:
            import torch

            count = torch.cuda.device_count()
        except ImportError:
            count = 0
        if count >= gpus:
            return [pb.Device(index=i, name=f"cuda:{i}") for i in range(gpus)]
    return [pb.Device(index=i, name="cpu") for i in range(gpus)]


def read_run_log(log_dir: Path, run_id: int, max_bytes: int) -> pb.RunLog:
    """The tail of a run's job log (its process's stderr and stray stdout lines)."""
    found = sorted(log_dir.glob(f"job-*-run-{run_id}.log"))
    if not found:
        return pb.RunLog(run_id=run_id, error=f"no log for run {run_id} in {log_dir}")
    try:
        with found[0].open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - max_bytes))
            data = log.read()
    except OSError as exc:
        return pb.RunLog(run_id=run_id, error=f"cannot read {found[0]}: {exc.strerror}")
    return pb.RunLog(
        run_id=run_id, text=data.decode(errors="replace"), truncated=size > max_bytes
    )


class WorkerAgent:
    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.devices = detect_devices(settings.gpus, settings.simulated)
        self._channel = open_channel(settings.scheduler, settings.tls)
        self._stub = pb_grpc.SchedulerStub(self._channel)
        self._metadata = token_metadata(settings.token)
        self.worker_id = ""
        self._jobs: dict[int, JobProcess] = {}
        self._lock = threading.Lock()
        self._outbox: list[pb.JobEvent] = []
        self._seq = itertools.count(1)
        self._outbox_ready = threading.Condition(self._lock)
        self._stop = threading.Event()
        # Set once every job has stopped: the sender then delivers what is left and ends.
        self._draining = threading.Event()
        self._last_contact = time.monotonic()
        self._heartbeat_s = settings.heartbeat_s
        self._env = dict(os.environ)
        self._env.setdefault("OMP_NUM_THREADS", "1")
        self._bounds_keeper = BoundsKeeper(settings.memory_headroom_gb)
        warm = settings.warm_processes and settings.job_command == DEFAULT_JOB_COMMAND
        self._warm = WarmPool(
            settings.gpus if warm else 0, settings.log_dir / "warm-processes.log", self._env
        )

    # Calls.

    def _call(self, method: str, request: object, timeout: float = _RPC_TIMEOUT_S) -> object:
        try:
            response = getattr(self._stub, method)(
                request, metadata=self._metadata, timeout=timeout
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                log_event("worker-refused", f"refused: {exc.details()}", logging.ERROR,
                          scheduler=self.settings.scheduler, reason=exc.details())  # fmt: skip
                raise AuthenticationError(
                    f"refused: scheduler {self.settings.scheduler} refused this worker's token: "
                    f"{exc.details()}"
                ) from None
            raise
        self._last_contact = time.monotonic()
        return response

    def _live_runs(self) -> list[pb.LiveRun]:
        with self._lock:
            return [
                pb.LiveRun(run_id=j.run_id, job_id=j.job_id, step=j.step)
                for j in self._jobs.values()
                if not j.saw_exit
            ]

    def _flush(self) -> None:
        """Deliver the outbox now (before re-registering, so the scheduler learns how runs
        that ended while it was away ended)."""
        with self._lock:
            batch = list(self._outbox)
        if not batch or not self.worker_id:
            return
        reply = self._call(
            "ReportEvents", pb.ReportEventsRequest(worker_id=self.worker_id, events=batch)
        )
        assert isinstance(reply, pb.ReportEventsReply)
        with self._lock:
            self._outbox = [e for e in self._outbox if e.seq > reply.acked_seq]

    def _register(self) -> None:
        self._flush()
        try:
            reply = self._call_register()
        except grpc.RpcError as exc:
            if exc.code() not in _REFUSALS:
                raise
            log_event("worker-refused", f"refused: {exc.details()}", logging.ERROR,
                      scheduler=self.settings.scheduler, reason=exc.details())  # fmt: skip
            raise WorkerRefused(
                f"refused: scheduler {self.settings.scheduler} does not take this worker: "
                f"{exc.details()}"
            ) from None
        assert isinstance(reply, pb.RegisterReply)
        if reply.worker_id != self.worker_id:
            log_event("worker-registered", f"registered with {self.settings.scheduler} as "
                      f"{reply.worker_id} ({len(self.devices)} {self.settings.gpu_type} GPUs)",
                      worker=reply.worker_id, scheduler=self.settings.scheduler,
                      gpu_type=self.settings.gpu_type, gpus=len(self.devices))  # fmt: skip
        self.worker_id = reply.worker_id
        # The scheduler's period: it declares a worker dead after a few missed ones.
        if reply.heartbeat_s > 0:
            self._heartbeat_s = min(self.settings.heartbeat_s, reply.heartbeat_s)

    def _call_register(self) -> object:
        return self._call(
            "Register",
            pb.RegisterRequest(
                worker_id=self.worker_id,
                hostname=socket.gethostname(),
                gpu_type=self.settings.gpu_type,
                devices=self.devices,
                live_runs=self._live_runs(),
                pid=os.getpid(),
                cpus=self.settings.cpus or machine_cpus(),
                memory_gb=self.settings.memory_gb or machine_memory_gb(),
                rendezvous_host=self.settings.rendezvous_host or "",
            ),
        )

    # Job events.

    def _post(self, job: JobProcess, event: JobEvent) -> None:
        self._post_for(job.run_id, job.job_id, event)

    def _post_for(self, run_id: int, job_id: int, event: JobEvent) -> None:
        """Number the event and put it in the outbox, in its wire form."""
        with self._lock:
            numbered = JobEvent(event.payload, next(self._seq), run_id, job_id, time.time())
            exit = event.payload
            if isinstance(exit, Exit):
                log_event("run-ended", f"run {run_id} of job {job_id} ended "
                          f"({exit.reason}) at step {exit.step}",
                          run=run_id, job=job_id, reason=exit.reason, step=exit.step)  # fmt: skip
            self._outbox.append(wire.event_to_pb(numbered))
            self._outbox_ready.notify_all()

    def _renew_lease(self, job: JobProcess, step: int) -> None:
        try:
            reply = self._call(
                "RenewLease",
                pb.RenewLeaseRequest(worker_id=self.worker_id, run_id=job.run_id, step=step),
                timeout=2.0,
            )
        except (grpc.RpcError, AuthenticationError):
            return  # the job keeps its lease and stops at its end
        assert isinstance(reply, pb.RenewLeaseReply)
        if reply.granted:
            job.send({"type": "lease", "seconds": reply.seconds})

    def _send_events(self) -> None:
        """Sender thread: flush the outbox until stopped (and then once more, bounded)."""
        while True:
            with self._lock:
                if (not self._outbox or not self.worker_id) and not self._draining.is_set():
                    self._outbox_ready.wait(timeout=0.5)
                batch = list(self._outbox)
            if batch and self.worker_id:
                try:
                    self._flush()
                except (grpc.RpcError, AuthenticationError):
                    if self._draining.is_set():
                        return
                    time.sleep(0.5)
            elif self._draining.is_set():
                return

    # Commands.

    def _apply(self, command: Command | None) -> None:
        if command is None:
            return  # a command this agent does not know
        if isinstance(command, Launch):
            self._launch(command)
            return
        if isinstance(command, FetchLog):
            # Read and sent off the main thread: launches must not wait on a large log.
            threading.Thread(
                target=self._upload_log, args=(command,), name="log", daemon=True
            ).start()
            return
        with self._lock:
            job = self._jobs.get(command.run_id)
        if job is None:
            return
        if isinstance(command, ExtendLease):
            job.send({"type": "lease", "seconds": command.seconds})
        elif isinstance(command, Preempt):
            job.preempt()
        elif isinstance(command, SetBatchSize):
            job.send({"type": "batch_size", "batch_size": command.batch_size})

    def _launch(self, launch: Launch) -> None:
        with self._lock:
            if launch.run_id in self._jobs:
                return  # a repeated command
        if not launch.gpus or any(not 0 <= g < len(self.devices) for g in launch.gpus):
            return  # not our GPUs: the scheduler sees no "started" and the lease runs out
        device = self.devices[launch.gpus[0]].name
        if device.startswith("cuda"):
            device = f"cuda:{launch.gpus[0]}"
        with self._lock:
            held = [
                job.bounds.cpus
                for job in self._jobs.values()
                if job.bounds.cpus is not None and not job.saw_exit
            ]
        bounds = self._bounds_keeper.bounds_for(launch.cpus, launch.memory_gb, held)
        log_path = self.settings.log_dir / f"job-{launch.job_id}-run-{launch.run_id}.log"
        try:
            job = JobProcess(
                launch,
                self.settings.job_command,
                device,
                log_path,
                on_event=self._post,
                on_lease_request=self._renew_lease,
                checkpoint_every_s=self.settings.checkpoint_every_s,
                env=self._env,
                warm=None if launch.command else self._warm.take(),
                bounds=bounds,
            )
        except CommandStartError as exc:
            # Nothing runs: the run ends at once with the reason, in its log too.
            with contextlib.suppress(OSError), log_path.open("ab") as log:
                log.write(f"[shock] run {launch.run_id}: {exc}\n".encode())
            self._post_for(launch.run_id, launch.job_id, JobEvent(
                Exit(reason="error", exit_code=127, message=str(exc))
            ))  # fmt: skip
            return
        if bounds.bounded:
            self._bounds_keeper.check(job.process.pid, bounds)
        log_event("run-launched", f"run {launch.run_id} of job {launch.job_id} "
                  f"({launch.job_type}) launched on GPU {','.join(map(str, launch.gpus))}",
                  run=launch.run_id, job=launch.job_id, gpus=list(launch.gpus))  # fmt: skip
        with self._lock:
            self._jobs[launch.run_id] = job

    def _upload_log(self, fetch: FetchLog) -> None:
        logs = [read_run_log(self.settings.log_dir, run_id, fetch.max_bytes)
                for run_id in fetch.run_ids]  # fmt: skip
        # Unsent, the user's request times out and says so.
        with contextlib.suppress(grpc.RpcError, AuthenticationError):
            self._call("UploadLog", pb.UploadLogRequest(
                worker_id=self.worker_id, request_id=fetch.request_id, logs=logs
            ))  # fmt: skip

    def _reap(self) -> None:
        with self._lock:
            for run_id in [r for r, job in self._jobs.items() if job.finished]:
                del self._jobs[run_id]

    def _end_silent_jobs(self) -> None:
        """A person's command that has not said anything for the report timeout (never
        reported, or hangs) loses its lease: it is ended and its job fails."""
        limit = self.settings.report_timeout_s
        now = time.monotonic()
        with self._lock:
            silent = [job for job in self._jobs.values() if job.is_command and not job.saw_exit
                      and now - job.last_heard > limit]  # fmt: skip
        for job in silent:
            job.fail(f"lost its lease: no progress report for {limit:g} s "
                     "(a job reports through shock.job)")  # fmt: skip

    # The loop.

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        """Serve until the scheduler says shutdown (0), or it stays unreachable (1)."""
        sender = threading.Thread(target=self._send_events, name="events", daemon=True)
        code = 1
        try:
            self._connect()
            sender.start()
            self._warm.fill()
            code = self._loop()
        finally:
            self._stop.set()
            self._warm.close()
            self._stop_jobs()
            with self._lock:
                self._draining.set()
                self._outbox_ready.notify_all()
            if sender.is_alive():
                sender.join(timeout=self.settings.stop_grace_s)
            self._channel.close()
        return code

    def _connect(self) -> None:
        deadline = time.monotonic() + self.settings.scheduler_timeout_s
        while True:
            try:
                self._register()
                return
            except grpc.RpcError as exc:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise ShockError(
                        f"cannot reach scheduler {self.settings.scheduler}: {exc.details()}"
                    ) from None
                time.sleep(0.5)

    def _loop(self) -> int:
        lost = False  # the scheduler stopped answering (logged once until it answers)
        while not self._stop.is_set():
            heartbeat = self._heartbeat_s
            try:
                reply = self._call(
                    "Heartbeat",
                    pb.HeartbeatRequest(
                        worker_id=self.worker_id, live_runs=self._live_runs(), wait_s=heartbeat
                    ),
                    timeout=heartbeat + _RPC_TIMEOUT_S,
                )
                assert isinstance(reply, pb.HeartbeatReply)
                if lost:
                    lost = False
                    log_event("scheduler-back", f"scheduler {self.settings.scheduler} answers "
                              "again", scheduler=self.settings.scheduler)  # fmt: skip
                if reply.reregister:
                    self._register()
                    continue
                for command in reply.commands:
                    self._apply(wire.command_from_pb(command))
                self._warm.fill()  # after a burst of launches, spares for the next ones
                if reply.shutdown:
                    return 0
            except grpc.RpcError as exc:
                if not lost:
                    lost = True
                    log_event("scheduler-unreachable", f"scheduler {self.settings.scheduler} "
                              f"does not answer ({exc.code().name}); retrying for "
                              f"{self.settings.scheduler_timeout_s:g} s", logging.WARNING,
                              scheduler=self.settings.scheduler)  # fmt: skip
                if time.monotonic() - self._last_contact > self.settings.scheduler_timeout_s:
                    log_event("scheduler-lost", f"scheduler {self.settings.scheduler} "
                              "unreachable too long: stopping", logging.ERROR)  # fmt: skip
                    return 1
                self._stop.wait(min(heartbeat, 0.5))
            self._reap()
            self._end_silent_jobs()
        return 0

    def _stop_jobs(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.preempt()
        for job in jobs:
            job.kill(self.settings.stop_grace_s)
