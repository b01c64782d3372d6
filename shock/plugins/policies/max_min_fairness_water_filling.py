"""Hierarchical max-min fairness by water filling (Gavel section 4.3), with entity weights.

Each job belongs to an entity (a user or group, `PolicyJob.entity`; jobs without one belong
to the default entity) and each entity e has a weight W_e (`PolicyInput.entity_weights`,
1 when not given). Within its entity a job is weighted by its priority:

    w_j proportional to W_e * p_j / sum_{k in e} p_k   (scaled to average 1)

and, as in max_min_fairness, its normalised share is s_j a_j(x) / (w_j T_equal[j]). Water
filling (water_filling.py) maximises the smallest normalised share, freezes the jobs that
cannot rise above it, and keeps raising the rest, so an entity's jobs together get W_e times
the share of a weight-1 entity's while the cluster is contended, and spare capacity goes to
whoever can still use it. `_perf` uses the measured throughputs, the bare name every type at
1 (time shares), `_packed` adds pairs of jobs sharing a gang (units.py).

Objective: the smallest level (the max-min value, as max_min_fairness reports it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from shock.api import (
    DEFAULT_ENTITY,
    Allocation,
    PartObjectives,
    Policy,
    PolicyInput,
    ProblemClass,
    Register,
    SolverSpec,
    hookimpl,
)
from shock.plugins.policies.units import job_units
from shock.plugins.policies.water_filling import water_fill


def entity_job_weights(problem: PolicyInput) -> np.ndarray:
    """w_j = W_e * p_j / (sum of the priorities of e's active jobs), scaled so the weights
    sum to the number of jobs (without entities and priorities every w_j is 1)."""
    entity_weight = problem.entity_weights or {}
    entities = [job.entity or DEFAULT_ENTITY for job in problem.jobs]
    priority = problem.priority_weights
    total: dict[str, float] = {}
    for entity, weight in zip(entities, priority, strict=True):
        total[entity] = total.get(entity, 0.0) + float(weight)
    weights = np.array(
        [
            entity_weight.get(entity, 1.0) * float(weight) / total[entity]
            for entity, weight in zip(entities, priority, strict=True)
        ]
    )
    return weights * (len(weights) / weights.sum())


class MaxMinFairnessWaterFilling(Policy):

    # Its objective over parts of the cluster (--partitions): the smallest part's floor.
    part_objectives = PartObjectives.MIN
    problem_class = ProblemClass.LP  # a sequence of LPs
    weighs_entities = True

    def __init__(self, heterogeneity_aware: bool, packed: bool) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        self.packed = packed
        suffix = "_packed" if packed else "_perf" if heterogeneity_aware else ""
        self.name = f"max_min_fairness_water_filling{suffix}"
        kind = (
            "with space sharing"
            if packed
            else "heterogeneity-aware"
            if heterogeneity_aware
            else "over time shares (heterogeneity-agnostic)"
        )
        self.description = (
            f"Hierarchical max-min fairness with entity weights, water filling, {kind}"
        )
        self.last_levels = np.zeros(0)  # each job's level in the last allocation (for tests)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if not problem.jobs:
            return Allocation.empty(problem.worker_types)
        seen = problem
        if not self.heterogeneity_aware:
            seen = dataclasses.replace(problem, throughputs=np.ones_like(problem.throughputs))
        share = seen.capacity / seen.capacity.sum()
        equal_share = seen.throughputs @ share
        with np.errstate(divide="ignore"):
            weights = np.where(
                equal_share > 0,
                seen.scale_factors / (entity_job_weights(seen) * equal_share),
                0.0,
            )
        units = job_units(seen, self.packed)
        result = water_fill(units, weights, solver)
        self.last_levels = result.levels
        counted = result.levels[weights > 0]
        objective = float(counted.min()) if len(counted) else 0.0
        return units.allocation(problem, result.fractions, objective)


@hookimpl
def register_policies(register: Register) -> None:
    register(MaxMinFairnessWaterFilling(heterogeneity_aware=False, packed=False))
    register(MaxMinFairnessWaterFilling(heterogeneity_aware=True, packed=False))
    register(MaxMinFairnessWaterFilling(heterogeneity_aware=True, packed=True))
