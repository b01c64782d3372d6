"""Bounds on a job process from its launch's CPU and memory grant (docs/cluster.md, "CPU and
memory grants").

A grant of `cpus` CPUs gives the job n = max(1, floor(cpus)) torch / OpenMP / MKL threads and,
where the OS has CPU affinity (Linux), n of the CPUs the agent itself may run on: the ones the
fewest running jobs of this agent hold, so concurrent jobs get distinct CPUs while there are
enough. A grant of `memory_gb` becomes an RLIMIT_DATA of the grant plus a headroom for the
runtime (Linux). RLIMIT_DATA, not RLIMIT_AS: it counts the private writable memory a job
allocates (heap, tensors, thread stacks), not the address space that shared libraries and
reservations take (a CUDA process reserves tens of GiB of address space for unified
addressing, so an address-space limit would refuse CUDA, not bound memory).

A cold process gets its bounds between fork and exec (everything it runs inherits them); a
warm one, already running, gets them from the agent before its launch line (`prlimit` and
the affinity of each of its threads). A bound that cannot be applied is skipped: the job runs
anyway and the agent logs one warning per kind of bound.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import resource
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)

GIB = 2**30
# Memory for the runtime on top of a job's grant: a training CPU job of the bundled workloads
# (Python, torch, model, optimiser) holds 0.30-0.41 GiB of private writable memory; CUDA's
# host-side state takes more. Grants are meant for the job's data (Synergy's DRAM share), not
# its interpreter.
DEFAULT_MEMORY_HEADROOM_GB = 2.0
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True, slots=True)
class JobBounds:
    """What a job process is bounded to; None: not bounded in that resource."""

    threads: int | None = None
    cpus: tuple[int, ...] | None = None  # the CPUs it may run on
    memory_bytes: int | None = None  # its RLIMIT_DATA

    @property
    def bounded(self) -> bool:
        return (self.threads, self.cpus, self.memory_bytes) != (None, None, None)


UNBOUNDED = JobBounds()


def threads_for(cpus: float) -> int:
    """Threads for a grant of `cpus` CPUs (> 0): whole CPUs, at least one."""
    return max(1, math.floor(cpus))


def memory_limit_bytes(memory_gb: float, headroom_gb: float) -> int:
    return int((memory_gb + headroom_gb) * GIB)


def pick_cpus(
    count: int, available: Iterable[int], held: Iterable[tuple[int, ...]]
) -> tuple[int, ...]:
    """`count` CPUs of `available`, those held by the fewest of the running jobs' CPU sets
    `held` first (then the lowest numbers): distinct CPUs per job while there are enough."""
    uses = Counter(cpu for cpus in held for cpu in cpus)
    ranked = sorted(available, key=lambda cpu: (uses[cpu], cpu))
    return tuple(sorted(ranked[:count]))


def thread_environment(base: dict[str, str], bounds: JobBounds) -> dict[str, str]:
    """The environment of a cold job process: the threading libraries' variables set to its
    thread count, so native libraries imported before torch's own setting follow it too."""
    if bounds.threads is None:
        return base
    return base | {name: str(bounds.threads) for name in THREAD_VARIABLES}


def _data_limit(memory_bytes: int) -> tuple[int, int]:
    """(soft, hard) RLIMIT_DATA: the bound, or the agent's own hard limit if that is lower
    (an unprivileged process cannot raise it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    return limit, limit


def apply_in_child(bounds: JobBounds) -> None:
    """In a cold child between fork and exec: bound itself. Errors are ignored here (a
    child cannot report them); `BoundsKeeper.check` reads the result back."""
    if bounds.memory_bytes is not None:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_DATA, _data_limit(bounds.memory_bytes))
    if bounds.cpus is not None and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(0, bounds.cpus)


def apply_to_running(pid: int, bounds: JobBounds) -> None:
    """Bound a running process (a warm one, idle until its launch line): its RLIMIT_DATA,
    and the affinity of every thread it has (a thread's mask is its own; new threads inherit
    their creator's). Linux only; errors are left for `BoundsKeeper.check` to find."""
    if bounds.memory_bytes is not None and hasattr(resource, "prlimit"):
        with contextlib.suppress(OSError, ValueError):
            resource.prlimit(pid, resource.RLIMIT_DATA, _data_limit(bounds.memory_bytes))
    if bounds.cpus is None or not hasattr(os, "sched_setaffinity"):
        return
    done: set[int] = set()
    while True:  # until no thread appeared meanwhile
        threads = _threads(pid) - done
        if not threads:
            return
        for tid in threads:
            with contextlib.suppress(OSError, ValueError):
                os.sched_setaffinity(tid, bounds.cpus)
        done |= threads


def _threads(pid: int) -> set[int]:
    try:
        return {int(name) for name in os.listdir(Path("/proc") / str(pid) / "task")}
    except OSError:
        return {pid}


class BoundsKeeper:
    """One per agent: turns launches' grants into bounds, checks that they took, and warns
    once per kind of bound that could not be applied."""

    def __init__(
        self,
        memory_headroom_gb: float = DEFAULT_MEMORY_HEADROOM_GB,
        available_cpus: tuple[int, ...] | None = None,
    ) -> None:
        """`available_cpus`: the CPUs jobs are placed on (default: the agent's own affinity;
        None where the OS has none)."""
        self.memory_headroom_gb = memory_headroom_gb
        if available_cpus is None and hasattr(os, "sched_getaffinity"):
            available_cpus = tuple(sorted(os.sched_getaffinity(0)))
        self.available_cpus = available_cpus
        self._warned: set[str] = set()

    def warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            _log.warning("%s (warned once)", message)

    def bounds_for(
        self, cpus: float, memory_gb: float, held: Iterable[tuple[int, ...]] = ()
    ) -> JobBounds:
        """The bounds for a grant (0: none in that resource), given the CPU sets of this
        agent's running jobs."""
        threads = cpu_set = memory = None
        if cpus > 0:
            threads = threads_for(cpus)
            available = self.available_cpus
            if available is None:
                self.warn_once(
                    "affinity", "CPU grants: no CPU affinity on this OS; jobs get threads only"
                )
            else:
                if threads > len(available):
                    self.warn_once(
                        "oversubscribed",
                        f"a grant of {cpus:g} CPUs is more than the {len(available)} "
                        "this agent may use",
                    )
                cpu_set = pick_cpus(threads, available, held)
        if memory_gb > 0:
            if hasattr(resource, "prlimit"):
                memory = memory_limit_bytes(memory_gb, self.memory_headroom_gb)
            else:
                self.warn_once(
                    "memory", "memory grants: no per-process data limit on this OS; jobs run "
                    "without one",
                )
        return JobBounds(threads, cpu_set, memory)

    def check(self, pid: int, bounds: JobBounds) -> None:
        """Read back what `pid` runs under; warn (once per kind) where a bound did not take.
        A process that has already ended is not checked."""
        try:
            if bounds.cpus is not None and hasattr(os, "sched_getaffinity"):
                actual = tuple(sorted(os.sched_getaffinity(pid)))
                if actual != bounds.cpus:
                    self.warn_once(
                        "affinity",
                        f"could not bind a job to CPUs {list(bounds.cpus)}: it may run on "
                        f"{list(actual)}",
                    )
            if bounds.memory_bytes is not None and hasattr(resource, "prlimit"):
                soft, _ = resource.prlimit(pid, resource.RLIMIT_DATA)
                if soft != _data_limit(bounds.memory_bytes)[0]:
                    self.warn_once(
                        "memory",
                        f"could not limit a job's data to {bounds.memory_bytes} bytes: its "
                        f"limit is {'unlimited' if soft == resource.RLIM_INFINITY else soft}",
                    )
        except (ProcessLookupError, PermissionError):
            return


def child_setup(bounds: JobBounds, then: Callable[[], None]) -> Callable[[], None]:
    """A `preexec_fn` that bounds the child, then runs `then` (the parent-death signal);
    just `then` for an unbounded job."""
    if not bounds.bounded:
        return then

    def setup() -> None:
        apply_in_child(bounds)
        then()

    return setup
