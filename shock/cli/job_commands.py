"""`shock submit`, `jobs`, `cancel`, `logs`, `watch`: using a running `shock serve`."""

from __future__ import annotations

import json
import math
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
from shock.cluster.names import placement_text
from shock.core.errors import InputError

if TYPE_CHECKING:
    from shock.cluster.client import JobsClient
    from shock.cluster.fairness import UserShare, WindowShare
    from shock.cluster.runtime.job_messages import JobStatus

TokenOption = Annotated[
    str | None,
    typer.Option(envvar=TOKEN_ENV, help=f"Your user token (or ${TOKEN_ENV}); without a users "
                 "file on the service, the cluster token."),
]  # fmt: skip
SchedulerOption = Annotated[
    str, typer.Option(help="The scheduler service, host:port (a host alone: port 50051).")
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
    command: Annotated[
        list[str] | None,
        typer.Argument(help="Your own command, after --: the worker runs it in --workdir "
                       "with the job contract's environment (docs/your-own-jobs.md).",
                       show_default=False),
    ] = None,
    job_type: Annotated[
        str | None,
        typer.Option(help="A built-in family's job type, e.g. 'ResNet-18 (batch size 32)' "
                     "(instead of a command)."),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(help="Training steps to run (a command may leave it out: its "
                     "shock.job session says; a built-in family's job needs it)."),
    ] = None,
    gpus: Annotated[int, typer.Option("--gpus", "--scale-factor", help="GPUs the job needs.")] = 1,
    name: Annotated[
        str | None,
        typer.Option(help="A command's name, also its job type for throughputs (default: its "
                     "script or program)."),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Where the worker runs the command (default: this directory; it "
                     "must exist on the workers)."),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="NAME=VALUE for the command's environment (repeatable)."),
    ] = None,
    user: Annotated[
        str | None, typer.Option(help="Submit as this user (admins only; default: you).")
    ] = None,
    weight: Annotated[float, typer.Option(help="The job's priority weight.")] = 1.0,
    adaptation: Annotated[
        str, typer.Option(help="Batch-size adaptation: static, accordion or gns.")
    ] = "static",
    elastic: Annotated[
        bool,
        typer.Option(help="Let an elastic policy (pollux, sia) choose its GPU count each round "
                     "(resized from its checkpoint); --gpus is then what other policies give "
                     "it."),
    ] = False,
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Submit a job, your own command (shock submit [OPTIONS] -- COMMAND ARGS...) or a
    built-in family's (--job-type); prints its id alone on the last line."""
    from shock.cluster.runtime.job_messages import Submission

    # 0 is refused like a negative value (the protocol reads 0 as "the default").
    if steps is not None and steps < 1:
        raise InputError(f"must be >= 1, got {steps}", field="--steps")
    if steps is None and not command:
        raise InputError("a built-in family's job needs --steps", field="--steps")
    if gpus < 1:
        raise InputError(f"must be >= 1 GPU, got {gpus}", field="--gpus/--scale-factor")
    if not (weight > 0 and math.isfinite(weight)):
        raise InputError(f"must be a finite number > 0, got {weight:g}", field="--weight")
    if command and job_type:
        raise InputError("give a command (after --) or --job-type, not both", field="--job-type")
    if not command and job_type is None:
        raise InputError("give your command after -- (shock submit -- python train.py), or "
                         "--job-type for a built-in family", field="COMMAND")  # fmt: skip
    if command and elastic:
        raise InputError("goes with --job-type (a built-in family's job)", field="--elastic")
    if not command and (workdir is not None or env or name):
        misplaced = "--workdir" if workdir is not None else "--env" if env else "--name"
        raise InputError("goes with a command (after --)", field=misplaced)
    variables = {}
    for entry in env or []:
        key, equals, value = entry.partition("=")
        if not equals or not key:
            raise InputError(f"expected NAME=VALUE, got {entry!r}", field="--env")
        variables[key] = value
    request = Submission(
        job_type=job_type or "", steps=steps or 0, scale_factor=gpus, gpus=gpus, user=user or "",
        weight=weight, adaptation=adaptation, command=tuple(command or ()), name=name or "",
        workdir=str((workdir or Path.cwd()).resolve()) if command else "",
        env=tuple(sorted(variables.items())), elastic=elastic,
    )  # fmt: skip
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        job_id = client.submit(request)
    print(job_id)


def job_document(job: JobStatus) -> dict[str, Any]:
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
        "command": list(job.command),  # a person's own command; [] for a built-in workload
    }


def _stamp(unix: float) -> str:
    """A local time; with its date when it was not today (history from the journal)."""
    when = time.localtime(unix)
    same_day = time.strftime("%Y-%m-%d", when) == time.strftime("%Y-%m-%d")
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", when)


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def share_document(share: UserShare) -> dict[str, Any]:
    """One user as `shock users --json` prints it."""

    def window(part: WindowShare) -> dict[str, float]:
        return {"seconds": part.seconds, "gpu_seconds": part.gpu_seconds,
                "share": part.share, "fair_share": part.fair_share}  # fmt: skip

    return {
        "user": share.user, "weight": share.weight, "gpus": share.gpus,
        "share": share.share, "fair_share": share.fair_share,
        "recent": window(share.recent), "since_start": window(share.since_start),
    }  # fmt: skip


def shares_table(shares: list[UserShare]) -> Table:
    recent = _duration(shares[0].recent.seconds) if shares else ""
    table = Table(title="users' shares: GPU time used (fair share)")
    for column in ("user", "weight", "GPUs now", "now", f"last {recent}", "since start",
                   "GPU-hours"):  # fmt: skip
        table.add_column(column, justify="left" if column == "user" else "right")
    for share in shares:
        table.add_row(
            escape(share.user), f"{share.weight:g}", str(share.gpus),
            f"{_percent(share.share)} ({_percent(share.fair_share)})",
            f"{_percent(share.recent.share)} ({_percent(share.recent.fair_share)})",
            f"{_percent(share.since_start.share)} ({_percent(share.since_start.fair_share)})",
            f"{share.since_start.gpu_seconds / 3600:.2f}",
        )  # fmt: skip
    return table


def users_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    window: Annotated[
        float, typer.Option(help="The recent window, in seconds (beside since the start).")
    ] = 3600.0,
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Each user's share of the GPUs now and of the GPU time over the last hour and since
    the start, beside their weighted fair shares."""
    if not (window > 0 and math.isfinite(window)):
        raise InputError(f"must be a number of seconds > 0, got {window:g}", field="--window")
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        shares = client.users(window)
    if json_output:
        print(json.dumps([share_document(share) for share in shares], indent=2))
        return
    Console(emoji=False).print(shares_table(shares))


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
        shares = [] if json_output else client.users()
    if json_output:
        print(json.dumps([job_document(job) for job in jobs], indent=2))
        return
    console = Console(emoji=False)
    if not jobs:
        console.print(f"no jobs{f' of {user}' if user else ''} at {scheduler}", highlight=False)
        return
    table = Table(title=f"jobs at {scheduler}")
    for column in ("id", "user", "state", "job type", "GPUs", "progress", "rho", "queued"):
        table.add_column(column, justify="right" if column in ("id", "rho") else "left")
    for job in jobs:
        where = placement_text((p.worker_id, list(p.gpus)) for p in job.placement)
        progress = f"{job.step}/{job.target_steps}"
        if job.target_steps:
            progress += f" ({100 * job.step / job.target_steps:.0f}%)"
        table.add_row(
            str(job.job_id), escape(job.user), job.state, escape(job.job_type), escape(where),
            progress, f"{job.rho:.2f}" if job.rho else "-", _duration(job.queued_s),
        )  # fmt: skip
    console.print(table)
    if shares:
        console.print(shares_table(shares))


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
    # Its process writes a checkpoint as it stops: the step it ends at is `shock jobs`'.
    print(f"job {job.job_id} cancelled (at step {job.step} when cancelled; it stops after "
          f"writing a checkpoint, its last one was at step {job.checkpoint_step})")


# The states a job does not leave: `shock logs --follow` stops at them.
ENDED_STATES = frozenset({"done", "failed", "cancelled"})
# How much of the output already shown is looked for in a truncated fetch (to print only
# what follows it).
_OVERLAP_CHARS = 256


def new_output(shown: str, text: str, truncated: bool) -> tuple[str, bool]:
    """What of a run's fetched `text` follows the `shown` output, and whether some output
    between the two was lost (the fetch holds only the tail and no longer overlaps)."""
    if text.startswith(shown):
        return text[len(shown) :], False
    if truncated and shown:
        anchor = shown[-_OVERLAP_CHARS:]
        at = text.rfind(anchor)
        if at >= 0:
            return text[at + len(anchor) :], False
    return text, bool(shown) or truncated


def logs_command(
    job_id: Annotated[int, typer.Argument(help="The job whose output to show.")],
    tail_bytes: Annotated[int, typer.Option(help="Show at most this much of each run.")] = 1 << 20,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing new output until the job ends."),
    ] = False,
    interval: Annotated[
        float, typer.Option(help="With --follow: seconds between fetches.")
    ] = 2.0,
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Show a job's output, run by run, fetched from the workers that ran it."""
    if interval <= 0:
        raise InputError(f"must be > 0, got {interval:g}", field="--interval")
    shown: dict[int, str] = {}  # each run's output printed so far
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        while True:
            # The state first: output fetched after the job ended is all of it.
            ended = not follow or _state_of(client, job_id) in ENDED_STATES
            logs = client.logs(job_id, tail_bytes)
            if not logs and not shown and (ended or not follow):
                print(f"job {job_id} has not run yet")
            for log in logs:
                _print_run_log(log, shown, whole_lines=not ended)
            if ended:
                return
            time.sleep(interval)


def _state_of(client: Any, job_id: int) -> str:
    statuses = client.jobs([job_id])
    return statuses[0].state if statuses else "unknown"


def _print_run_log(log: Any, shown: dict[int, str], whole_lines: bool = False) -> None:
    """Print what of one run's log is new: its header the first time, then the rest (with
    `whole_lines`, only up to its last newline: a line still being written waits)."""
    if log.run_id not in shown:
        print(f"==> run {log.run_id} on {log.worker_id or '?'}"
              f"{' (last part)' if log.truncated else ''} <==")  # fmt: skip
        if log.error:
            print(f"({log.error})")
            shown[log.run_id] = ""
            return
    elif log.error:
        return
    text, lost = new_output(shown.get(log.run_id, ""), log.text, log.truncated)
    if lost and shown.get(log.run_id):
        print(f"[... run {log.run_id}: output skipped; raise --tail-bytes ...]")
    printed = log.text
    if whole_lines and not text.endswith("\n"):
        partial = len(text) - (text.rfind("\n") + 1)
        text, printed = text[: len(text) - partial], log.text[: len(log.text) - partial]
    if text:
        print(text, end="" if text.endswith("\n") else "\n", flush=True)
    shown[log.run_id] = printed


def watch_command(
    job_id: Annotated[int, typer.Argument(help="The job to follow.")],
    follow: Annotated[
        bool, typer.Option(help="Follow it until it ends (--no-follow: its history and state "
                           "now, then stop).")
    ] = True,
    scheduler: SchedulerOption = DEFAULT_SCHEDULER,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
) -> None:
    """Show a job's history (every run, checkpoint and preemption, at the times they
    happened, also before a restart of the service), then follow it until it ends."""
    with _client(scheduler, token, tls_cert, tls_key, tls_ca) as client:
        last_step, state = -1, "unknown"
        for update in client.watch(job_id, history_only=not follow):
            job = update.job
            stamp = _stamp(update.time_unix)
            if update.event:
                print(f"{stamp} {update.event}", flush=True)
            elif job.step != last_step:
                print(f"{stamp} {job.state} step {job.step}/{job.target_steps}", flush=True)
            last_step, state = job.step, job.state
    print(f"job {job_id} is {state}" + (f" at step {last_step}" if state != "done" else ""))
