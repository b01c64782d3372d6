"""The engine's whole state as one JSON document, so any backend resumes after a crash alike.

It holds what the engine decided and counted: each admitted job's credited progress, batch
size and fairness counters, the mechanism's allocation clock, its current allocation, last
round's placement and its random state (so a resumed run plans its next round exactly as the
uninterrupted run would; an elastic policy's grants with it), the run's counters, finished
jobs' records, measured rates, and the policy's own memory. A durable executor stores it (the
gRPC cluster journals it every round) and hands it back when the run resumes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from shock.core.model import JobSpec
from shock.core.policy import Allocation, ElasticGrant, Policy, UnitKey
from shock.core.results import JobRecord
from shock.engine.mechanism import Mechanism
from shock.engine.units import MechanismStats

FORMAT_VERSION = 1
_log = logging.getLogger(__name__)

MeasuredKey = tuple[str, int, str]  # (job type, scale factor, worker type)


@dataclass(slots=True)
class EngineCounters:
    rounds: int
    busy_gpu_seconds: float
    stats: MechanismStats


def snapshot(
    now: float,
    mechanism: Mechanism,
    counters: EngineCounters,
    records: list[JobRecord],
    isolated_runtime: dict[int, float],
    measured: dict[MeasuredKey, float],
    policy: Policy,
) -> dict[str, Any]:
    types = mechanism.worker_types
    jobs = []
    for job_id in sorted(mechanism.active):
        state = mechanism.active[job_id]
        time_so_far, deficit, allocation = state.time_so_far, state.deficit, state.allocation
        jobs.append(
            {
                "id": job_id,
                "job_type": state.spec.job_type,
                "total_steps": state.total_steps,
                "steps_done": state.steps_done,
                "time_run_s": state.time_run_s,
                "isolated_runtime_s": isolated_runtime.get(job_id),
                # Per worker type: time received since the last reset, time owed, share.
                "counters": {
                    worker_type: [
                        time_so_far[column],
                        deficit[column],
                        None if allocation is None else allocation[column],
                    ]
                    for column, worker_type in enumerate(types)
                },
            }
        )
    stats = counters.stats
    return {
        "version": FORMAT_VERSION,
        "time_s": now,
        "rounds": counters.rounds,
        "busy_gpu_seconds": counters.busy_gpu_seconds,
        "stats": {
            "preemptions": stats.preemptions,
            "lease_extensions": stats.lease_extensions,
            "lease_opportunities": stats.lease_opportunities,
            "allocations": stats.allocations,
            "solver_seconds": stats.solver_seconds,
        },
        "clock": {
            "last_reset_s": mechanism.last_reset_s,
            "worker_time": dict(zip(types, mechanism.worker_time, strict=True)),
        },
        "jobs": jobs,
        "records": [
            [r.job_id, r.arrival_s, r.completion_s, r.isolated_runtime_s, r.scale_factor]
            for r in records
        ],
        "measured": [[*key, value] for key, value in sorted(measured.items())],
        "policy": {"name": policy.name, "state": policy.snapshot()},
        "rounds_memory": _rounds_memory(mechanism),
    }


def _key_json(key: UnitKey) -> Any:
    return list(key) if isinstance(key, tuple) else key


def _key_of(saved: Any) -> UnitKey:
    return (int(saved[0]), int(saved[1])) if isinstance(saved, list) else int(saved)


def _rounds_memory(mechanism: Mechanism) -> dict[str, Any]:
    """What the mechanism carries from one round to the next besides the jobs' counters."""
    allocation = mechanism.allocation
    random_state = mechanism.shuffler_state()
    memory: dict[str, Any] = {
        "need_allocation": mechanism.need_allocation,
        "worker_types": list(mechanism.worker_types),
        "allocation": {
            "keys": [_key_json(key) for key in allocation.keys],
            "fractions": np.asarray(allocation.fractions, dtype=float).tolist(),
            "objective": allocation.objective,
            "round_order": (
                None
                if allocation.round_order is None
                else [_key_json(key) for key in allocation.round_order]
            ),
        },
        # In the mechanism's order, which breaks ties between units.
        "pairs": [[*key, pair.time_so_far, pair.deficit] for key, pair in mechanism.pairs.items()],
        "last_round": [
            [_key_json(key), a.worker_type, list(a.gpus), a.kept_gpus]
            for key, a in mechanism.previous_round.items()
        ],
        "random_state": [random_state[0], list(random_state[1]), random_state[2]],
    }
    if mechanism.restart_left:
        # Restarts that go on into the next rounds (written only then, as the grants are).
        memory["restart_left"] = [
            [_key_json(key), seconds] for key, seconds in mechanism.restart_left.items()
        ]
    if allocation.elastic is not None:
        # An elastic policy's grants (written only for one, so other documents are as before).
        memory["allocation"]["elastic"] = [
            [_key_json(key), *_grant_json(grant)] for key, grant in allocation.elastic.items()
        ]
    return memory


def _grant_json(grant: ElasticGrant) -> list[Any]:
    return [
        grant.worker_type,
        grant.gpus,
        grant.num_nodes,
        grant.batch_size,
        grant.atomic_batch_size,
        grant.accumulation_steps,
        list(grant.node_gpus),
    ]


def _grant_of(saved: list[Any]) -> tuple[UnitKey, ElasticGrant]:
    key, worker_type, gpus, nodes, batch, atomic, accum, node_gpus = saved
    grant = ElasticGrant(
        str(worker_type),
        int(gpus),
        int(nodes),
        None if batch is None else int(batch),
        None if atomic is None else int(atomic),
        int(accum),
        tuple(int(n) for n in node_gpus),
    )
    return _key_of(key), grant


def _restore_rounds_memory(mechanism: Mechanism, saved: dict[str, Any] | None) -> None:
    """Give a new mechanism the saved allocation, last round and random state, unless its
    worker types differ (a resized cluster): then it allocates and places afresh."""
    if saved is None or list(mechanism.worker_types) != saved["worker_types"]:
        return
    for key, seconds in saved.get("restart_left", ()):
        mechanism.restart_left[_key_of(key)] = float(seconds)
    allocation = saved["allocation"]
    keys = tuple(_key_of(key) for key in allocation["keys"])
    if any(
        (key not in mechanism.active)
        if not isinstance(key, tuple)
        else (key[0] not in mechanism.active or key[1] not in mechanism.active)
        for key in keys
    ):
        return  # a job it allocated is gone: let the mechanism allocate again
    fractions = np.array(allocation["fractions"], dtype=float).reshape(
        len(keys), len(mechanism.worker_types)
    )
    for first, second, time_so_far, deficit in saved["pairs"]:
        mechanism.restore_pair((int(first), int(second)), time_so_far, deficit)
    order = allocation["round_order"]
    elastic = allocation.get("elastic")
    mechanism.install_allocation(
        Allocation(
            keys,
            mechanism.worker_types,
            fractions,
            allocation["objective"],
            None if order is None else tuple(_key_of(key) for key in order),
            None if elastic is None else dict(_grant_of(saved) for saved in elastic),
        )
    )
    mechanism.need_allocation = bool(saved["need_allocation"])
    for key, worker_type, gpus, kept in saved["last_round"]:
        mechanism.remember_assignment(_key_of(key), worker_type, tuple(gpus), bool(kept))
    version, internal, gauss = saved["random_state"]
    mechanism.set_shuffler_state((version, tuple(internal), gauss))


@dataclass(frozen=True, slots=True)
class RestoredRun:
    counters: EngineCounters
    records: list[JobRecord]
    isolated_runtime: dict[int, float]
    measured: dict[MeasuredKey, float]
    admitted: frozenset[int]  # every job admitted before, finished or not


def restore(
    document: dict[str, Any],
    mechanism: Mechanism,
    jobs_by_id: dict[int, JobSpec],
    policy: Policy,
    fresh_policy: Policy,
) -> tuple[RestoredRun, Policy]:
    """Put the saved state into a new mechanism (of the cluster as it is now); returns the
    run's counters and records, and the policy to go on with: the restored one, or a fresh
    one when the saved memory belongs to another policy or does not fit."""
    if document.get("version") != FORMAT_VERSION:
        version = document.get("version")
        raise ValueError(f"engine state version {version!r}, expected {FORMAT_VERSION}")
    measured = {
        (str(job_type), int(scale), str(worker_type)): float(value)
        for job_type, scale, worker_type, value in document["measured"]
    }
    for (job_type, scale, worker_type), value in measured.items():
        if worker_type in mechanism.worker_types:
            mechanism.table.set(job_type, scale, worker_type, value)
    clock = document["clock"]
    mechanism.last_reset_s = float(clock["last_reset_s"])
    for column, worker_type in enumerate(mechanism.worker_types):
        mechanism.worker_time[column] = float(clock["worker_time"].get(worker_type, 0.0))
    isolated: dict[int, float] = {}
    for saved in document["jobs"]:
        spec = jobs_by_id[int(saved["id"])]
        state = mechanism.admit(spec)
        if saved["job_type"] != spec.job_type:
            mechanism.change_job_type(
                state, saved["job_type"], int(saved["total_steps"]), float(saved["steps_done"])
            )
        state.steps_done = float(saved["steps_done"])
        state.time_run_s = float(saved["time_run_s"])
        if saved["isolated_runtime_s"] is not None:
            isolated[spec.job_id] = float(saved["isolated_runtime_s"])
        for worker_type, (time_so_far, deficit, share) in saved["counters"].items():
            if worker_type not in mechanism.worker_types:
                continue  # that type has no workers now
            mechanism.restore_counters(
                state,
                mechanism.worker_types.index(worker_type),
                float(time_so_far),
                float(deficit),
                None if share is None else float(share),
            )
    _restore_rounds_memory(mechanism, document.get("rounds_memory"))
    records = [
        JobRecord(int(job_id), float(arrival), float(done), float(alone), int(scale))
        for job_id, arrival, done, alone, scale in document["records"]
    ]
    stats = MechanismStats(**document["stats"])
    counters = EngineCounters(int(document["rounds"]), float(document["busy_gpu_seconds"]), stats)
    admitted = frozenset(isolated) | {int(s["id"]) for s in document["jobs"]}
    admitted |= {r.job_id for r in records}
    return (
        RestoredRun(counters, records, isolated, measured, frozenset(admitted)),
        _restored_policy(document.get("policy"), policy, fresh_policy),
    )


def _restored_policy(saved: Any, policy: Policy, fresh_policy: Policy) -> Policy:
    """The policy with its memory back; a memory of another policy, or one that does not
    fit (an edited or foreign journal), is set aside: the policy then starts afresh."""
    if not saved or saved.get("state") is None:
        return policy
    if saved.get("name") != policy.name:
        _log.warning(
            "the saved state belongs to policy %r, not %r: %r starts afresh",
            saved.get("name"), policy.name, policy.name,
        )  # fmt: skip
        return policy
    try:
        policy.restore(saved["state"])
    except Exception as error:  # never fatal: a fresh policy is always a valid choice
        _log.warning(
            "saved state of policy %r does not fit (%s: %s): it starts afresh",
            policy.name, type(error).__name__, error,
        )  # fmt: skip
        return fresh_policy
    return policy
