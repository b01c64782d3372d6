"""A client of the Jobs service (what `shock submit`, `jobs`, `cancel`, `logs`, `watch` use).

Each call carries the user's token; a refusal becomes a ShockError that says why, in the
service's words (never a gRPC traceback).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc

from shock.cluster import grpc_wire as wire
from shock.cluster.auth import TlsFiles, open_channel, token_metadata
from shock.cluster.defaults import with_default_port
from shock.cluster.fairness import UserShare
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.runtime.job_messages import JobStatus, JobUpdate, Submission
from shock.cluster.runtime.messages import RunLog
from shock.core.errors import ShockError

_TIMEOUT_S = 30.0
Reply = TypeVar("Reply")

_WHY = {
    grpc.StatusCode.UNAUTHENTICATED: "refused",
    grpc.StatusCode.PERMISSION_DENIED: "not allowed",
    grpc.StatusCode.NOT_FOUND: "not found",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid request",
    grpc.StatusCode.FAILED_PRECONDITION: "refused",
    grpc.StatusCode.UNAVAILABLE: "unreachable",
    grpc.StatusCode.DEADLINE_EXCEEDED: "no answer in time",
}


class JobsClient:
    def __init__(self, address: str, token: str, tls: TlsFiles | None = None) -> None:
        self.address = with_default_port(address)
        self._channel = open_channel(self.address, tls)
        self._stub = pb_grpc.JobsStub(self._channel)
        self._metadata = token_metadata(token)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> JobsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, call: Callable[[], Reply]) -> Reply:
        try:
            return call()
        except grpc.RpcError as exc:
            raise self._error(exc) from None

    def _error(self, exc: grpc.RpcError) -> ShockError:
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else str(exc)
        why = _WHY.get(code, str(code))
        return ShockError(f"scheduler {self.address}: {why}: {details}")

    def submit(self, submission: Submission) -> int:
        request = wire.submission_to_pb(submission)
        reply = self._call(
            lambda: self._stub.SubmitJob(request, metadata=self._metadata, timeout=_TIMEOUT_S)
        )
        return int(reply.job_id)

    def jobs(self, job_ids: list[int] | None = None, user: str = "") -> list[JobStatus]:
        request = pb.ListJobsRequest(job_ids=job_ids or [], user=user)
        reply = self._call(
            lambda: self._stub.ListJobs(request, metadata=self._metadata, timeout=_TIMEOUT_S)
        )
        return [wire.status_from_pb(job) for job in reply.jobs]

    def cancel(self, job_id: int) -> JobStatus:
        request = pb.CancelJobRequest(job_id=job_id)
        reply = self._call(
            lambda: self._stub.CancelJob(request, metadata=self._metadata, timeout=_TIMEOUT_S)
        )
        return wire.status_from_pb(reply.job)

    def logs(self, job_id: int, max_bytes: int = 0) -> list[RunLog]:
        request = pb.JobLogsRequest(job_id=job_id, max_bytes=max_bytes)
        reply = self._call(
            lambda: self._stub.JobLogs(request, metadata=self._metadata, timeout=_TIMEOUT_S)
        )
        return [wire.run_log_from_pb(log) for log in reply.logs]

    def users(self, window_s: float = 0.0) -> list[UserShare]:
        request = pb.ListUsersRequest(window_s=window_s)
        reply = self._call(
            lambda: self._stub.ListUsers(request, metadata=self._metadata, timeout=_TIMEOUT_S)
        )
        return [wire.user_share_from_pb(share) for share in reply.users]

    def watch(self, job_id: int, history_only: bool = False) -> Iterator[JobUpdate]:
        request = pb.WatchJobRequest(job_id=job_id, history_only=history_only)
        stream = self._stub.WatchJob(request, metadata=self._metadata)
        try:
            for update in stream:
                yield wire.update_from_pb(update)
        except grpc.RpcError as exc:
            raise self._error(exc) from None
        finally:
            stream.cancel()
