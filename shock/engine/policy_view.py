"""What a policy sees of the mechanism's jobs: each job's `PolicyJob` view, re-used while the
job has not changed, and the `PolicyInput` of an allocation."""

from __future__ import annotations

from typing import cast

import numpy as np

from shock.core.policy import PolicyInput, PolicyJob
from shock.core.throughputs import ThroughputTable
from shock.engine.unit_counters import UnitCounters
from shock.engine.units import JobState


def policy_view(job: JobState) -> PolicyJob:
    """The job as a policy sees it; the last view while the job has not changed (most jobs
    wait or run unchanged between allocations, and a view costs more than this check)."""
    view = job.policy_view
    spec = job.spec
    if (
        view is not None
        and view.steps_done == job.steps_done
        and view.time_run_s == job.time_run_s
        and view.speed == job.speed
        and view.job_type is spec.job_type
        and view.total_steps == spec.total_steps
    ):
        return view
    # Built slot by slot: a frozen dataclass's __init__ sets each field through
    # object.__setattr__, twice as slow, and every running job needs a new view at every
    # allocation. The object is the same as PolicyJob(...) gives.
    view = job.policy_view = _new_view(PolicyJob)
    _set_job_id(view, job.job_id)
    _set_job_type(view, spec.job_type)
    _set_scale_factor(view, spec.scale_factor)
    _set_priority_weight(view, spec.priority_weight)
    _set_arrival_time(view, spec.arrival_time)
    _set_total_steps(view, spec.total_steps)
    _set_steps_done(view, job.steps_done)
    _set_slo(view, spec.slo)
    _set_entity(view, spec.entity)
    _set_mode(view, spec.mode)
    _set_time_run_s(view, job.time_run_s)
    _set_speed(view, job.speed)
    _set_cpus(view, spec.cpus)
    _set_memory_gb(view, spec.memory_gb)
    return view


_new_view = object.__new__
# A view's fields, each set through its slot (a field added to PolicyJob needs a line here).
_SLOT_SETTERS = {name: getattr(PolicyJob, name).__set__ for name in PolicyJob.__slots__}
_set_job_id = _SLOT_SETTERS["job_id"]
_set_job_type = _SLOT_SETTERS["job_type"]
_set_scale_factor = _SLOT_SETTERS["scale_factor"]
_set_priority_weight = _SLOT_SETTERS["priority_weight"]
_set_arrival_time = _SLOT_SETTERS["arrival_time"]
_set_total_steps = _SLOT_SETTERS["total_steps"]
_set_steps_done = _SLOT_SETTERS["steps_done"]
_set_slo = _SLOT_SETTERS["slo"]
_set_entity = _SLOT_SETTERS["entity"]
_set_mode = _SLOT_SETTERS["mode"]
_set_time_run_s = _SLOT_SETTERS["time_run_s"]
_set_speed = _SLOT_SETTERS["speed"]
_set_cpus = _SLOT_SETTERS["cpus"]
_set_memory_gb = _SLOT_SETTERS["memory_gb"]


def policy_input(
    counters: UnitCounters,
    jobs_by_id: tuple[np.ndarray, tuple[int, ...]],
    now: float,
    worker_types: tuple[str, ...],
    capacity: np.ndarray,
    table: ThroughputTable,
    prices: np.ndarray | None,
    round_length_s: float,
    entity_weights: dict[str, float] | None,
    goodput_profiles: str | None = None,
) -> PolicyInput:
    """The allocation's input: the active jobs (`jobs_by_id`: their slots and ids) as
    columns read from the counters."""
    slots, ids = jobs_by_id
    # The jobs' views are built only if the policy reads them (most need the arrays).
    owner = cast(list[JobState], counters.owner)
    return PolicyInput.of_job_columns(
        # The views of the jobs of this allocation (read during it).
        lambda: tuple(policy_view(owner[slot]) for slot in slots.tolist()),
        ids,
        counters.gpus[slots],
        counters.weight[slots],
        now=now,
        worker_types=worker_types,
        capacity=capacity,
        throughputs=counters.rates[slots],
        table=table,
        prices=prices,
        round_length_s=round_length_s,
        entity_weights=entity_weights,
        goodput_profiles=goodput_profiles,
    )
