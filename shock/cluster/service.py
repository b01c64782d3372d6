"""The gRPC face of the scheduler: request checks, error replies, the server itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from shock.cluster.auth import TlsFiles, TokenInterceptor, call_token
from shock.cluster.defaults import DEFAULT_HOST
from shock.cluster.fairness import UserShare, WindowShare
from shock.cluster.job_service import (
    DEFAULT_SHARE_WINDOW_S,
    NotFoundError,
    PermissionError_,
    PreconditionError,
    RequestError,
)
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.scheduler import ClusterScheduler
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
    def __init__(self, scheduler: ClusterScheduler) -> None:
        self.scheduler = scheduler

    def Register(self, request: pb.RegisterRequest, context: Any) -> pb.RegisterReply:
        return _answer(context, lambda: self.scheduler.register(request))

    def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatReply:
        def handle() -> pb.HeartbeatReply:
            _require_worker(request.worker_id)
            return self.scheduler.heartbeat(request)

        return _answer(context, handle)

    def ReportEvents(
        self, request: pb.ReportEventsRequest, context: Any
    ) -> pb.ReportEventsReply:
        def handle() -> pb.ReportEventsReply:
            _require_worker(request.worker_id)
            for event in request.events:
                if event.seq <= 0 or event.WhichOneof("event") is None:
                    raise RequestError(f"event {event.seq} has no positive seq or no payload")
            return self.scheduler.report_events(request)

        return _answer(context, handle)

    def RenewLease(
        self, request: pb.RenewLeaseRequest, context: Any
    ) -> pb.RenewLeaseReply:
        return _answer(context, lambda: self.scheduler.renew_lease(request))


    def UploadLog(self, request: pb.UploadLogRequest, context: Any) -> pb.UploadLogReply:
        def handle() -> pb.UploadLogReply:
            _require_worker(request.worker_id)
            return self.scheduler.upload_log(request)

        return _answer(context, handle)


class JobsServicer(pb_grpc.JobsServicer):
    """The service people use; every call is made as the user whose token it carries."""

    def __init__(self, scheduler: ClusterScheduler, users: Users) -> None:
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
            return self.scheduler.submit(self._owner(caller, request.user), request)

        return _answer(context, handle)

    def ListJobs(self, request: pb.ListJobsRequest, context: Any) -> pb.ListJobsReply:
        def handle() -> pb.ListJobsReply:
            if request.user and not self.users.open_names and self.users.get(request.user) is None:
                names = ", ".join(user.name for user in self.users.users)
                raise NotFoundError(f"no user {request.user!r} in the users file (users: {names})")
            return self.scheduler.list_jobs(request)

        return _answer(context, handle)

    def ListUsers(self, request: pb.ListUsersRequest, context: Any) -> pb.ListUsersReply:
        def handle() -> pb.ListUsersReply:
            shares = self.scheduler.user_shares(request.window_s or DEFAULT_SHARE_WINDOW_S)
            return pb.ListUsersReply(users=[_user_share(share) for share in shares])

        return _answer(context, handle)

    def CancelJob(self, request: pb.CancelJobRequest, context: Any) -> pb.CancelJobReply:
        def handle() -> pb.CancelJobReply:
            caller = self._caller(context)
            return self.scheduler.cancel(caller.name, caller.admin, request.job_id)

        return _answer(context, handle)

    def WatchJob(self, request: pb.WatchJobRequest, context: Any) -> Iterator[pb.JobUpdate]:
        updates = self.scheduler.watch(request.job_id, context.is_active, request.history_only)
        while True:
            update = _answer(context, lambda: next(updates, None))
            if update is None:
                return
            yield update

    def JobLogs(self, request: pb.JobLogsRequest, context: Any) -> pb.JobLogsReply:
        def handle() -> pb.JobLogsReply:
            caller = self._caller(context)
            owner = self.scheduler.owner_of(request.job_id)
            if not caller.admin and owner != caller.name:
                raise PermissionError_(
                    f"job {request.job_id} belongs to {owner}: only they or an admin may read "
                    "its output"
                )
            return self.scheduler.job_logs(request.job_id, request.max_bytes)

        return _answer(context, handle)


def _window(window: WindowShare) -> pb.ShareWindow:
    return pb.ShareWindow(seconds=window.seconds, gpu_seconds=window.gpu_seconds,
                          share=window.share, fair_share=window.fair_share)  # fmt: skip


def _user_share(share: UserShare) -> pb.UserShare:
    return pb.UserShare(
        user=share.user, weight=share.weight, gpus=share.gpus, share=share.share,
        fair_share=share.fair_share, recent=_window(share.recent),
        since_start=_window(share.since_start),
    )  # fmt: skip


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
    scheduler: ClusterScheduler,
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
