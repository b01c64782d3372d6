"""A job's lease: how many more steps and/or seconds it may train before it must stop."""

from __future__ import annotations

import math
from dataclasses import dataclass

# The job asks for renewal when at most this fraction of its current lease is left.
RENEWAL_FRACTION = 0.1


@dataclass(slots=True)
class Lease:
    end_step: int | None = None
    deadline: float | None = None
    granted_steps: int | None = None
    granted_seconds: float | None = None
    renewal_requested: bool = False

    def grant(self, steps: int | None, seconds: float | None, step: int, now: float) -> None:
        """Extend by `steps` more steps and `seconds` more seconds from now; None: unlimited."""
        if steps is None:
            self.end_step = None
        else:
            start = step if self.end_step is None else max(self.end_step, step)
            self.end_step = start + steps
        self.deadline = None if seconds is None else now + seconds
        self.granted_steps = steps
        self.granted_seconds = seconds
        self.renewal_requested = False

    def expired(self, step: int, now: float) -> bool:
        return (self.end_step is not None and step >= self.end_step) or (
            self.deadline is not None and now >= self.deadline
        )

    def wants_renewal(self, step: int, now: float) -> bool:
        """True once per lease, when at most 10% of its steps or seconds are left."""
        if self.renewal_requested:
            return False
        near = False
        if self.end_step is not None and self.granted_steps is not None:
            margin = max(1, math.ceil(RENEWAL_FRACTION * self.granted_steps))
            near = self.end_step - step <= margin
        if self.deadline is not None and self.granted_seconds is not None:
            near = near or self.deadline - now <= RENEWAL_FRACTION * self.granted_seconds
        return near
