"""`shock submit`, `jobs`, `cancel`, `logs`, `watch`: using a running `shock serve`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from shock.cli.cluster_commands import (
    TlsCa,
    TlsCert,
    TlsKey,
    _require_cluster_extra,
    _tls,
)
from shock.cluster.defaults import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV
from shock.core.errors import InputError

if TYPE_CHECKING:
    from shock.cluster.client import JobsClient
    from shock.cluster.proto import shock_cluster_pb2 as pb

TokenOption = Annotated[
    str | None,
    typer.Option(envvar=TOKEN_ENV, help=f"Your user token (or ${TOKEN_ENV}); without a users "
                 "file on the service, the cluster token."),
]  # fmt: skip
SchedulerOption = Annotated[
    str, typer.Option(help="The scheduler service, host:port.")
]
DEFAULT_SCHEDULER = f"{DEFAULT_HOST}:{DEFAULT_PORT}"


def _client(
    scheduler: str, token: str | None, cert: Path | None, key: Path | None, ca: Path | None
) -> JobsClient:
    _require_cluster_extra()
    from shock.cluster.client import JobsClient

    if not token:
        raise InputError(f"needs your token (--token or ${TOKEN_ENV})", field="--token")
    return JobsClient(scheduler, token, _tls(cert, key, ca))


def submit_command(
    job_type: Annotated[str, typer.Option(help="Job type, e.g. 'ResNet-18 (batch size 32)'.")],
    steps: Annotated[int, typer.Option(help="Training steps (iterations) to run.")],
    scale_factor: Annotated[int, typer.Option(help="GPUs the job needs, on one worker.")] = 1,
    user: Annotated[
        str | None, typer.Option(help="Submit as this user (admins only; default: you).")
    ] = None,
    weight: Annotated[float, typer.Option(help="The job's priority weight.")] = 1.0,
    adaptation: Annotated[
        str, typer.Option(help="Batch-size adaptation: static, accordion or gns.")
    ] = "static",
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Submit a job; prints its id alone on the last line."""
    from shock.cluster.proto import shock_cluster_pb2 as pb

    request = pb.SubmitJobRequest(
        job_type=job_type, steps=steps, scale_factor=scale_factor, user=user or "",
        weight=weight, adaptation=adaptation,
    )  # fmt: skip
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        job_id = client.submit(request)
    print(job_id)


def job_document(job: pb.JobStatus) -> dict[str, Any]:
    """One job as `shock jobs --json` prints it."""
    return {
        "id": job.job_id,
        "user": job.user,
        "state": job.state,
        "job_type": job.job_type,
        "scale_factor": job.scale_factor,
        "weight": job.weight,
        "adaptation": job.adaptation,
        # What the scheduler plans with per GPU type (measured, the table's, or estimated).
        "steps_per_s": dict(sorted(job.steps_per_s.items())),
        "step": job.step,
        "target_steps": job.target_steps,
        "checkpoint_step": job.checkpoint_step,
        "progress": job.step / job.target_steps if job.target_steps else 0.0,
        "gpus": [
            {"worker": p.worker_id, "hostname": p.hostname, "gpus": list(p.gpus)}
            for p in job.placement
        ],
        "rho": job.rho or None,
        "queued_s": job.queued_s,
        "submitted_at": job.submitted_at_unix,
        "ended_at": job.ended_at_unix or None,
        "message": job.message,
    }


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def jobs_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs.")] = None,
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """List the service's jobs: state, user, GPUs held and where, progress, rho, queued time."""
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        jobs = client.jobs(user=user or "")
    if json_output:
        print(json.dumps([job_document(job) for job in jobs], indent=2))
        return
    table = Table(title=f"jobs at {scheduler}")
    for column in ("id", "user", "state", "job type", "GPUs", "progress", "rho", "queued"):
        table.add_column(column, justify="right" if column in ("id", "rho") else "left")
    for job in jobs:
        where = "; ".join(
            f"{p.hostname or p.worker_id} {','.join(map(str, p.gpus))}" for p in job.placement
        )
        progress = f"{job.step}/{job.target_steps}"
        if job.target_steps:
            progress += f" ({100 * job.step / job.target_steps:.0f}%)"
        table.add_row(
            str(job.job_id), escape(job.user), job.state, escape(job.job_type), escape(where),
            progress, f"{job.rho:.2f}" if job.rho else "-", _duration(job.queued_s),
        )  # fmt: skip
    Console(emoji=False).print(table)


def cancel_command(
    job_id: Annotated[int, typer.Argument(help="The job to cancel.")],
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Cancel a job: it stops (its checkpoint is kept) and its GPUs go to others next round."""
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        job = client.cancel(job_id)
    print(f"job {job.job_id} cancelled at step {job.step} (checkpoint at {job.checkpoint_step})")


def logs_command(
    job_id: Annotated[int, typer.Argument(help="The job whose output to show.")],
    tail_bytes: Annotated[int, typer.Option(help="Show at most this much of each run.")] = 1 << 20,
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Show a job's output, run by run, fetched from the workers that ran it."""
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        logs = client.logs(job_id, tail_bytes)
    if not logs:
        print(f"job {job_id} has not run yet")
    for log in logs:
        print(f"==> run {log.run_id} on {log.worker_id or '?'}"
              f"{' (last part)' if log.truncated else ''} <==")  # fmt: skip
        if log.error:
            print(f"({log.error})")
        else:
            print(log.text, end="" if log.text.endswith("\n") or not log.text else "\n")


def watch_command(
    job_id: Annotated[int, typer.Argument(help="The job to follow.")],
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Follow a job's events and progress until it ends."""
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        last_step, state = -1, "unknown"
        for update in client.watch(job_id):
            job = update.job
            stamp = time.strftime("%H:%M:%S", time.localtime(update.time_unix))
            if update.event:
                print(f"{stamp} {update.event}", flush=True)
            elif job.step != last_step:
                print(f"{stamp} {job.state} step {job.step}/{job.target_steps}", flush=True)
            last_step, state = job.step, job.state
    print(f"job {job_id} is {state}")
