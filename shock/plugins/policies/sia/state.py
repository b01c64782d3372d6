"""What Sia remembers of each job between rounds, as its artifact's scheduler and job do.

- its current configuration (None: no GPUs) and when it last changed, so that a job still
  checkpointing and restoring keeps its GPUs;
- how often it was (re)started after its first start: every change of configuration, and
  every return after a round without GPUs (the restart discount counts them);
- the GPU types it has run on and the most GPUs it has run on: Sia knows a job's goodput on a
  GPU type only once it ran there (elsewhere it projects), and lets it grow to at most twice
  the GPUs it has run on (its bootstrapping).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Config:
    worker: int  # column of the worker type
    num_nodes: int
    gpus: int


@dataclass
class SiaLedger:
    current: dict[int, Config] = field(default_factory=dict)
    changed_at: dict[int, float] = field(default_factory=dict)
    restarts: dict[int, int] = field(default_factory=dict)
    ran_on: dict[int, set[int]] = field(default_factory=dict)
    most_gpus: dict[int, int] = field(default_factory=dict)

    def record(self, job_id: int, config: Config | None, now: float) -> None:
        before = self.current.get(job_id)
        if config is None:
            self.current.pop(job_id, None)
            return
        if config != before:
            if job_id in self.ran_on:
                self.restarts[job_id] = self.restarts.get(job_id, 0) + 1
            else:
                self.restarts[job_id] = 0
            self.changed_at[job_id] = now
        self.current[job_id] = config
        self.ran_on.setdefault(job_id, set()).add(config.worker)
        self.most_gpus[job_id] = max(self.most_gpus.get(job_id, 0), config.gpus)

    def restarting(self, job_id: int, now: float, restart_s: float) -> bool:
        """Whether the job is still checkpointing/restoring after its last change."""
        return job_id in self.current and now - self.changed_at.get(job_id, -1e300) < restart_s

    def forget_all_but(self, job_ids: Iterable[int]) -> None:
        keep = set(job_ids)
        for table in (self.current, self.changed_at, self.restarts, self.ran_on, self.most_gpus):
            for job_id in [j for j in table if j not in keep]:
                del table[job_id]

    def snapshot(self) -> dict[str, Any]:
        return {
            "current": {str(j): [c.worker, c.num_nodes, c.gpus] for j, c in self.current.items()},
            "changed_at": {str(j): t for j, t in self.changed_at.items()},
            "restarts": {str(j): n for j, n in self.restarts.items()},
            "ran_on": {str(j): sorted(w) for j, w in self.ran_on.items()},
            "most_gpus": {str(j): n for j, n in self.most_gpus.items()},
        }

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any]) -> SiaLedger:
        # Snapshots written before the bootstrapping state existed hold only the first two.
        return cls(
            current={int(j): Config(*map(int, c)) for j, c in data["current"].items()},
            changed_at={int(j): float(t) for j, t in data.get("changed_at", {}).items()},
            restarts={int(j): int(n) for j, n in data["restarts"].items()},
            ran_on={int(j): {int(w) for w in ws} for j, ws in data.get("ran_on", {}).items()},
            most_gpus={int(j): int(n) for j, n in data.get("most_gpus", {}).items()},
        )
