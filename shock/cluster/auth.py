"""Peer authentication: a shared token on every call, optionally inside TLS.

The token travels in the `x-shock-token` metadata entry; the server's interceptor refuses a
call without the right one (UNAUTHENTICATED) before any handler runs. TLS (`--tls-cert`,
`--tls-key`, `--tls-ca`) encrypts the channel; with a CA on the server side, clients must
also present a certificate it signed (mutual TLS).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

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


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses every call whose metadata lacks the shared token; with `user_check`, calls to
    the Jobs service need a token it accepts instead (a user's, which may differ)."""

    def __init__(self, token: str, user_check: Callable[[str], bool] | None = None) -> None:
        if not token:
            raise ValueError("the shared token must not be empty")
        self._token = token.encode()
        self._user_check = user_check

        def refuse(request: Any, context: grpc.ServicerContext) -> None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "invalid or missing shock token (x-shock-token): this scheduler refuses the peer",
            )

        self._refusal = grpc.unary_unary_rpc_method_handler(refuse)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        token = call_token(handler_call_details.invocation_metadata)
        if self._user_check is not None and handler_call_details.method.startswith(
            JOBS_SERVICE_PREFIX
        ):
            allowed = bool(token) and self._user_check(token)
        else:
            allowed = hmac.compare_digest(token.encode(), self._token)
        return continuation(handler_call_details) if allowed else self._refusal


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
