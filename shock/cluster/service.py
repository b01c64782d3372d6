"""The gRPC adapter's service: requests translated to the runtime's calls (`grpc_wire.py`),
its refusals to status codes, and the server itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from shock.cluster import grpc_wire as wire
from shock.cluster.auth import TlsFiles, TokenInterceptor, call_token
from shock.cluster.defaults import DEFAULT_HOST
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.runtime.errors import (
    NotFoundError,
    PermissionError_,
    PreconditionError,
    RequestError,
)
from shock.cluster.runtime.job_views import DEFAULT_SHARE_WINDOW_S
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.users import User, Users, single_admin
from shock.core.errors import ShockError

_log = logging.getLogger(__name__)
Reply = TypeVar("Reply")


def _answer(context: grpc.ServicerContext, handler: Callable[[], Reply]) -> Reply:
    """Run a handler; a refused request becomes an error reply, never a dead server."""
    try:
        return handler()
    except RequestError as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except PreconditionError as exc:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
    except NotFoundError as exc:
        context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    except PermissionError_ as exc:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
    except Exception as exc:  # a bug must not take the service down with it
        _log.exception("scheduler handler failed")
        context.abort(grpc.StatusCode.INTERNAL, f"scheduler error: {exc}")
    raise AssertionError("unreachable: abort raises")


class SchedulerServicer(pb_grpc.SchedulerServicer):
    def __init__(self, scheduler: Runtime) -> None:
        self.scheduler = scheduler

    def Register(self, request: pb.RegisterRequest, context: Any) -> pb.RegisterReply:
        def handle() -> pb.RegisterReply:
            welcome = self.scheduler.register(wire.hello_from_pb(request))
            return pb.RegisterReply(
                worker_id=welcome.worker_id, heartbeat_s=welcome.heartbeat_s,
                scheduler_incarnation=welcome.incarnation,
            )  # fmt: skip

        return _answer(context, handle)

    def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatReply:
        def handle() -> pb.HeartbeatReply:
            _require_worker(request.worker_id)
            orders = self.scheduler.heartbeat(
                request.worker_id, wire.live_runs_from_pb(request.live_runs), request.wait_s
            )
            return pb.HeartbeatReply(
                commands=[wire.command_to_pb(command) for command in orders.commands],
                reregister=orders.reregister, shutdown=orders.shutdown,
            )  # fmt: skip

        return _answer(context, handle)

    def ReportEvents(
        self, request: pb.ReportEventsRequest, context: Any
    ) -> pb.ReportEventsReply:
        def handle() -> pb.ReportEventsReply:
            _require_worker(request.worker_id)
            for event in request.events:
                if event.seq <= 0 or event.WhichOneof("event") is None:
                    raise RequestError(f"event {event.seq} has no positive seq or no payload")
            events = [wire.event_from_pb(event) for event in request.events]
            acked = self.scheduler.report_events(request.worker_id, events)
            return pb.ReportEventsReply(acked_seq=acked)

        return _answer(context, handle)

    def RenewLease(
        self, request: pb.RenewLeaseRequest, context: Any
    ) -> pb.RenewLeaseReply:
        def handle() -> pb.RenewLeaseReply:
            seconds = self.scheduler.renew_lease(request.run_id)
            if seconds is None:
                return pb.RenewLeaseReply(granted=False)
            return pb.RenewLeaseReply(granted=True, seconds=seconds)

        return _answer(context, handle)

    def UploadLog(self, request: pb.UploadLogRequest, context: Any) -> pb.UploadLogReply:
        def handle() -> pb.UploadLogReply:
            _require_worker(request.worker_id)
            logs = [wire.run_log_from_pb(log) for log in request.logs]
            self.scheduler.upload_log(request.worker_id, request.request_id, logs)
            return pb.UploadLogReply()

        return _answer(context, handle)


class JobsServicer(pb_grpc.JobsServicer):
    """The service people use; every call is made as the user whose token it carries."""

    def __init__(self, scheduler: Runtime, users: Users) -> None:
        self.scheduler = scheduler
        self.users = users

    def _caller(self, context: Any) -> User:
        user = self.users.identify(call_token(context.invocation_metadata()))
        if user is None:  # the interceptor lets no such call through
            raise PermissionError_("no user has this token")
        return user

    def _owner(self, caller: User, named: str) -> str:
        """Whom a submitted job belongs to: the caller, or for an admin whoever is named."""
        if not named or named == caller.name:
            return caller.name
        if not caller.admin:
            raise PermissionError_(f"{caller.name} may submit jobs only as themselves, "
                                   f"not as {named} (admins may)")  # fmt: skip
        if not self.users.open_names and self.users.get(named) is None:
            raise RequestError(f"no user {named!r} in the users file")
        return named

    def SubmitJob(self, request: pb.SubmitJobRequest, context: Any) -> pb.SubmitJobReply:
        def handle() -> pb.SubmitJobReply:
            caller = self._caller(context)
            owner = self._owner(caller, request.user)
            job_id = self.scheduler.submit(owner, wire.submission_from_pb(request))
            return pb.SubmitJobReply(job_id=job_id)

        return _answer(context, handle)

    def ListJobs(self, request: pb.ListJobsRequest, context: Any) -> pb.ListJobsReply:
        def handle() -> pb.ListJobsReply:
            if request.user and not self.users.open_names and self.users.get(request.user) is None:
                names = ", ".join(user.name for user in self.users.users)
                raise NotFoundError(f"no user {request.user!r} in the users file (users: {names})")
            statuses = self.scheduler.list_jobs(tuple(request.job_ids), request.user)
            return pb.ListJobsReply(jobs=[wire.status_to_pb(status) for status in statuses])

        return _answer(context, handle)

    def ListUsers(self, request: pb.ListUsersRequest, context: Any) -> pb.ListUsersReply:
        def handle() -> pb.ListUsersReply:
            shares = self.scheduler.user_shares(request.window_s or DEFAULT_SHARE_WINDOW_S)
            return pb.ListUsersReply(users=[wire.user_share_to_pb(share) for share in shares])

        return _answer(context, handle)

    def CancelJob(self, request: pb.CancelJobRequest, context: Any) -> pb.CancelJobReply:
        def handle() -> pb.CancelJobReply:
            caller = self._caller(context)
            status = self.scheduler.cancel(caller.name, caller.admin, request.job_id)
            return pb.CancelJobReply(job=wire.status_to_pb(status))

        return _answer(context, handle)

    def WatchJob(self, request: pb.WatchJobRequest, context: Any) -> Iterator[pb.JobUpdate]:
        updates = self.scheduler.watch(request.job_id, context.is_active, request.history_only)
        while True:
            update = _answer(context, lambda: next(updates, None))
            if update is None:
                return
            yield wire.update_to_pb(update)

    def JobLogs(self, request: pb.JobLogsRequest, context: Any) -> pb.JobLogsReply:
        def handle() -> pb.JobLogsReply:
            caller = self._caller(context)
            owner = self.scheduler.owner_of(request.job_id)
            if not caller.admin and owner != caller.name:
                raise PermissionError_(
                    f"job {request.job_id} belongs to {owner}: only they or an admin may read "
                    "its output"
                )
            logs = self.scheduler.job_logs(request.job_id, request.max_bytes)
            return pb.JobLogsReply(logs=[wire.run_log_to_pb(log) for log in logs])

        return _answer(context, handle)


def _require_worker(worker_id: str) -> None:
    if not worker_id:
        raise RequestError("worker_id is empty: register first")


@dataclass(frozen=True, slots=True)
class ServerAddress:
    host: str = DEFAULT_HOST
    port: int = 0  # 0: any free port

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def start_server(
    scheduler: Runtime,
    address: ServerAddress,
    token: str,
    tls: TlsFiles | None = None,
    threads: int = 128,  # each worker holds one in its long-poll heartbeat, each watcher one
    users: Users | None = None,
) -> tuple[grpc.Server, int]:
    """Start serving; returns the server and the port it bound. `users`: who may use the
    Jobs service (default: one admin whose token is the cluster token)."""
    users = users or single_admin(token)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        # Without a users file the cluster token's holder is the one admin.
        interceptors=[TokenInterceptor(token, None if users.open_names else users)],
    )
    pb_grpc.add_SchedulerServicer_to_server(SchedulerServicer(scheduler), server)
    pb_grpc.add_JobsServicer_to_server(JobsServicer(scheduler, users), server)
    target = f"{address.host}:{address.port}"
    try:
        if tls is not None and tls.enabled:
            port = server.add_secure_port(target, tls.server_credentials())
        else:
            port = server.add_insecure_port(target)
    except RuntimeError as exc:
        raise ShockError(f"cannot listen on {target}: {exc}") from exc
    if port == 0:
        raise ShockError(f"cannot listen on {target}")
    server.start()
    return server, port
