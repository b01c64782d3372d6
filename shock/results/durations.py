"""How durations read in shock's tables (the run summary, comparisons, reports)."""

from __future__ import annotations


def readable_duration(seconds: float) -> str:
    """A duration in the unit that keeps three significant figures readable: seconds for a
    short cluster run, minutes, then hours for trace-scale simulations."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:,.2f} h"
