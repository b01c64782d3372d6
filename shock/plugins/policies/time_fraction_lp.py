"""The constraints every time-fraction policy shares, in Pyomo and in matrix form.

x[j, w] is the fraction of time job j spends on worker type w:
    x >= 0,   sum_w x[j, w] <= 1   (a job runs on one type at a time),
    sum_j sf_j x[j, w] <= capacity_w   (gangs of sf_j GPUs fit in each type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from shock.api import PolicyInput, lazy_module

if TYPE_CHECKING:
    import pyomo.environ as pyo
else:
    pyo = lazy_module("pyomo.environ")


def base_model(problem: PolicyInput) -> Any:
    """A Pyomo model with x and the shared constraints; policies add objective and more."""
    model = pyo.ConcreteModel()
    model.J = pyo.RangeSet(0, len(problem.jobs) - 1)
    model.W = pyo.RangeSet(0, len(problem.worker_types) - 1)
    # x <= 1 follows from the row constraint; an explicit bound would move interior solutions.
    model.x = pyo.Var(model.J, model.W, domain=pyo.NonNegativeReals)
    scale = problem.scale_factors
    model.one_type_at_a_time = pyo.Constraint(
        model.J, rule=lambda m, j: sum(m.x[j, w] for w in m.W) <= 1.0
    )
    model.capacity = pyo.Constraint(
        model.W,
        rule=lambda m, w: (
            sum(float(scale[j]) * m.x[j, w] for j in m.J) <= float(problem.capacity[w])
        ),
    )
    return model


def model_fractions(model: Any, num_jobs: int, num_types: int) -> np.ndarray:
    values = np.zeros((num_jobs, num_types))
    for (j, w), var in model.x.items():
        values[j, w] = var.value or 0.0
    return clean_fractions(values)


def clean_fractions(values: np.ndarray) -> np.ndarray:
    """Clip solver noise: fractions in [0, 1] and each row summing to at most 1."""
    # (np.clip's wrapper costs more than the two ufuncs; they differ only on -0.0, which
    # the next line makes 0.0 either way.)
    values = np.minimum(np.maximum(values, 0.0), 1.0)
    values[values < 1e-9] = 0.0
    sums = values.sum(axis=1)
    if len(sums) and sums.max() > 1.0:
        over = sums > 1.0
        values[over] /= sums[over, None]
    return values
