"""What goodput-aware policies remember between rounds to price re-allocations.

Changing a running job's GPUs restarts it from a checkpoint, which costs it `penalty_s`
seconds. Pollux and Sia discount the goodput of any allocation other than a job's current
one by

    factor = max(age - restarts x penalty_s, 0) / (age + penalty_s)

where `age` is the time since the job arrived and `restarts` how often it has been
re-allocated: a young or often-restarted job gains little from moving. Sia leaves a job
younger than `penalty_s` undiscounted (it has not settled anywhere yet).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def restart_factor(age_s: float, restarts: int, penalty_s: float) -> float:
    """The discount on a re-allocation's goodput (1: none)."""
    if penalty_s <= 0:
        return 1.0
    return max(age_s - restarts * penalty_s, 0.0) / (age_s + penalty_s)


@dataclass
class RestartLedger:
    """Per job: its current grant (any hashable description of its GPUs, None: none) and how
    many times it has been re-allocated since its first grant."""

    current: dict[int, Hashable] = field(default_factory=dict)
    restarts: dict[int, int] = field(default_factory=dict)

    def record(self, job_id: int, grant: Hashable | None) -> None:
        """Note this round's grant of a job; a changed non-empty grant after its first is a
        restart (losing all GPUs is not: the job stops, as any preempted job does)."""
        before = self.current.get(job_id)
        if grant is not None and before is not None and grant != before:
            self.restarts[job_id] = self.restarts.get(job_id, 0) + 1
        elif grant is not None and job_id not in self.restarts:
            self.restarts[job_id] = 0
        if grant is None:
            self.current.pop(job_id, None)
        else:
            self.current[job_id] = grant

    def forget_all_but(self, job_ids: Iterable[int]) -> None:
        """Drop jobs that have left."""
        keep = set(job_ids)
        self.current = {j: g for j, g in self.current.items() if j in keep}
        self.restarts = {j: n for j, n in self.restarts.items() if j in keep}

    def snapshot(self, encode: Any = lambda grant: grant) -> dict[str, Any]:
        return {
            "current": {str(j): encode(g) for j, g in self.current.items()},
            "restarts": {str(j): n for j, n in self.restarts.items()},
        }

    @classmethod
    def from_snapshot(
        cls, data: Mapping[str, Any], decode: Any = lambda value: value
    ) -> RestartLedger:
        return cls(
            current={int(j): decode(g) for j, g in data["current"].items()},
            restarts={int(j): int(n) for j, n in data["restarts"].items()},
        )
