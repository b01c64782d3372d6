"""Peer authentication: a shared token on every call, optionally inside TLS.

The token travels in the `x-shock-token` metadata entry; the server's interceptor refuses a
call without the right one (UNAUTHENTICATED) before any handler runs. TLS (`--tls-cert`,
`--tls-key`, `--tls-ca`) encrypts the channel; with a CA on the server side, clients must
also present a certificate it signed (mutual TLS).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from shock.cluster.defaults import TOKEN_ENV
from shock.cluster.oplog import log_event
from shock.cluster.users import Users
from shock.core.errors import InputError

TOKEN_METADATA_KEY = "x-shock-token"
# Methods of the service people use (users' tokens); the Scheduler service is for workers.
JOBS_SERVICE_PREFIX = "/shock.cluster.v1.Jobs/"


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None

    @property
    def enabled(self) -> bool:
        return self.cert is not None or self.ca is not None

    def _read(self, path: Path | None, field: str) -> bytes | None:
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror})", path=path, field=field) from exc

    def server_credentials(self) -> grpc.ServerCredentials:
        cert, key = self._read(self.cert, "--tls-cert"), self._read(self.key, "--tls-key")
        if cert is None or key is None:
            raise InputError("a TLS server needs both --tls-cert and --tls-key", field="--tls-cert")
        ca = self._read(self.ca, "--tls-ca")
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self._read(self.ca, "--tls-ca"),
            private_key=self._read(self.key, "--tls-key"),
            certificate_chain=self._read(self.cert, "--tls-cert"),
        )


def call_token(metadata: Iterable[tuple[str, str | bytes]]) -> str:
    """The token a call carries ('' for none)."""
    for key, value in metadata:
        if key == TOKEN_METADATA_KEY:
            return value if isinstance(value, str) else bytes(value).decode(errors="replace")
    return ""


def token_refusal(cluster_token: str, users: Users | None, method: str, token: str
                  ) -> str | None:  # fmt: skip
    """Why a call with `token` to `method` is refused, in words that say which case it is;
    None when it is allowed. Workers (the Scheduler service) present the cluster token;
    people (the Jobs service) a user's token from the users file (without one, the cluster
    token). The reason never quotes the token."""
    if not token:
        return f"no token given (x-shock-token): pass --token or ${TOKEN_ENV}"
    jobs_call = method.startswith(JOBS_SERVICE_PREFIX)
    is_cluster_token = hmac.compare_digest(token.encode(), cluster_token.encode())
    if not jobs_call or users is None:
        if is_cluster_token:
            return None
        if users is not None and users.identify(token) is not None:
            return ("this is a user's token: a worker presents the cluster token "
                    "(the one `shock serve` was started with)")  # fmt: skip
        return "unknown token: it is not this cluster's token"
    if users.identify(token) is not None:
        return None
    if is_cluster_token:
        return ("this is the cluster (worker) token: with a users file, jobs are submitted "
                "and managed with a user's own token")  # fmt: skip
    for variant, how in ((token + "\n", "followed by a newline"),
                         (token.rstrip("\r\n"), "without its trailing newline")):  # fmt: skip
        user = users.identify(variant) if variant != token else None
        if user is not None:
            return (
                f"unknown token; but user {user.name}'s token_sha256 in the users file is the "
                f"hash of this token {how}: hash it without one, "
                '`printf %s "$TOKEN" | sha256sum` (echo adds a newline)'
            )
    return "unknown token: no user in the users file has it"


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses every call whose token is not accepted for its service (UNAUTHENTICATED),
    before any handler runs, saying why and logging it. `users`: who may call the Jobs
    service (None: the holders of the cluster token)."""

    def __init__(self, token: str, users: Users | None = None) -> None:
        if not token:
            raise ValueError("the shared token must not be empty")
        self._token = token
        self._users = users

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        token = call_token(handler_call_details.invocation_metadata)
        method = handler_call_details.method
        reason = token_refusal(self._token, self._users, method, token)
        if reason is None:
            return continuation(handler_call_details)
        return _refusal(method, reason)


def _refusal(method: str, reason: str) -> grpc.RpcMethodHandler:
    def refuse(request: Any, context: grpc.ServicerContext) -> None:
        log_event("token-refused", f"refused {method.rsplit('/', 1)[-1]} from "
                  f"{context.peer()}: {reason}", logging.WARNING, method=method,
                  peer=context.peer(), reason=reason)  # fmt: skip
        context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)

    if method.endswith("/WatchJob"):
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)


# gRPC backs off exponentially (up to 2 minutes) between reconnection attempts; a worker must
# find a restarted scheduler within its dead-after time, so retries stay at most 1 s apart.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def open_channel(address: str, tls: TlsFiles | None = None) -> grpc.Channel:
    if tls is not None and tls.enabled:
        return grpc.secure_channel(address, tls.channel_credentials(), options=_CHANNEL_OPTIONS)
    return grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)


def token_metadata(token: str) -> tuple[tuple[str, str], ...]:
    return ((TOKEN_METADATA_KEY, token),)
