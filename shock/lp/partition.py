"""POP-style partitioning (Narayanan et al., SOSP'21): solve K small problems instead of one.

`PartitionedPolicy(inner, partitions, seed)` is a policy that splits the active jobs into K
random groups of near-equal size (sizes differ by at most one) and every worker type's GPUs
into K equal parts, solves each group with the inner policy on its part of the cluster, and
stacks the K allocations. Each sub-problem satisfies its own capacity, so their sum never
exceeds the cluster's.

Semantics worth knowing:

- **Fractional capacity.** Each part gets `capacity_w / K` GPUs of type w, which need not be
  a whole number (3 V100s in 4 parts: 0.75 each). Time-fraction policies (LPs, convex
  programs) handle this exactly: a job gets a time share of a fractional GPU count. Policies
  that place whole GPUs (FIFO) see fewer usable GPUs; partitioning is meant for the
  optimisation policies.
- **Fewer jobs than parts.** With m < K active jobs only m parts are used (one job each) and
  the cluster is split m ways, so no capacity is left idle.
- **Stable groups.** A policy instance remembers which part each job is in: jobs stay in
  their part between allocations, new jobs fill the parts that are short, and only when the
  sizes drift apart by more than one (after departures) are the fewest jobs needed moved, at
  random, from the largest parts to the smallest. That keeps the split near-equal while
  stateful inner policies (finish-time fairness' attained isolated time, FIFO's placements)
  keep seeing the same jobs. A job that is moved starts afresh in its new part's state.
- **One inner instance per part.** The constructor takes `inner.for_run(seed + k)` for part
  k (stateless policies return themselves, so they are shared); `for_run(seed)` returns a
  fresh wrapper around `inner.for_run(seed)`, so each run keeps its own per-part state.
- **K = 1** calls the inner policy itself on the unchanged problem and returns its allocation
  untouched.
- **Determinism.** The grouping uses a `numpy.random.Generator` seeded with `seed`: the same
  seed and the same sequence of problems give the same allocations.
- **Objective.** A policy declares how its objective over parts combines
  (`Policy.part_objectives`): max-min fairness takes the smallest part's floor, finish-time
  fairness and makespan the largest part's, sum objectives the sum; for a policy that
  declares nothing the whole allocation's objective is None.
- **Keys.** The stacked allocation lists single-job keys in the problem's job order, then
  pair keys (space-sharing policies pair jobs only within a part) ordered by their members'
  positions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from shock.core.errors import InputError
from shock.core.policy import Allocation, PartObjectives, Policy, PolicyInput, UnitKey
from shock.core.policy_state import by_job, generator_state, job_keyed, set_generator_state
from shock.core.solver import SolverSpec

ObjectiveCombiner = Callable[[Sequence[float]], float]

_COMBINERS: dict[PartObjectives, ObjectiveCombiner] = {
    PartObjectives.MIN: min,
    PartObjectives.MAX: max,
    PartObjectives.SUM: sum,
}


def objective_combiner(policy: Policy) -> ObjectiveCombiner | None:
    """How the policy's part objectives combine (its `part_objectives`), or None."""
    declared = policy.part_objectives
    return None if declared is None else _COMBINERS[PartObjectives(declared)]


class PartitionedPolicy(Policy):
    """The inner policy applied to K random groups of jobs on K equal slices of the cluster."""

    def __init__(
        self,
        inner: Policy,
        partitions: int,
        seed: int = 0,
        combine_objective: ObjectiveCombiner | None = None,
    ) -> None:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InputError(f"must be an integer >= 1, got {partitions!r}", field="--partitions")
        self.inner = inner
        self.partitions = partitions
        self.seed = seed
        self.name = inner.name
        self.description = f"{inner.description} (POP: {partitions} partitions)"
        self.problem_class = inner.problem_class
        self.heterogeneity_aware = inner.heterogeneity_aware
        self.backfill = inner.backfill
        self.reallocate_every_round = inner.reallocate_every_round
        self.part_objectives = inner.part_objectives
        self._combine = combine_objective or objective_combiner(inner)
        self._instances: list[Policy] = (
            [inner] if partitions == 1 else [inner.for_run(seed + k) for k in range(partitions)]
        )
        self._rng = np.random.default_rng(seed)
        self._part_of: dict[int, int] = {}  # job id -> part, kept between allocations

    def for_run(self, seed: int) -> PartitionedPolicy:
        return PartitionedPolicy(
            self.inner.for_run(seed), self.partitions, seed, combine_objective=self._combine
        )

    def snapshot(self) -> dict[str, Any] | None:
        parts = [instance.snapshot() for instance in self._instances]
        if self.partitions == 1:
            return parts[0]
        return {"part_of": by_job(self._part_of), "rng": generator_state(self._rng), "parts": parts}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        if self.partitions == 1:
            self._instances[0].restore(snapshot)
            return
        if len(snapshot["parts"]) != len(self._instances):
            raise ValueError(f"{len(snapshot['parts'])} partitions saved, {self.partitions} now")
        self._part_of = job_keyed(snapshot["part_of"], int)
        set_generator_state(self._rng, snapshot["rng"])
        for instance, part in zip(self._instances, snapshot["parts"], strict=True):
            if part is not None:
                instance.restore(part)

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        if self.partitions == 1:
            return self._instances[0].allocate(problem, solver)
        if not problem.jobs:
            self._part_of.clear()
            return Allocation.empty(problem.worker_types)
        groups = self.assign([job.job_id for job in problem.jobs])
        used = [rows for rows in groups if len(rows)]
        capacity = problem.capacity / len(used)
        parts: list[Allocation] = []
        for part, rows in enumerate(groups):
            if not len(rows):
                continue
            sub = replace(
                problem,
                jobs=tuple(problem.jobs[r] for r in rows),
                capacity=capacity,
                throughputs=problem.throughputs[rows],
            )
            parts.append(self._instances[part].allocate(sub, solver))
        return self._stack(problem, parts)

    def assign(self, job_ids: Sequence[int]) -> list[np.ndarray]:
        """Update the job -> part map for these active jobs; each part's rows (ascending)."""
        k = self.partitions
        m = len(job_ids)
        active = set(job_ids)
        part_of = {j: p for j, p in self._part_of.items() if j in active}
        members: list[list[int]] = [[] for _ in range(k)]
        for row, job_id in enumerate(job_ids):
            part = part_of.get(job_id)
            if part is not None:
                members[part].append(row)
        # Target sizes: m // k each, one more for m % k parts (the fullest ones, so that as
        # few jobs as possible move; ties broken at random).
        base, extra = divmod(m, k)
        counts = np.array([len(rows) for rows in members])
        order = np.lexsort((self._rng.permutation(k), -counts))
        target = np.full(k, base)
        target[order[:extra]] += 1
        unplaced = [row for row, job_id in enumerate(job_ids) if job_id not in part_of]
        for part in range(k):
            surplus = len(members[part]) - int(target[part])
            if surplus > 0:
                moved = self._rng.choice(len(members[part]), size=surplus, replace=False)
                moved_set = {int(i) for i in moved}
                unplaced.extend(members[part][i] for i in sorted(moved_set))
                members[part] = [r for i, r in enumerate(members[part]) if i not in moved_set]
        shuffled = [unplaced[i] for i in self._rng.permutation(len(unplaced))]
        for part in range(k):
            need = int(target[part]) - len(members[part])
            members[part].extend(shuffled[:need])
            shuffled = shuffled[need:]
        self._part_of = {job_ids[row]: part for part in range(k) for row in members[part]}
        return [np.array(sorted(rows), dtype=np.intp) for rows in members]

    def _stack(self, problem: PolicyInput, parts: list[Allocation]) -> Allocation:
        position = {job.job_id: row for row, job in enumerate(problem.jobs)}
        entries: list[tuple[tuple[int, ...], UnitKey, np.ndarray]] = []
        for allocation in parts:
            if allocation.worker_types != problem.worker_types:
                raise ValueError("a part's allocation has other worker types than the problem")
            for row, key in enumerate(allocation.keys):
                if isinstance(key, tuple):
                    order: tuple[int, ...] = (1, position[key[0]], position[key[1]])
                else:
                    order = (0, position[key])
                entries.append((order, key, allocation.fractions[row]))
        entries.sort(key=lambda entry: entry[0])
        fractions = np.zeros((len(entries), len(problem.worker_types)))
        for row, entry in enumerate(entries):
            fractions[row] = entry[2]
        objectives = [a.objective for a in parts]
        objective = None
        if self._combine is not None and all(o is not None for o in objectives):
            objective = float(self._combine([float(o) for o in objectives if o is not None]))
        return Allocation(
            tuple(entry[1] for entry in entries), problem.worker_types, fractions, objective
        )
