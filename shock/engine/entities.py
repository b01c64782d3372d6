"""Entities (users or groups) for hierarchical policies: `--entities` and `--entity-weights`.

`--entities a,b,c` (or `--entities 3`, for e0, e1, e2) assigns the trace's jobs to entities
round-robin in job-id order: the k-th job belongs to entity k mod (number of entities).
`--entity-weights a=1,b=2` weighs them (entities not named weigh 1); given alone, its names
are the entities. Jobs outside any entity belong to the default entity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from shock.core.errors import InputError
from shock.core.model import JobSpec

DEFAULT_ENTITY = "default"


@dataclass(frozen=True, slots=True)
class EntitySpec:
    names: tuple[str, ...]
    weights: dict[str, float]

    def assign(self, jobs: tuple[JobSpec, ...]) -> tuple[JobSpec, ...]:
        """The jobs with their entity set, round-robin in job-id order."""
        order = sorted(range(len(jobs)), key=lambda i: jobs[i].job_id)
        entity = {i: self.names[k % len(self.names)] for k, i in enumerate(order)}
        return tuple(replace(job, entity=entity[i]) for i, job in enumerate(jobs))


def parse_entities(entities: str | None, weights: str | None) -> EntitySpec | None:
    """The entities and weights the two options describe; None when neither is given."""
    if entities is None and weights is None:
        return None
    weight_of = _parse_weights(weights) if weights is not None else {}
    names = _parse_names(entities) if entities is not None else tuple(weight_of)
    unknown = [name for name in weight_of if name not in names]
    if unknown:
        raise InputError(
            f"weights for entities not in --entities: {', '.join(unknown)} "
            f"(entities: {', '.join(names)})",
            field="--entity-weights",
        )
    return EntitySpec(names, {name: weight_of.get(name, 1.0) for name in names})


def _parse_names(text: str) -> tuple[str, ...]:
    text = text.strip()
    if text.isdigit():
        count = int(text)
        if count < 1:
            raise InputError("must be >= 1 entity", field="--entities")
        return tuple(f"e{k}" for k in range(count))
    names = tuple(name.strip() for name in text.split(","))
    if any(not name or "=" in name for name in names):
        raise InputError(
            f"'{text}' is not a count or comma-separated names (a,b,c); "
            "weights go in --entity-weights",
            field="--entities",
        )
    if len(set(names)) != len(names):
        raise InputError(f"'{text}' names an entity twice", field="--entities")
    return names


def _parse_weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            weight = float(value)
        except ValueError:
            weight = math.nan
        if not sep or not name or not (weight > 0 and math.isfinite(weight)):
            raise InputError(
                f"'{item}' is not of the form entity=weight with a finite weight > 0",
                field="--entity-weights",
            )
        if name in weights:
            raise InputError(f"entity '{name}' is weighted twice", field="--entity-weights")
        weights[name] = weight
    return weights
