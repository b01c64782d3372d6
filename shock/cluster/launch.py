"""The CPU and memory grant a `Launch` carries: a resource-aware placement's grant (Synergy)
cut down to what the launched job process may use.

A unit on one GPU, or launched as one process, gets the grant's part on the server holding
its first GPU; a gang's rank (one process per GPU) gets its GPU's share of the part on its
server. The members of a packed unit share their unit's grant equally.
"""

from __future__ import annotations

from shock.core.executor import PlannedUnit


def launch_grant(unit: PlannedUnit | None, gpu: int | None = None) -> dict[str, float]:
    """The `Launch` fields `cpus` and `memory_gb` for one member of a planned unit; empty
    (no grant: the job runs unbounded) without a resource-aware placement. `gpu`: the global
    GPU of one rank of a gang; None: the whole unit's part on its first GPU's server."""
    if unit is None or unit.grant is None or not unit.gpus:
        return {}
    held = unit.gpus[0] if gpu is None else gpu
    parts = [part for part in unit.grant.parts if held in part.gpus]
    if not parts:
        return {}
    sharing = max(1, len(unit.job_ids))
    # A rank holds one of its part's GPUs: that GPU's share of the part.
    share = [1.0 if gpu is None else 1.0 / max(1, len(part.gpus)) for part in parts]
    return {
        "cpus": sum(part.cpus * s for part, s in zip(parts, share, strict=True)) / sharing,
        "memory_gb": sum(part.memory_gb * s for part, s in zip(parts, share, strict=True))
        / sharing,
    }
