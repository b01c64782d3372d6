"""The JSON-lines messages between a training job and its worker agent (docs/workloads.md).

Job -> agent messages are dataclasses with a `type`; agent -> job commands are parsed, with a
clear error for anything malformed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from shock.job.limits import ProcessLimits

ExitReason = Literal["done", "lease_expired", "preempted"]
AdaptationReason = Literal["accordion", "gns"]


class ProtocolError(ValueError):
    """An agent -> job message that does not follow the contract."""


@dataclass(frozen=True, slots=True)
class _Message:
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True, slots=True)
class Started(_Message):
    type: ClassVar[str] = "started"
    job_id: int
    step: int
    batch_size: int
    resumed_from_step: int
    # Beyond the contract: the threads, CPUs and memory limit the process runs under.
    limits: ProcessLimits | None = None

    def to_dict(self) -> dict[str, Any]:
        message = {"type": self.type, **asdict(self)}
        if self.limits is None:
            del message["limits"]
        return message


@dataclass(frozen=True, slots=True)
class Progress(_Message):
    type: ClassVar[str] = "progress"
    step: int
    steps_per_s: float
    batch_size: int
    loss: float | None  # None when the loss is not finite (a diverged run)
    # Beyond the contract's four fields: the (possibly rescaled) step target and samples done.
    target_steps: int
    samples: int


@dataclass(frozen=True, slots=True)
class LeaseRequest(_Message):
    type: ClassVar[str] = "lease_request"
    step: int


@dataclass(frozen=True, slots=True)
class BatchSizeRequest(_Message):
    type: ClassVar[str] = "batch_size_request"
    step: int
    batch_size: int
    reason: AdaptationReason


@dataclass(frozen=True, slots=True)
class CheckpointWritten(_Message):
    type: ClassVar[str] = "checkpoint"
    step: int
    path: str


@dataclass(frozen=True, slots=True)
class Exit(_Message):
    type: ClassVar[str] = "exit"
    reason: ExitReason
    step: int
    target_steps: int


@dataclass(frozen=True, slots=True)
class Error(_Message):
    type: ClassVar[str] = "error"
    message: str


JobMessage = Started | Progress | LeaseRequest | BatchSizeRequest | CheckpointWritten | Exit | Error


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """Extend the lease by `steps` more steps, `seconds` more seconds from now (None: no limit)."""

    steps: int | None = None
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Preempt:
    pass


@dataclass(frozen=True, slots=True)
class BatchSizeApproval:
    batch_size: int


Command = LeaseGrant | Preempt | BatchSizeApproval


def parse_command(raw: object) -> Command:
    """One decoded JSON object from the agent -> a command; ProtocolError names the field."""
    if not isinstance(raw, dict):
        raise ProtocolError(f"expected a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    if kind == "preempt":
        return Preempt()
    if kind == "lease":
        return LeaseGrant(
            steps=_optional_int(raw, "steps", minimum=0),
            seconds=_optional_seconds(raw, "seconds"),
        )
    if kind == "batch_size":
        batch_size = _optional_int(raw, "batch_size", minimum=1)
        if batch_size is None:
            raise ProtocolError("field 'batch_size': required for a batch_size message")
        return BatchSizeApproval(batch_size)
    raise ProtocolError(f"field 'type': unknown message type {kind!r} (lease, preempt, batch_size)")


def _optional_int(raw: dict[str, Any], name: str, minimum: int) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProtocolError(f"field {name!r}: expected an integer >= {minimum}, got {value!r}")
    return value


def _optional_seconds(raw: dict[str, Any], name: str) -> float | None:
    value = raw.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ProtocolError(f"field {name!r}: expected a number of seconds >= 0, got {value!r}")
    return float(value)
