"""The Ray cluster as shock sees it: each worker type is a Ray custom resource (`{"v100": 2}`
on a node with two V100s), and every (node, worker type) pair is one server of the engine's
cluster. Importing this module does not import Ray."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Resources Ray declares itself (or for placement groups): never a worker type.
_RAY_OWN = frozenset({"CPU", "GPU", "TPU", "memory", "object_store_memory"})
_RAY_OWN_PREFIXES = ("node:", "accelerator_type:")
_GROUP_RESOURCE = re.compile(r".*_group_([0-9]+_)?[0-9a-f]{16,}$")
_WORKER_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_GIB = 2**30


@dataclass(frozen=True, slots=True)
class RayWorker:
    """One worker type's GPUs on one Ray node."""

    worker_id: str  # "v100@1a2b3c4d": the type and the node's id
    node_id: str
    gpu_type: str
    gpus: int
    cpus: float  # the node's CPUs, shared by its worker types in proportion to their GPUs
    memory_gb: float
    cuda: bool  # the node has as many Ray GPUs as it has GPUs of its worker types


def parse_local_gpus(text: str) -> dict[str, int]:
    """`"v100=2,k80=2"` -> `{"v100": 2, "k80": 2}` (ValueError naming what is wrong)."""
    counts: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, count = item.partition("=")
        name = name.strip()
        if not sep or not _WORKER_TYPE.fullmatch(name):
            raise ValueError(f"--local-gpus: '{item}' is not TYPE=COUNT (e.g. v100=2)")
        if not is_worker_type(name):
            raise ValueError(f"--local-gpus: '{name}' is one of Ray's own resources")
        try:
            number = int(count)
        except ValueError:
            raise ValueError(f"--local-gpus: '{item}': the count must be an integer") from None
        if number < 1:
            raise ValueError(f"--local-gpus: '{item}': the count must be >= 1")
        if name in counts:
            raise ValueError(f"--local-gpus: type '{name}' given twice")
        counts[name] = number
    if not counts:
        raise ValueError("--local-gpus: name at least one TYPE=COUNT (e.g. v100=2)")
    return counts


def is_worker_type(resource: str) -> bool:
    """Whether a Ray resource name can be a worker type (not one of Ray's own)."""
    return (
        resource not in _RAY_OWN
        and not resource.startswith(_RAY_OWN_PREFIXES)
        and not _GROUP_RESOURCE.fullmatch(resource)
        and _WORKER_TYPE.fullmatch(resource) is not None
    )


def workers_of_nodes(
    nodes: Iterable[Mapping[str, Any]], gpu_types: frozenset[str] | None = None
) -> list[RayWorker]:
    """The live nodes' workers (as `ray.nodes()` lists nodes), by node id then type.
    `gpu_types`: the resources that are worker types (None: every custom resource whose
    count is a whole number)."""
    workers = []
    for node in nodes:
        if not node.get("Alive"):
            continue
        node_id = str(node["NodeID"])
        resources: Mapping[str, float] = node.get("Resources") or {}
        counts = {
            name: int(value)
            for name, value in resources.items()
            if (name in gpu_types if gpu_types is not None else is_worker_type(name))
            and value >= 1
            and float(value).is_integer()
        }
        total = sum(counts.values())
        cuda = total > 0 and resources.get("GPU", 0) >= total
        for gpu_type, gpus in sorted(counts.items()):
            share = gpus / total
            workers.append(
                RayWorker(
                    worker_id=f"{gpu_type}@{node_id[:8]}",
                    node_id=node_id,
                    gpu_type=gpu_type,
                    gpus=gpus,
                    cpus=float(resources.get("CPU", 0.0)) * share,
                    memory_gb=float(resources.get("memory", 0.0)) / _GIB * share,
                    cuda=cuda,
                )
            )
    return sorted(workers, key=lambda w: (w.node_id, w.gpu_type))
