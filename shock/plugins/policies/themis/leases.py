"""The arbiter's lease book: which job holds what share of which worker type, until when.

A lease gives job j a fraction x of the time of s_j GPUs of one worker type (x = 1: the
gang's GPUs outright; x < 1 after a hidden payment, or for a leftover grant of a GPU
remainder). It holds until `expires_s`, or until the job leaves; only then does its share
return to the arbiter to be offered again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

# Shares below this are rounding noise, not a lease.
SHARE_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Lease:
    job_id: int
    worker_type: str
    fraction: float  # of the time of the job's gang on that type
    gpus: float  # fraction x scale factor: the GPU capacity it takes
    granted_s: float
    expires_s: float
    # How it was granted: "auction" (a winning bid, after its hidden payment) or "leftover".
    kind: str = "auction"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Lease:
        return cls(
            job_id=int(data["job_id"]),
            worker_type=str(data["worker_type"]),
            fraction=float(data["fraction"]),
            gpus=float(data["gpus"]),
            granted_s=float(data["granted_s"]),
            expires_s=float(data["expires_s"]),
            kind=str(data["kind"]),
        )


@dataclass
class LeaseBook:
    leases: list[Lease] = field(default_factory=list)

    def release(self, now: float, active: Iterable[int]) -> list[Lease]:
        """Return expired leases and those of jobs that left; they are removed from the book."""
        active_ids = set(active)
        kept: list[Lease] = []
        released: list[Lease] = []
        for lease in self.leases:
            if lease.expires_s <= now or lease.job_id not in active_ids:
                released.append(lease)
            else:
                kept.append(lease)
        self.leases = kept
        return released

    def grant(self, lease: Lease) -> None:
        if lease.fraction > SHARE_EPS:
            self.leases.append(lease)

    def held_gpus(self, worker_types: tuple[str, ...]) -> np.ndarray:
        """GPU capacity under lease, per worker type."""
        index = {w: c for c, w in enumerate(worker_types)}
        held = np.zeros(len(worker_types))
        for lease in self.leases:
            if lease.worker_type in index:
                held[index[lease.worker_type]] += lease.gpus
        return held

    def fractions(self, job_ids: tuple[int, ...], worker_types: tuple[str, ...]) -> np.ndarray:
        """The allocation the leases make: x[j, w] = the job's leased time fraction on w."""
        rows = {j: r for r, j in enumerate(job_ids)}
        columns = {w: c for c, w in enumerate(worker_types)}
        x = np.zeros((len(job_ids), len(worker_types)))
        for lease in self.leases:
            r, c = rows.get(lease.job_id), columns.get(lease.worker_type)
            if r is not None and c is not None:
                x[r, c] += lease.fraction
        return x

    def holders(self) -> set[int]:
        return {lease.job_id for lease in self.leases}

    def to_json(self) -> list[dict[str, Any]]:
        return [lease.to_json() for lease in self.leases]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> LeaseBook:
        return cls([Lease.from_json(item) for item in data])
