"""Refusals the runtime raises; each adapter answers them in its own terms (gRPC status
codes, HTTP statuses)."""

from __future__ import annotations

from shock.core.errors import ShockError


class RequestError(ShockError):
    """A malformed request (gRPC: INVALID_ARGUMENT)."""


class PreconditionError(ShockError):
    """A well-formed request that does not fit the runtime's state (FAILED_PRECONDITION)."""


class NotFoundError(ShockError):
    """No such job (NOT_FOUND)."""


class PermissionError_(ShockError):
    """The caller may not do this to this job (PERMISSION_DENIED)."""


class ServiceStopped(ShockError):
    """The service was stopped before it could start running jobs."""
