"""The CPU x memory amounts per GPU a placement chooses from: the profile matrix's axes plus
the server's fair share, with dominated cells (no faster than a cell using no more of either
resource) left out. `opt` chooses from these plus `tune`'s capped best case, so it can always
do what `tune` does on one server."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from shock.resources.profiles import ResourceProfile


class Cell(NamedTuple):
    cpus_per_gpu: float
    mem_gb_per_gpu: float
    speed: float


@cache
def candidate_cells(
    profile: ResourceProfile,
    fair: tuple[float, float],
    extra: tuple[float, float] | None = None,
) -> tuple[Cell, ...]:
    """Non-dominated cells, cheapest first. `extra` adds one more point to both axes (tune's
    best case capped at a server), so tune's choice is always one of the cells."""
    points = [fair] if extra is None else [fair, extra]
    cpu_values = sorted({*profile.cpu_axis, *(p[0] for p in points)})
    mem_values = sorted({*profile.mem_axis, *(p[1] for p in points)})
    cells = [Cell(c, m, profile.speed(c, m)) for c in cpu_values for m in mem_values]
    kept = [
        cell
        for cell in cells
        if not any(
            other is not cell
            and other.cpus_per_gpu <= cell.cpus_per_gpu
            and other.mem_gb_per_gpu <= cell.mem_gb_per_gpu
            and (
                other.speed > cell.speed
                or (other.speed == cell.speed and other[:2] != cell[:2])
            )
            for other in cells
        )
    ]
    return tuple(sorted(kept, key=lambda c: (c.cpus_per_gpu, c.mem_gb_per_gpu)))
