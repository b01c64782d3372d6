"""The CPU and memory grant a `Launch` carries: a resource-aware placement's grant (Synergy)
cut down to what the launched job process may use.

The cluster launches a unit as one process on the worker holding its first GPU (one worker
is one server of the mechanism's cluster), so the job gets the grant's part on that server;
the members of a packed unit share their unit's grant equally.
"""

from __future__ import annotations

from shock.core.executor import PlannedUnit


def launch_grant(unit: PlannedUnit | None) -> dict[str, float]:
    """The `Launch` fields `cpus` and `memory_gb` for one member of a planned unit; empty
    (no grant: the job runs unbounded) without a resource-aware placement."""
    if unit is None or unit.grant is None or not unit.gpus:
        return {}
    first_gpu = unit.gpus[0]
    parts = [part for part in unit.grant.parts if first_gpu in part.gpus]
    if not parts:
        return {}
    sharing = max(1, len(unit.job_ids))
    return {
        "cpus": sum(part.cpus for part in parts) / sharing,
        "memory_gb": sum(part.memory_gb for part in parts) / sharing,
    }
