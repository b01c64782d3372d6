"""Resource-aware placement: GPUs and also CPU cores and DRAM per unit (Synergy).

An optional extension of `shock.core.placement.Placement`: a placement with
`resource_aware = True` also implements `place_with_resources`, and the mechanism then calls
that instead of `place`, every round (no lease shortcut: resources move as jobs come and go).
A grant's `speed` multiplies the unit's throughput from the table, which is taken to be the
throughput at the fair share (GPU-proportional CPUs and memory).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from shock.core.model import JobSpec, Server
from shock.core.policy import UnitKey

# Synergy's fair share per GPU (its default 3 CPU : 1 GPU cluster, 500 GB per 8 GPUs); servers
# of a cluster given as GPU counts only are taken to have this much per GPU.
DEFAULT_CPUS_PER_GPU = 3.0
DEFAULT_MEM_GB_PER_GPU = 62.5


class ServerResources(NamedTuple):
    """A server's GPU ids of one worker type and its CPU and memory capacity."""

    server_id: int
    gpus: tuple[int, ...]
    cpus: float
    memory_gb: float

    @property
    def fair_cpus_per_gpu(self) -> float:
        return self.cpus / len(self.gpus)

    @property
    def fair_mem_gb_per_gpu(self) -> float:
        return self.memory_gb / len(self.gpus)

    @classmethod
    def of(cls, server: Server, gpus: tuple[int, ...]) -> ServerResources:
        cpus = server.cpus if server.cpus > 0 else DEFAULT_CPUS_PER_GPU * len(gpus)
        memory = server.memory_gb if server.memory_gb > 0 else DEFAULT_MEM_GB_PER_GPU * len(gpus)
        return cls(server.server_id, gpus, cpus, memory)


class ResourceRequest(NamedTuple):
    key: UnitKey
    scale_factor: int
    job_type: str  # the (first) job's type: what its resource profile is looked up by
    previous_gpus: tuple[int, ...] | None  # GPUs of this worker type it had last round
    # (CPUs, GB) per GPU the job asked for, where its trace records requests; None: its
    # profile's best case.
    demand: tuple[float | None, float | None] | None = None


class GrantPart(NamedTuple):
    """What a unit holds on one server."""

    server_id: int
    gpus: tuple[int, ...]
    cpus: float
    memory_gb: float


class ResourceGrant(NamedTuple):
    parts: tuple[GrantPart, ...]
    speed: float  # throughput relative to the fair share

    @property
    def gpus(self) -> tuple[int, ...]:
        parts = self.parts
        if len(parts) == 1:  # on one server: its GPUs as they are (read for every unit placed)
            gpus = parts[0].gpus
            if type(gpus) is tuple:
                return gpus
        return tuple(gpu for part in parts for gpu in part.gpus)

    @property
    def cpus(self) -> float:
        return sum(part.cpus for part in self.parts)

    @property
    def memory_gb(self) -> float:
        return sum(part.memory_gb for part in self.parts)


class ResourcePlacement(Protocol):
    name: str
    description: str
    extends_leases: bool
    resource_aware: bool  # True

    def place_with_resources(
        self, servers: list[ServerResources], requests: list[ResourceRequest]
    ) -> dict[UnitKey, ResourceGrant]:
        """Grant GPUs, CPUs and memory to requests (in priority order) without exceeding any
        server's capacity. The caller guarantees the GPU counts fit; a request left out of the
        result does not run this round."""
        ...


def requested_per_gpu(spec: JobSpec) -> tuple[float | None, float | None] | None:
    """The (CPUs, GB) per GPU a job's trace asked for; None where it records neither (a None
    part: that resource's request is not recorded)."""
    if spec.cpus is None and spec.memory_gb is None:
        return None
    gpus = max(1, spec.scale_factor)
    cpus = None if spec.cpus is None else spec.cpus / gpus
    memory = None if spec.memory_gb is None else spec.memory_gb / gpus
    return cpus, memory
