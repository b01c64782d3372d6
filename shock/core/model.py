"""The domain model: jobs as a trace describes them, and the cluster they run on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BATCH_SIZE = re.compile(r"\(batch size (\d+)\)")


def model_family_of(job_type: str) -> str:
    """The model family is the job-type text before the first space (`ResNet-18`)."""
    return job_type.split(" ", 1)[0]


def batch_size_of(job_type: str) -> int | None:
    """The batch size in a job type (`LM (batch size 20)` -> 20); None when it has none."""
    match = _BATCH_SIZE.search(job_type)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a trace, with every column the Gavel and Shockwave formats carry."""

    job_id: int
    job_type: str
    total_steps: int
    scale_factor: int = 1
    arrival_time: float = 0.0
    priority_weight: float = 1.0
    slo: float | None = None
    command: str = ""
    working_directory: str = ""
    num_steps_arg: str = ""
    needs_data_dir: bool = False
    # Shockwave's columns: adaptation mode and isolated run time at the initial batch size.
    mode: str = "static"
    duration: float | None = None
    # Where the job came from, so later errors can name the trace line.
    source_line: int | None = None
    # The user or group the job belongs to (hierarchical policies); None: the default entity.
    entity: str | None = None
    # CPU cores and DRAM (GB) the job asked for in all, where its trace records them (an
    # imported production trace); None: its model's profile decides.
    cpus: float | None = None
    memory_gb: float | None = None
    # An elastic job may run on any GPU count and batch size an elastic policy grants it,
    # within its batch limits (Pollux's workload CSVs mark every job elastic); a job that is
    # not keeps its scale factor and batch size.
    elastic: bool = False

    @property
    def model_family(self) -> str:
        return model_family_of(self.job_type)

    @property
    def batch_size(self) -> int | None:
        return batch_size_of(self.job_type)


@dataclass(frozen=True, slots=True)
class Server:
    """A machine with GPUs of one type and, where a cluster file gives them, its CPU cores,
    DRAM and storage bandwidth (0: not modelled)."""

    server_id: int
    worker_type: str
    num_gpus: int
    cpus: float = 0.0
    memory_gb: float = 0.0
    storage_mbps: float = 0.0


@dataclass(frozen=True, slots=True)
class Cluster:
    """GPUs by worker type, grouped into servers.

    GPU ids are global and contiguous per server, so a job on consecutive ids of one server
    is consolidated.
    """

    gpus_per_type: dict[str, int]
    gpus_per_server: dict[str, int] = field(default_factory=dict)
    # Servers given one by one (a cluster file); when set they replace the uniform split.
    explicit_servers: tuple[Server, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        for worker_type, count in self.gpus_per_type.items():
            if count < 0:
                raise ValueError(f"negative GPU count for {worker_type}")
            per_server = self.gpus_per_server.get(worker_type, 1)
            if per_server < 1:
                raise ValueError(f"GPUs per server for {worker_type} must be >= 1")

    @property
    def worker_types(self) -> tuple[str, ...]:
        """Worker types that have at least one GPU, sorted by name as Gavel orders them (its
        tie-breaks depend on this order)."""
        return tuple(sorted(w for w, n in self.gpus_per_type.items() if n > 0))

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus_per_type.values())

    @property
    def has_server_resources(self) -> bool:
        """Whether servers carry CPU and memory capacities (a cluster file)."""
        return any(s.cpus > 0 and s.memory_gb > 0 for s in self.explicit_servers)

    def servers(self) -> list[Server]:
        if self.explicit_servers:
            # Grouped by worker type like the uniform split, so GPU ids stay contiguous.
            ordered = sorted(self.explicit_servers, key=lambda s: (s.worker_type, s.server_id))
            return [s for s in ordered if s.worker_type in self.worker_types]
        servers: list[Server] = []
        for worker_type in self.worker_types:
            count = self.gpus_per_type[worker_type]
            per_server = self.gpus_per_server.get(worker_type, 1)
            full, rest = divmod(count, per_server)
            sizes = [per_server] * full + ([rest] if rest else [])
            for size in sizes:
                servers.append(Server(len(servers), worker_type, size))
        return servers

    def describe(self) -> str:
        counts = ",".join(f"{w}={self.gpus_per_type[w]}" for w in self.worker_types)
        return f"{self.name} ({counts})" if self.name else counts
