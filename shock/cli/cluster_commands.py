"""`shock serve` (the scheduler service) and `shock worker` (a worker agent)."""

from __future__ import annotations

import logging
import shlex
import signal
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from shock.cli.output import print_run_header, summary_table
from shock.cli.progress import ProgressObserver, wants_progress
from shock.cluster.defaults import (
    DEFAULT_HOST,
    DEFAULT_JOB_COMMAND,
    DEFAULT_PORT,
    TOKEN_ENV,
    with_default_port,
)
from shock.cluster.oplog import configure_logging, log_event
from shock.core.errors import InputError, ShockError
from shock.core.plugins import default_registry
from shock.engine.runner import DEFAULT_POLICY, RunOptions, build_request
from shock.plugins.backends.grpc import Endpoint, GrpcBackend, GrpcOptions, ServeMode

if TYPE_CHECKING:
    from shock.cluster.auth import TlsFiles
    from shock.cluster.dashboard.app import DashboardServer
    from shock.cluster.runtime.runtime import Runtime
    from shock.cluster.users import Users

TOKEN_FILE = "token"
DEFAULT_DASHBOARD_HOST = "127.0.0.1"  # only this machine's users, unless told otherwise
# With a users file: the hierarchical policy that shares the cluster by the users' weights.
WEIGHTED_POLICY = "max_min_fairness_water_filling_perf"
# `shock worker`'s exit status when the scheduler refuses it (systemd: RestartPreventExitStatus).
REFUSED_EXIT_STATUS = 3

TokenOption = Annotated[
    str | None,
    typer.Option(envvar=TOKEN_ENV, help=f"Shared secret of the cluster (or ${TOKEN_ENV})."),
]
LogLevel = Annotated[
    str, typer.Option(help="Log events from this level up: debug, info, warning or error.")
]
LogFormat = Annotated[
    str, typer.Option(help="Log lines on stderr as text or json (one line per event).")
]
TlsCert = Annotated[Path | None, typer.Option(help="TLS certificate (PEM).")]
TlsKey = Annotated[Path | None, typer.Option(help="TLS private key (PEM).")]
TlsCa = Annotated[
    Path | None,
    typer.Option(help="CA (PEM): the server requires client certificates it signed; a worker "
                 "verifies the server with it."),
]  # fmt: skip


def parse_job_command(text: str | None) -> tuple[str, ...]:
    if text is None:
        return DEFAULT_JOB_COMMAND
    try:
        parts = tuple(shlex.split(text))
    except ValueError as exc:
        raise InputError(f"cannot split '{text}': {exc}", field="--job-command") from exc
    if not parts:
        raise InputError("must not be empty", field="--job-command")
    return parts


def _require_cluster_extra() -> None:
    try:
        import grpc  # noqa: F401
    except ImportError:
        raise ShockError("needs the cluster extra: pip install 'shock[cluster]'") from None


def _tls(cert: Path | None, key: Path | None, ca: Path | None) -> TlsFiles | None:
    from shock.cluster.auth import TlsFiles

    tls = TlsFiles(cert, key, ca)
    return tls if tls.enabled else None


def _policy_for(policy: str | None, users: Users | None) -> str:
    """The policy to serve with: with a users file, by default the hierarchical one that
    shares the cluster by the users' weights; a policy that ignores them gets a warning."""
    if policy is None:
        return WEIGHTED_POLICY if users is not None else DEFAULT_POLICY
    weights = {user.weight for user in users.users} if users is not None else set()
    chosen = default_registry().get("policy", policy)
    if len(weights) > 1 and not getattr(chosen, "weighs_entities", False):
        log_event(
            "policy-ignores-weights",
            f"--policy {policy} ignores the users' weights in the users file: every job is "
            f"weighed alone; use --policy {WEIGHTED_POLICY} (or gandiva_fair) to share the "
            "cluster between users by their weights",
            logging.WARNING, policy=policy,
        )  # fmt: skip
    return policy


def _stop_on_sigterm(stop: threading.Event, interrupt_too: bool = False) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    if interrupt_too:
        signal.signal(signal.SIGINT, handler)


def serve_command(
    state_dir: Annotated[Path, typer.Option(help="Journal, checkpoints and logs (resumable).")],
    trace: Annotated[
        Path | None,
        typer.Option(help="Trace to run, then stop. Without one, a new state directory starts "
                          "an empty service that runs submitted jobs until stopped."),
    ] = None,
    users: Annotated[
        Path | None,
        typer.Option(help="Users file (TOML or CSV): names, weights, token hashes, admins "
                          "(docs/running-a-cluster.md). Default: one admin, the cluster token."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = DEFAULT_PORT,
    token: TokenOption = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
    policy: Annotated[
        str | None,
        typer.Option(help=f"Policy name (default: {DEFAULT_POLICY}; with --users, "
                     f"{WEIGHTED_POLICY}, which honours the users' weights).",
                     show_default=False),
    ] = None,
    throughputs: Annotated[
        Path | None, typer.Option(help="Prior throughput table; default: Gavel's, then measured.")
    ] = None,
    solver: Annotated[str, typer.Option(help="Solver.")] = "highs",
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    preset: Annotated[str, typer.Option(help="Semantics preset.")] = "default",
    policy_option: Annotated[
        list[str] | None,
        typer.Option(help="A policy option as KEY=VALUE (repeatable), e.g. --policy-option "
                     "gpus_per_node=4; see docs/policies.md for each policy's options."),
    ] = None,
    round_length: Annotated[float, typer.Option(help="Round length in seconds.")] = 30.0,
    heartbeat: Annotated[float, typer.Option(help="Worker heartbeat period (s).")] = 1.0,
    dead_after: Annotated[
        float, typer.Option(help="A worker silent this long is dead; its jobs move (s).")
    ] = 10.0,
    min_workers: Annotated[int, typer.Option(help="Workers to wait for before round 1.")] = 1,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the results document here.")
    ] = None,
    dashboard: Annotated[
        int | None,
        typer.Option(help="Serve a web dashboard on this port (0: any free port).",
                     show_default=False),
    ] = None,
    dashboard_host: Annotated[
        str, typer.Option(help="Address the dashboard listens on.")
    ] = DEFAULT_DASHBOARD_HOST,
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
) -> None:
    """Run the scheduler service: workers register with it, users submit jobs to it (or it
    runs a --trace). Restarting it with the same --state-dir resumes every job.

    It is the grpc backend with no local workers: its options are that backend's."""
    _require_cluster_extra()
    from shock.cluster.auth import new_token
    from shock.cluster.runtime.errors import ServiceStopped
    from shock.cluster.users import load_users, single_admin
    from shock.core.trace import Trace

    configure_logging(log_level, log_format)
    # Status lines are never wrapped: they often go to a log file, not a terminal.
    console = Console(soft_wrap=True)
    resuming = (state_dir / "journal.sqlite").exists()
    service = trace is None and not resuming
    user_table = load_users(users) if users is not None else None
    policy = _policy_for(policy, user_table)
    if dashboard is not None and not 0 <= dashboard <= 65535:
        raise InputError(f"must be a port, 0 to 65535, got {dashboard}", field="--dashboard")
    state_dir.mkdir(parents=True, exist_ok=True)
    if token is None:
        token_path = state_dir / TOKEN_FILE
        if not token_path.exists():
            token_path.touch(mode=0o600)
            token_path.write_text(new_token() + "\n")
        token = token_path.read_text().strip()
        console.print(f"token: {token_path} (give it to workers as ${TOKEN_ENV})")
    try:
        backend_options = GrpcOptions(
            local_workers=0, state_dir=state_dir, heartbeat=heartbeat, dead_after=dead_after,
            min_workers=min_workers, host=host, port=port,
        )  # fmt: skip
    except ValueError as exc:
        raise InputError(str(exc)) from None
    options = RunOptions(
        policy=policy,
        backend="grpc",
        backend_options=backend_options,
        trace=str(trace) if trace else None,
        throughputs=str(throughputs) if throughputs else None,
        solver=solver,
        seed=seed,
        preset=preset,
        round_length_s=round_length,
        policy_options=tuple(policy_option or ()),
    )
    # A service (new or resumed) reads its jobs from the journal, not from a trace file.
    empty = Trace((), source="submitted jobs") if trace is None else None
    registry = default_registry()
    if wants_progress(quiet=False):
        registry.manager.register(ProgressObserver(Console(stderr=True, emoji=False)))
    request = build_request(options, registry, trace=empty)
    if user_table is not None:
        # Users are the entities of hierarchical policies, weighted as the file says.
        request = replace(request, config=replace(
            request.config, entity_weights=user_table.weights()
        ))  # fmt: skip
    people = user_table or single_admin(token)
    accepts = service

    def listening(scheduler: Runtime, bound: int) -> Callable[[], None] | None:
        nonlocal accepts
        accepts = scheduler.accepts_submissions  # a resumed service stays one
        web = None
        if dashboard is not None:
            web = _start_dashboard(scheduler, people, dashboard_host, dashboard)
        mode = "service: submit jobs with `shock submit`" if accepts else "trace"
        console.print(f"shock scheduler listening on {host}:{bound} ({mode})", highlight=False)
        if web is not None:
            console.print(f"dashboard: {web.url}", highlight=False)
        _stop_on_sigterm(stop, interrupt_too=accepts)
        return None if web is None else web.stop

    stop = threading.Event()
    serve_mode = ServeMode(
        Endpoint(token, _tls(tls_cert, tls_key, tls_ca), people), service, stop, listening
    )
    try:
        result = GrpcBackend().serve(request, serve_mode)
    except ServiceStopped:
        console.print("stopped")
        return
    if accepts:
        console.print(f"stopped; the journal in {state_dir} keeps every job")
        if not result.records:
            return
    print_run_header(console, result)
    console.print(summary_table(result))
    if json_path is not None:
        result.write_json(json_path)
        console.print(f"results written to {json_path}")


def _start_dashboard(scheduler: Runtime, people: Users, host: str, port: int) -> DashboardServer:
    try:
        from shock.cluster.dashboard.app import Dashboard, start_dashboard
    except ImportError:
        raise ShockError("--dashboard needs the cluster extra: pip install 'shock[cluster]'"
                         ) from None  # fmt: skip
    return start_dashboard(Dashboard(scheduler, people), host, port)


def worker_command(
    scheduler: Annotated[
        str, typer.Option(help="Scheduler address host:port (a host alone: port 50051).")
    ] = f"{DEFAULT_HOST}:{DEFAULT_PORT}",
    token: TokenOption = None,
    gpus: Annotated[int, typer.Option(help="GPUs this worker offers.")] = 1,
    gpu_type: Annotated[str, typer.Option(help="Worker type of its GPUs, e.g. v100.")] = "v100",
    simulated: Annotated[
        bool, typer.Option(help="Run jobs on the CPU even when CUDA devices are present.")
    ] = False,
    job_command: Annotated[
        str | None,
        typer.Option(help="Command that runs one job (default: python -m shock.workloads.run)."),
    ] = None,
    log_dir: Annotated[Path, typer.Option(help="Job logs go here.")] = Path("shock-worker-logs"),
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
    heartbeat: Annotated[float, typer.Option(help="Heartbeat period (s).")] = 1.0,
    scheduler_timeout: Annotated[
        float, typer.Option(help="Stop when the scheduler is unreachable this long (s).")
    ] = 120.0,
    checkpoint_every: Annotated[
        float | None, typer.Option(help="Jobs checkpoint at least this often (s).")
    ] = None,
    warm: Annotated[
        bool,
        typer.Option(help="Keep a job process per GPU with torch imported, ready for the next "
                          "launch (default job command only)."),
    ] = True,
    memory_headroom: Annotated[
        float,
        typer.Option(help="A job with a memory grant may allocate the grant plus this much (GB) "
                          "for its runtime (docs/cluster.md)."),
    ] = 2.0,
    cpus: Annotated[
        float | None,
        typer.Option(help="CPU cores this worker offers to jobs (default: the machine's)."),
    ] = None,
    memory_gb: Annotated[
        float | None,
        typer.Option(help="Memory (GB) this worker offers to jobs (default: the machine's)."),
    ] = None,
    rendezvous_host: Annotated[
        str | None,
        typer.Option(help="Address other workers reach this one's jobs at, where a job on "
                     "several GPUs meets (default: this machine's hostname)."),
    ] = None,
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
    report_timeout: Annotated[
        float,
        typer.Option(help="A submitted command that reports nothing (no progress through "
                     "shock.job) for this long (s) loses its lease and fails."),
    ] = 120.0,
) -> None:
    """Run a worker agent: register with the scheduler and run the jobs it sends."""
    _require_cluster_extra()
    from shock.cluster.worker import (
        AuthenticationError,
        WorkerAgent,
        WorkerRefused,
        WorkerSettings,
    )

    configure_logging(log_level, log_format)
    if not token:
        raise InputError(f"a worker needs the cluster's token (--token or ${TOKEN_ENV})",
                         field="--token")  # fmt: skip
    if gpus < 1:
        raise InputError(f"must be >= 1, got {gpus}", field="--gpus")
    if not memory_headroom >= 0:
        raise InputError(f"must be >= 0, got {memory_headroom}", field="--memory-headroom")
    if cpus is not None and not cpus > 0:
        raise InputError(f"must be > 0, got {cpus}", field="--cpus")
    if not report_timeout > 0:
        raise InputError(f"must be > 0, got {report_timeout}", field="--report-timeout")
    if memory_gb is not None and not memory_gb > 0:
        raise InputError(f"must be > 0, got {memory_gb}", field="--memory-gb")
    settings = WorkerSettings(
        scheduler=with_default_port(scheduler), token=token, gpus=gpus, gpu_type=gpu_type,
        simulated=simulated,
        job_command=parse_job_command(job_command), log_dir=log_dir,
        tls=_tls(tls_cert, tls_key, tls_ca), heartbeat_s=heartbeat,
        scheduler_timeout_s=scheduler_timeout, checkpoint_every_s=checkpoint_every,
        warm_processes=warm, memory_headroom_gb=memory_headroom, cpus=cpus,
        memory_gb=memory_gb, rendezvous_host=rendezvous_host,
        report_timeout_s=report_timeout,
    )  # fmt: skip
    agent = WorkerAgent(settings)
    signal.signal(signal.SIGTERM, lambda signum, frame: agent.stop())
    try:
        code = agent.run()
    except (WorkerRefused, AuthenticationError) as refused:
        # Its own exit status, so a service manager can be told not to restart it.
        Console(stderr=True, soft_wrap=True).print(f"error: {refused}", highlight=False,
                                                   markup=False)  # fmt: skip
        raise typer.Exit(REFUSED_EXIT_STATUS) from None
    raise typer.Exit(code)
