"""The gRPC adapter's edge: protobuf messages to and from the runtime's own types.

Only the gRPC adapter (this module, `service.py`, the worker agent `worker.py` and the Jobs
client `client.py`) names protobuf; the runtime, the Ray adapter and the CLI never do.
"""

from __future__ import annotations

from shock.cluster.fairness import UserShare, WindowShare
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.runtime.job_messages import JobPlacement, JobStatus, JobUpdate, Submission
from shock.cluster.runtime.messages import (
    BatchSizeRequest,
    Checkpoint,
    Command,
    EventPayload,
    Exit,
    ExtendLease,
    FetchLog,
    JobEvent,
    JobLimits,
    Launch,
    LiveRun,
    Preempt,
    Progress,
    RunLog,
    SetBatchSize,
    Started,
    WorkerHello,
)

# Commands.


def launch_to_pb(launch: Launch) -> pb.Launch:
    message = pb.Launch(
        run_id=launch.run_id, job_id=launch.job_id, job_type=launch.job_type,
        target_steps=launch.target_steps, checkpoint_dir=launch.checkpoint_dir,
        gpus=launch.gpus, lease_s=launch.lease_s, seed=launch.seed,
        adaptation=launch.adaptation, cpus=launch.cpus, memory_gb=launch.memory_gb,
        command=launch.command, workdir=launch.workdir,
    )  # fmt: skip
    message.env.update(dict(launch.env))
    if launch.world_size > 1:
        message.rank, message.world_size = launch.rank, launch.world_size
        message.local_rank = launch.local_rank
        message.master_addr, message.master_port = launch.master_addr, launch.master_port
    return message


def launch_from_pb(message: pb.Launch) -> Launch:
    return Launch(
        run_id=message.run_id, job_id=message.job_id, job_type=message.job_type,
        target_steps=message.target_steps, checkpoint_dir=message.checkpoint_dir,
        gpus=tuple(message.gpus), lease_s=message.lease_s, seed=message.seed,
        adaptation=message.adaptation, cpus=message.cpus, memory_gb=message.memory_gb,
        rank=message.rank, world_size=max(1, message.world_size),
        local_rank=message.local_rank, master_addr=message.master_addr,
        master_port=message.master_port, command=tuple(message.command),
        workdir=message.workdir, env=tuple(sorted(message.env.items())),
    )  # fmt: skip


def command_to_pb(command: Command) -> pb.Command:
    if isinstance(command, Launch):
        return pb.Command(launch=launch_to_pb(command))
    if isinstance(command, ExtendLease):
        return pb.Command(lease=pb.Lease(run_id=command.run_id, seconds=command.seconds))
    if isinstance(command, Preempt):
        return pb.Command(preempt=pb.Preempt(run_id=command.run_id))
    if isinstance(command, SetBatchSize):
        return pb.Command(
            batch_size=pb.BatchSize(run_id=command.run_id, batch_size=command.batch_size)
        )
    return pb.Command(fetch_log=pb.FetchLog(
        request_id=command.request_id, run_ids=command.run_ids, max_bytes=command.max_bytes
    ))  # fmt: skip


def command_from_pb(message: pb.Command) -> Command | None:
    """None for a command this side does not know (a newer scheduler's)."""
    kind = message.WhichOneof("command")
    if kind == "launch":
        return launch_from_pb(message.launch)
    if kind == "lease":
        return ExtendLease(message.lease.run_id, message.lease.seconds)
    if kind == "preempt":
        return Preempt(message.preempt.run_id)
    if kind == "batch_size":
        return SetBatchSize(message.batch_size.run_id, message.batch_size.batch_size)
    if kind == "fetch_log":
        fetch = message.fetch_log
        return FetchLog(fetch.request_id, tuple(fetch.run_ids), fetch.max_bytes)
    return None


# Job events.


def event_to_pb(event: JobEvent) -> pb.JobEvent:
    message = pb.JobEvent(
        seq=event.seq, run_id=event.run_id, job_id=event.job_id, time_unix=event.time_unix
    )
    payload = event.payload
    if isinstance(payload, Started):
        message.started.CopyFrom(pb.Started(
            step=payload.step, batch_size=payload.batch_size,
            resumed_from_step=payload.resumed_from_step,
        ))  # fmt: skip
        if payload.limits is not None:
            limits = payload.limits
            message.started.limits.CopyFrom(pb.JobLimits(
                threads=limits.threads, cpus=limits.cpus,
                memory_limit_bytes=limits.memory_limit_bytes,
            ))  # fmt: skip
    elif isinstance(payload, Progress):
        message.progress.CopyFrom(pb.Progress(
            step=payload.step, steps_per_s=payload.steps_per_s, batch_size=payload.batch_size,
            loss=payload.loss, target_steps=payload.target_steps,
        ))  # fmt: skip
    elif isinstance(payload, Checkpoint):
        message.checkpoint.CopyFrom(pb.Checkpoint(step=payload.step, path=payload.path))
    elif isinstance(payload, BatchSizeRequest):
        message.batch_size_request.CopyFrom(pb.BatchSizeRequest(
            step=payload.step, batch_size=payload.batch_size, reason=payload.reason
        ))  # fmt: skip
    else:
        message.exit.CopyFrom(pb.Exit(
            reason=payload.reason, step=payload.step, target_steps=payload.target_steps,
            exit_code=payload.exit_code, message=payload.message,
        ))  # fmt: skip
    return message


def payload_from_pb(message: pb.JobEvent) -> EventPayload | None:
    """None for an event without a payload (refused at the service's edge)."""
    kind = message.WhichOneof("event")
    if kind == "started":
        started = message.started
        limits = None
        if started.HasField("limits"):
            limits = JobLimits(
                started.limits.threads, tuple(started.limits.cpus),
                started.limits.memory_limit_bytes,
            )  # fmt: skip
        return Started(started.step, started.batch_size, started.resumed_from_step, limits)
    if kind == "progress":
        p = message.progress
        return Progress(p.step, p.steps_per_s, p.batch_size, p.loss, p.target_steps)
    if kind == "checkpoint":
        return Checkpoint(message.checkpoint.step, message.checkpoint.path)
    if kind == "batch_size_request":
        r = message.batch_size_request
        return BatchSizeRequest(r.step, r.batch_size, r.reason)
    if kind == "exit":
        e = message.exit
        return Exit(e.reason, e.step, e.target_steps, e.exit_code, e.message)
    return None


def event_from_pb(message: pb.JobEvent) -> JobEvent:
    payload = payload_from_pb(message)
    if payload is None:
        raise ValueError(f"event {message.seq} has no payload")
    return JobEvent(payload, message.seq, message.run_id, message.job_id, message.time_unix)


# Workers.


def live_runs_to_pb(runs: list[LiveRun]) -> list[pb.LiveRun]:
    return [pb.LiveRun(run_id=r.run_id, job_id=r.job_id, step=r.step) for r in runs]


def live_runs_from_pb(runs: object) -> tuple[LiveRun, ...]:
    return tuple(LiveRun(r.run_id, r.job_id, r.step) for r in runs)  # type: ignore[attr-defined]


def hello_from_pb(message: pb.RegisterRequest) -> WorkerHello:
    return WorkerHello(
        worker_id=message.worker_id, hostname=message.hostname, gpu_type=message.gpu_type,
        gpus=len(message.devices), live_runs=live_runs_from_pb(message.live_runs),
        cpus=message.cpus, memory_gb=message.memory_gb,
        rendezvous_host=message.rendezvous_host,
    )  # fmt: skip


def run_log_to_pb(log: RunLog) -> pb.RunLog:
    return pb.RunLog(
        run_id=log.run_id, worker_id=log.worker_id, text=log.text, truncated=log.truncated,
        error=log.error,
    )  # fmt: skip


def run_log_from_pb(message: pb.RunLog) -> RunLog:
    return RunLog(message.run_id, message.worker_id, message.text, message.truncated,
                  message.error)  # fmt: skip


# The Jobs service.


def submission_from_pb(message: pb.SubmitJobRequest) -> Submission:
    return Submission(
        job_type=message.job_type, steps=message.steps, scale_factor=message.scale_factor,
        gpus=message.gpus if message.HasField("gpus") else None, user=message.user,
        weight=message.weight, adaptation=message.adaptation, command=tuple(message.command),
        workdir=message.workdir, env=tuple(sorted(message.env.items())), name=message.name,
        elastic=message.elastic,
    )  # fmt: skip


def submission_to_pb(submission: Submission) -> pb.SubmitJobRequest:
    message = pb.SubmitJobRequest(
        job_type=submission.job_type, steps=submission.steps,
        scale_factor=submission.scale_factor, user=submission.user, weight=submission.weight,
        adaptation=submission.adaptation, command=submission.command,
        workdir=submission.workdir, name=submission.name, elastic=submission.elastic,
    )  # fmt: skip
    message.env.update(dict(submission.env))
    if submission.gpus is not None:
        message.gpus = submission.gpus
    return message


def status_to_pb(status: JobStatus) -> pb.JobStatus:
    return pb.JobStatus(
        job_id=status.job_id, user=status.user, state=status.state, job_type=status.job_type,
        scale_factor=status.scale_factor, step=status.step, target_steps=status.target_steps,
        checkpoint_step=status.checkpoint_step,
        placement=[
            pb.JobPlacement(worker_id=p.worker_id, hostname=p.hostname, gpus=p.gpus)
            for p in status.placement
        ],
        submitted_at_unix=status.submitted_at_unix, queued_s=status.queued_s, rho=status.rho,
        ended_at_unix=status.ended_at_unix, message=status.message, weight=status.weight,
        adaptation=status.adaptation, steps_per_s=dict(status.steps_per_s),
        command=status.command,
    )  # fmt: skip


def status_from_pb(message: pb.JobStatus) -> JobStatus:
    return JobStatus(
        job_id=message.job_id, user=message.user, state=message.state,
        job_type=message.job_type, scale_factor=message.scale_factor, step=message.step,
        target_steps=message.target_steps, checkpoint_step=message.checkpoint_step,
        placement=tuple(
            JobPlacement(p.worker_id, p.hostname, tuple(p.gpus)) for p in message.placement
        ),
        submitted_at_unix=message.submitted_at_unix, queued_s=message.queued_s,
        rho=message.rho, ended_at_unix=message.ended_at_unix, message=message.message,
        weight=message.weight, adaptation=message.adaptation,
        steps_per_s=dict(message.steps_per_s), command=tuple(message.command),
    )  # fmt: skip


def update_from_pb(message: pb.JobUpdate) -> JobUpdate:
    return JobUpdate(status_from_pb(message.job), message.event, message.time_unix)


def update_to_pb(update: JobUpdate) -> pb.JobUpdate:
    return pb.JobUpdate(
        job=status_to_pb(update.job), event=update.event, time_unix=update.time_unix
    )


def _window(window: WindowShare) -> pb.ShareWindow:
    return pb.ShareWindow(seconds=window.seconds, gpu_seconds=window.gpu_seconds,
                          share=window.share, fair_share=window.fair_share)  # fmt: skip


def _window_from_pb(message: pb.ShareWindow) -> WindowShare:
    return WindowShare(message.seconds, message.gpu_seconds, message.share, message.fair_share)


def user_share_from_pb(message: pb.UserShare) -> UserShare:
    return UserShare(
        message.user, message.weight, message.gpus, message.share, message.fair_share,
        _window_from_pb(message.recent), _window_from_pb(message.since_start),
    )  # fmt: skip


def user_share_to_pb(share: UserShare) -> pb.UserShare:
    return pb.UserShare(
        user=share.user, weight=share.weight, gpus=share.gpus, share=share.share,
        fair_share=share.fair_share, recent=_window(share.recent),
        since_start=_window(share.since_start),
    )  # fmt: skip
