"""The gRPC face of the scheduler: request checks, error replies, the server itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from shock.cluster.auth import TlsFiles, TokenInterceptor
from shock.cluster.defaults import DEFAULT_HOST
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.scheduler import ClusterScheduler, PreconditionError, RequestError
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
    threads: int = 128,  # each worker holds one in its long-poll heartbeat
) -> tuple[grpc.Server, int]:
    """Start serving; returns the server and the port it bound."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        interceptors=[TokenInterceptor(token)],
    )
    pb_grpc.add_SchedulerServicer_to_server(SchedulerServicer(scheduler), server)
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
