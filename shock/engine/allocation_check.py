"""Plugin output is checked before the mechanism uses it.

A policy's allocation and a placement's GPUs come from plugins; a wrong one must stop the run
with an error naming the plugin and what is wrong, never be silently misread (a column taken
for another worker type, a share for another job, two jobs on one GPU). The allocation check
runs at every allocation of long simulations, so its arithmetic is vectorised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from shock.core.errors import ShockError
from shock.core.policy import Allocation, Policy, PolicyInput, UnitKey

if TYPE_CHECKING:
    from shock.core.solver import SolverSpec

# Solvers stop within ~1e-9 of a bound; this leaves room without hiding a real excess.
TOLERANCE = 1e-6


class PluginOutputError(ShockError):
    """A plugin returned something the engine cannot use; names the plugin."""


class _Request(Protocol):
    @property
    def key(self) -> UnitKey: ...
    @property
    def scale_factor(self) -> int: ...


def allocate_checked(policy: Policy, problem: PolicyInput, solver: SolverSpec) -> Allocation:
    """The policy's allocation for `problem`, checked (`check_allocation`)."""
    allocation = policy.allocate(problem, solver)
    check_allocation(policy.name, problem, allocation, policy.may_oversubscribe)
    return allocation


def check_allocation(
    policy: str, problem: PolicyInput, allocation: Allocation, may_oversubscribe: bool = False
) -> None:
    """Raise PluginOutputError unless `allocation` is a usable answer to `problem`: the
    problem's worker types in its order, active jobs (or pairs of them) once each, a fractions
    array of matching shape with finite shares >= 0, no unit or job over all of its time, and
    no worker type given more GPUs than it has (unless the policy says it may ask for more)."""

    def fail(message: str) -> PluginOutputError:
        return PluginOutputError(f"policy '{policy}' returned an unusable allocation: {message}")

    worker_types = tuple(allocation.worker_types)
    if worker_types != problem.worker_types:
        unknown = [w for w in worker_types if w not in problem.worker_types]
        if unknown:
            raise fail(
                f"unknown worker type(s) {', '.join(map(str, unknown))} (the cluster has "
                f"{', '.join(problem.worker_types)})"
            )
        raise fail(
            f"worker types ({', '.join(worker_types)}) are not the cluster's "
            f"({', '.join(problem.worker_types)}, in this order)"
        )
    keys = allocation.keys
    fractions = np.asarray(allocation.fractions)
    expected = (len(keys), len(worker_types))
    if fractions.shape != expected:
        raise fail(
            f"fractions have shape {fractions.shape}, expected {expected} "
            f"({len(keys)} keys x {len(worker_types)} worker types)"
        )
    gangs, has_pairs = _gang_sizes(keys, problem, fail)
    if len(keys) == 0:
        return
    if fractions.dtype.kind == "f" and _plainly_valid(
        fractions, gangs, problem.capacity, may_oversubscribe
    ):
        if has_pairs:
            _check_time_per_job(keys, fractions.sum(axis=1), fail)
        return
    # Something is off: the checks one by one, for the message.
    if not np.issubdtype(fractions.dtype, np.number):
        raise fail(f"fractions are of type {fractions.dtype}, not numbers")
    finite = np.isfinite(fractions)
    if not finite.all():
        row, column = np.argwhere(~finite)[0]
        raise fail(
            f"{_unit(keys[row])} has share {fractions[row, column]} on {worker_types[column]}"
        )
    negative = fractions < -TOLERANCE
    if negative.any():
        row, column = np.argwhere(negative)[0]
        raise fail(
            f"{_unit(keys[row])} has a negative share {fractions[row, column]:.6g} on "
            f"{worker_types[column]}"
        )
    rows = fractions.sum(axis=1)
    over = rows > 1 + TOLERANCE
    if over.any():
        row = int(np.argmax(over))
        raise fail(f"{_unit(keys[row])} is given {rows[row]:.6g} of its time (at most 1)")
    used = gangs @ fractions
    capacity = np.asarray(problem.capacity, dtype=float)
    crowded = used > capacity + TOLERANCE * np.maximum(1.0, capacity)
    if crowded.any() and not may_oversubscribe:
        column = int(np.argmax(crowded))
        raise fail(
            f"worker type {worker_types[column]} is given {used[column]:.6g} GPUs (share x "
            f"GPUs per unit, summed) but has {capacity[column]:g}"
        )
    if has_pairs:
        _check_time_per_job(keys, rows, fail)


def _plainly_valid(
    fractions: np.ndarray, gangs: np.ndarray, capacity: np.ndarray, may_oversubscribe: bool
) -> bool:
    """Whether float `fractions` pass the checks on shares, rows and capacity, decided with
    a few operations (NaN and infinities fail the first two comparisons)."""
    if not (fractions.min() >= -TOLERANCE and fractions.sum(axis=1).max() <= 1 + TOLERANCE):
        return False
    if may_oversubscribe:
        return True
    capacity = np.asarray(capacity, dtype=float)
    return bool((gangs @ fractions <= capacity + TOLERANCE * np.maximum(1.0, capacity)).all())


def _gang_sizes(
    keys: Sequence[UnitKey], problem: PolicyInput, fail: Any
) -> tuple[np.ndarray, bool]:
    """GPUs each unit takes, and whether there are pairs; fails on a key that is not an
    active job or a pair of them."""
    job_ids = problem.job_ids
    if len(keys) == len(job_ids) and list(keys) == list(job_ids):
        return problem.scale_factors, False  # the common answer: one row per job, in order
    has_pairs = False
    gang = {job.job_id: job.scale_factor for job in problem.jobs}
    sizes = np.empty(len(keys))
    for row, key in enumerate(keys):
        if isinstance(key, tuple):
            if len(key) != 2 or key[0] == key[1]:
                raise fail(f"key {key!r} is neither a job id nor a pair of two job ids")
            first, second = (gang.get(member) for member in key)
            if first is None or second is None:
                missing = key[0] if first is None else key[1]
                raise fail(f"pair {key!r} names job {missing!r}, which is not active")
            if first != second:
                raise fail(f"pair {key!r} joins jobs of {first} and {second} GPUs")
            sizes[row] = first
            has_pairs = True
            continue
        size = gang.get(key)
        if size is None:
            raise fail(f"job {key!r} is not active (or not a job id)")
        sizes[row] = size
    if len(set(keys)) != len(keys):
        seen: set[UnitKey] = set()
        for key in keys:
            if key in seen:
                raise fail(f"{_unit(key)} has more than one row")
            seen.add(key)
    return sizes, has_pairs


def _check_time_per_job(keys: Sequence[UnitKey], rows: np.ndarray, fail: Any) -> None:
    """With pairs, a job's time alone plus in its pairs is at most all of its time."""
    total: dict[int, float] = {}
    for key, share in zip(keys, rows.tolist(), strict=True):
        for member in key if isinstance(key, tuple) else (key,):
            total[member] = total.get(member, 0.0) + share
    for job, share in total.items():
        if share > 1 + TOLERANCE:
            raise fail(f"job {job} is given {share:.6g} of its time alone and in pairs")


def _unit(key: UnitKey) -> str:
    return f"pair {key!r}" if isinstance(key, tuple) else f"job {key!r}"


def check_placement(
    placement: object,
    servers: Sequence[Sequence[int]],
    requests: Sequence[_Request],
    gpus_of: Mapping[UnitKey, Sequence[int]],
    every_request: bool = True,
    valid_gpus: AbstractSet[int] | None = None,
) -> None:
    """Raise PluginOutputError unless every requested unit (each placed one, when the
    placement may leave units out) got as many distinct GPUs of `servers` (the GPUs of one
    worker type) as it asked for, no GPU twice. `valid_gpus`, when given, is the set of the
    GPUs of `servers` (a caller that checks every round keeps it)."""
    wanted = dict(map(_KEY_AND_SIZE, requests))
    if _plainly_usable(servers, wanted, gpus_of, every_request, valid_gpus):
        return
    name = getattr(placement, "name", type(placement).__name__)

    def fail(message: str) -> PluginOutputError:
        return PluginOutputError(f"placement '{name}' returned an unusable placement: {message}")

    # Something is wrong: find the first fault, to name it.
    unknown = [key for key in gpus_of if key not in wanted]
    if unknown:
        raise fail(f"{_unit(unknown[0])} was not asked for")
    if every_request and len(gpus_of) != len(wanted):
        missing = next(key for key in wanted if key not in gpus_of)
        raise fail(f"{_unit(missing)} got no GPUs")
    valid = set(chain.from_iterable(servers))
    taken: set[int] = set()
    for key, gpus in gpus_of.items():
        if len(gpus) != wanted[key]:
            raise fail(f"{_unit(key)} got {len(gpus)} GPU(s), it needs {wanted[key]}")
        for gpu in gpus:
            if gpu not in valid:
                raise fail(
                    f"{_unit(key)} got GPU {gpu!r}, which is not one of the GPUs it was given "
                    "to place on (the worker type's servers)"
                )
            if gpu in taken:
                raise fail(f"GPU {gpu} is given to {_unit(key)} and to another unit")
            taken.add(gpu)


_KEY_AND_SIZE = attrgetter("key", "scale_factor")
_KEY = attrgetter("key")
_SIZE = attrgetter("scale_factor")


def placed_in_order(
    placement: object,
    servers: Sequence[Sequence[int]],
    requests: Sequence[_Request],
    gpus_of: Mapping[UnitKey, Sequence[int]],
    valid_gpus: AbstractSet[int] | None = None,
    keys: list[UnitKey] | None = None,
    sizes: list[int] | None = None,
    held: AbstractSet[int] | None = None,
) -> list[Sequence[int]]:
    """Each request's GPUs in `gpus_of`, in the requests' order, once `check_placement` has
    passed. The common case (every request placed once, with as many GPUs as it needs, all
    distinct and of `servers`) is decided in C; anything else goes to the detailed check,
    which names the fault. `keys` and `sizes`, when given, are the requests' keys and scale
    factors in order (a caller that has them saves two passes). `held`, when given, are GPUs
    of the worker type that other units hold: `servers` leave them out, and so must the
    placement (`valid_gpus` may still include them)."""
    if keys is None:
        keys = list(map(_KEY, requests))
    if sizes is None:
        sizes = list(map(_SIZE, requests))
    # Checks that together imply the detailed ones: with every key found and as many keys
    # as requests, a key asked for twice would take its GPUs twice (each needs at least one).
    if len(gpus_of) == len(keys) and (not sizes or min(sizes) >= 1):
        try:
            placed = list(map(gpus_of.__getitem__, keys))
        except KeyError:
            placed = []
        if len(placed) == len(keys) and list(map(len, placed)) == sizes:
            taken = list(chain.from_iterable(placed))
            distinct = set(taken)
            if (
                len(distinct) == len(taken)
                and (
                    distinct <= valid_gpus
                    if valid_gpus is not None
                    else distinct.issubset(chain.from_iterable(servers))
                )
                and (held is None or distinct.isdisjoint(held))
            ):
                return placed
    # (With GPUs held, `servers` alone say which GPUs the placement could use.)
    valid = valid_gpus if held is None else None
    check_placement(placement, servers, requests, gpus_of, valid_gpus=valid)
    return [gpus_of[key] for key in keys]


def _plainly_usable(
    servers: Sequence[Sequence[int]],
    wanted: Mapping[UnitKey, int],
    gpus_of: Mapping[UnitKey, Sequence[int]],
    every_request: bool,
    valid_gpus: AbstractSet[int] | None = None,
) -> bool:
    """Whether `check_placement` would pass, decided with a few operations in C (it runs for
    every round): every unit asked for (each one, if `every_request`) with as many GPUs as it
    needs, all of them distinct and of `servers`."""
    if every_request and len(gpus_of) != len(wanted):
        return False
    # Each unit's GPU count against its request's (None for a unit not asked for).
    if list(map(len, gpus_of.values())) != list(map(wanted.get, gpus_of)):
        return False
    taken = list(chain.from_iterable(gpus_of.values()))
    distinct = set(taken)
    if len(distinct) != len(taken):
        return False
    if valid_gpus is not None:
        return distinct <= valid_gpus
    return distinct.issubset(chain.from_iterable(servers))


def check_resource_placement(
    placement: object,
    servers: Sequence[Sequence[int]],
    requests: Sequence[_Request],
    grants: Mapping[UnitKey, Any],
) -> None:
    """`check_placement` for a resource-aware placement's grants (it may leave units out)."""
    # One pass over the grants decides the common case (all usable); else the detailed check
    # finds and names the first fault.
    size_of = {request.key: request.scale_factor for request in requests}.get
    taken: list[int] = []
    for key, grant in grants.items():
        gpus = grant.gpus
        if size_of(key) != len(gpus):  # also a unit not asked for (None)
            break
        taken.extend(gpus)
    else:
        distinct = set(taken)
        if len(distinct) == len(taken) and distinct.issubset(chain.from_iterable(servers)):
            return
    gpus_of = {key: grant.gpus for key, grant in grants.items()}
    check_placement(placement, servers, requests, gpus_of, every_request=False)
