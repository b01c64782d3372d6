"""The limits a job process runs under, read by the process itself, so that the "started"
line reports what was applied rather than what was asked for (docs/workloads.md)."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    threads: int  # torch intra-op threads
    cpus: tuple[int, ...]  # the CPUs it may run on; empty where the OS cannot tell
    memory_limit_bytes: int | None  # its RLIMIT_DATA soft limit; None: unlimited


def observed_limits(threads: int) -> ProcessLimits:
    """This process's limits; `threads` is torch's thread count (torch.get_num_threads())."""
    cpus: tuple[int, ...] = ()
    if hasattr(os, "sched_getaffinity"):
        cpus = tuple(sorted(os.sched_getaffinity(0)))
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return ProcessLimits(threads, cpus, None if soft == resource.RLIM_INFINITY else soft)
