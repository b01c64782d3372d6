"""Every LP policy's one formulation gives the same allocation with every solver.

Each policy states its LPs once (a `MatrixLP`); HiGHS takes them directly, every other solver
through Pyomo. On generated instances with perturbed throughputs (ties broken) this checks,
per LP policy, HiGHS-direct against HiGHS through Pyomo (appsi_highs) and each installed
optional solver (SCIP, Gurobi within its pip licence):

- where the optimum is unique, the allocations agree within 1e-6 (every fraction);
- where it is not (degenerate instances, e.g. equal throughputs, on which each solver may
  return another point of the optimal face), the objectives agree and every allocation is
  feasible (capacity, each job's time <= 1, gangs of its scale factor).

Uniqueness is measured, not assumed: the last LP the policy hands the optimisation layer on
the HiGHS-direct run (for a bisection or water filling, the final feasibility set) is
re-solved minimising and maximising every column over its optimal face; the optimum is unique
when no column moves more than 1e-7. `SHOCK_TEST_SOLVER=<name>` (the tox `solver-*`
environments) compares HiGHS-direct with that solver only and fails if it is absent.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from instances import generated_input

import shock.lp.lp_sequence as lp_sequence
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, PolicyInput
from shock.core.solver import ProblemClass, SolverSpec, unavailable_reason
from shock.lp.matrix_lp import MatrixLP, new_highs, solve_matrix_lp

pytestmark = pytest.mark.solvers

REQUESTED = os.environ.get("SHOCK_TEST_SOLVER", "").strip() or None
# The optional solvers compared with HiGHS-direct besides HiGHS through Pyomo.
OPTIONAL = ("scip", "gurobi")
ALLOCATION_TOLERANCE = 1e-6  # every fraction, where the optimum is unique
OBJECTIVE_REL = 1e-6
FEASIBILITY_TOLERANCE = 1e-6
UNIQUE_WIDTH = 1e-7  # how far a column may move over the optimal face of a unique optimum

LP_POLICIES = sorted(
    p.name for p in default_registry().all("policy") if p.problem_class is ProblemClass.LP
)
# Policies that answer with a bisection's end point (the optimum within their stopping gap).
BISECTION = {"finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed"}


def compared_solvers() -> list[SolverSpec]:
    """HiGHS through Pyomo, then each optional solver (skipped here when absent)."""
    if REQUESTED is not None and REQUESTED != "highs":
        names = [REQUESTED]
    else:
        names = ["highs", *OPTIONAL] if REQUESTED is None else ["highs"]
    specs = []
    for name in names:
        reason = unavailable_reason(name)
        if reason is not None:
            if name == REQUESTED:
                pytest.fail(f"SHOCK_TEST_SOLVER={name}, but it is not usable here: {reason}")
            continue
        specs.append(SolverSpec(name=name, fast_path=False))
    return specs


# --------------------------------------------------------------------------- instances


@st.composite
def instances(draw: Callable[..., Any]) -> PolicyInput:
    """Up to 6 jobs on 3 worker types (inside gurobipy's pip licence even with pairs), part
    way through, with SLOs and prices; throughputs perturbed by up to 2% so ties break, or
    (degenerate) every job of a type with the same throughputs and scale factor 1."""
    seed = draw(st.integers(0, 10_000))
    num_jobs = draw(st.integers(2, 6))
    capacity = tuple(draw(st.integers(1, 3)) for _ in range(3))
    degenerate = draw(st.booleans())
    problem = generated_input(num_jobs, capacity, seed, multi_gpu=not degenerate)
    if degenerate:
        jobs = tuple(replace(job, scale_factor=1) for job in problem.jobs)
        throughputs = np.repeat(problem.throughputs[:1], num_jobs, axis=0)
        return replace(problem, jobs=jobs, throughputs=throughputs)
    noise = np.random.default_rng(seed).uniform(-0.02, 0.02, problem.throughputs.shape)
    return replace(problem, throughputs=problem.throughputs * (1.0 + noise))


# --------------------------------------------------------------------------- the last LP


@dataclass
class LastLp:
    lp: MatrixLP | None = None
    # A sequence's LP (bisection steps, water filling): its final bounds define the answer's
    # feasible set, and its costs (the step's objective) are not the answer's.
    feasibility_only: bool = False
    # The sequence's LP as it was at its last feasible step (a bisection may end on an
    # infeasible one; its answer is the last feasible step's point).
    last_feasible: MatrixLP | None = None


@contextmanager
def recording_last_lp() -> Iterator[LastLp]:
    """Record the last LP any policy hands `solve_matrix_lp` or an `LpSequence`."""
    last = LastLp()

    def recording_solve(lp: MatrixLP, spec: SolverSpec) -> np.ndarray:
        last.lp, last.feasibility_only = lp, False
        return solve_matrix_lp(lp, spec)

    original_run = lp_sequence.LpSequence.run

    def recording_run(self: lp_sequence.LpSequence) -> lp_sequence.LpStatus:
        last.lp, last.feasibility_only = self.lp, True
        status = original_run(self)
        if status is lp_sequence.LpStatus.OPTIMAL:
            last.last_feasible = replace(
                self.lp, row_lower=self.lp.row_lower.copy(), row_upper=self.lp.row_upper.copy()
            )
        return status

    patched = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("shock.") and vars(module).get("solve_matrix_lp") is solve_matrix_lp
    ]
    for module in patched:
        module.solve_matrix_lp = recording_solve  # type: ignore[attr-defined]
    lp_sequence.LpSequence.run = recording_run  # type: ignore[method-assign]
    try:
        yield last
    finally:
        for module in patched:
            module.solve_matrix_lp = solve_matrix_lp  # type: ignore[attr-defined]
        lp_sequence.LpSequence.run = original_run  # type: ignore[method-assign]


def face_width(last: LastLp) -> float | None:
    """How far any column moves over the optimal face of the recorded LP (its feasible set
    for a sequence's): the largest max - min over columns that appear in a bounded row. None
    where it cannot be measured (no LP, or a set so thin that simplex calls it infeasible)."""
    if last.lp is None:
        return None
    width = _face_width(last.lp, last.feasibility_only)
    if width is None and last.last_feasible is not None:
        width = _face_width(last.last_feasible, True)
    return width


def _face_width(lp: MatrixLP, feasibility_only: bool) -> float | None:
    import highspy

    optimal = highspy.HighsModelStatus.kOptimal

    num_col = len(lp.cost)
    bounded_row = np.isfinite(lp.row_lower) | np.isfinite(lp.row_upper)
    used = np.zeros(num_col, dtype=bool)
    for j in range(num_col):
        rows = lp.a_index[lp.a_start[j] : lp.a_start[j + 1]]
        used[j] = bool(bounded_row[rows].any())
    cost = np.zeros(num_col) if feasibility_only else lp.cost.astype(float)
    cost = np.where(used, cost, 0.0)
    highs = new_highs()
    highs.setOptionValue("solver", "simplex")
    highs.passModel(
        num_col, len(lp.row_lower), len(lp.a_value), int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize), 0.0, cost, lp.col_lower, lp.col_upper,
        lp.row_lower, lp.row_upper, lp.a_start, lp.a_index, lp.a_value,
        np.zeros(num_col, dtype=np.int32),
    )  # fmt: skip
    highs.run()
    if highs.getModelStatus() != optimal:
        return None
    optimum = highs.getInfo().objective_function_value
    if cost.any():  # keep to the optimal face: cost . x <= optimum (+ solver tolerance)
        nonzero = np.flatnonzero(cost).astype(np.int32)
        highs.addRow(
            -np.inf, optimum + 1e-9 * max(1.0, abs(optimum)), len(nonzero), nonzero, cost[nonzero]
        )
    columns = np.arange(num_col, dtype=np.int32)
    width = 0.0
    for j in map(int, np.flatnonzero(used)):
        values = []
        for sign in (1.0, -1.0):
            direction = np.zeros(num_col)
            direction[j] = sign
            highs.changeColsCost(num_col, columns, direction)
            highs.run()
            if highs.getModelStatus() != optimal:
                return None
            values.append(highs.getSolution().col_value[j])
        width = max(width, abs(values[1] - values[0]))
    return width


# --------------------------------------------------------------------------- checks


def by_unit(allocation: Allocation) -> dict[Any, np.ndarray]:
    return dict(zip(allocation.keys, allocation.fractions, strict=True))


def largest_difference(a: Allocation, b: Allocation) -> float:
    rows_a, rows_b = by_unit(a), by_unit(b)
    zero = np.zeros(len(a.worker_types))
    return max(
        float(np.max(np.abs(rows_a.get(k, zero) - rows_b.get(k, zero))))
        for k in set(rows_a) | set(rows_b)
    )


def check_feasible(problem: PolicyInput, allocation: Allocation, where: str) -> None:
    """Fractions in [0, 1], each job's time (alone and in its pairs) <= 1, and the GPUs of
    every type (a unit uses one gang of its jobs' scale factor) within its capacity."""
    scale = {job.job_id: job.scale_factor for job in problem.jobs}
    time = dict.fromkeys(scale, 0.0)
    used = np.zeros(len(problem.worker_types))
    tolerance = FEASIBILITY_TOLERANCE
    for key, row in by_unit(allocation).items():
        assert np.all(row >= -tolerance) and np.all(row <= 1 + tolerance), f"{where}: {key}"
        members = key if isinstance(key, tuple) else (key,)
        gangs = {scale[j] for j in members}
        assert len(gangs) == 1, f"{where}: pair {key} of different gang sizes"
        for job in members:
            time[job] += float(row.sum())
        used += gangs.pop() * row
    assert max(time.values()) <= 1 + tolerance, f"{where}: a job's time is {max(time.values())}"
    over = used - problem.capacity
    assert np.all(over <= tolerance * np.maximum(problem.capacity, 1)), f"{where}: GPUs {used}"


def allocate(name: str, problem: PolicyInput, spec: SolverSpec) -> Allocation:
    return default_registry().get("policy", name).for_run(0).allocate(problem, spec)


def agreement(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,  # the same instances on every run and machine
        # No shrinking: a failure reports its instance at once (each example solves several
        # LPs with four solvers).
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.mark.parametrize("name", [name for name in LP_POLICIES if name not in BISECTION])
@agreement(examples=12)
@given(problem=instances())
def test_every_solver_returns_highs_allocation(name: str, problem: PolicyInput) -> None:
    check_agreement(name, problem)


@pytest.mark.parametrize("name", sorted(BISECTION))
@agreement(examples=4)  # a bisection through Pyomo solves some 25 LPs per allocation
@given(problem=instances())
def test_every_solver_returns_the_bisections_allocation(name: str, problem: PolicyInput) -> None:
    check_agreement(name, problem)


def check_agreement(name: str, problem: PolicyInput) -> None:
    with recording_last_lp() as last:
        reference = allocate(name, problem, SolverSpec())
    check_feasible(problem, reference, f"{name}, HiGHS-direct")
    width = face_width(last)
    unique = width is not None and width <= UNIQUE_WIDTH
    kind = "not measured" if width is None else "unique optimum" if unique else "degenerate"
    event(f"{name}: {kind}")
    for spec in compared_solvers():
        where = f"policy '{name}', solver '{spec.name}' through Pyomo"
        other = allocate(name, problem, spec)
        check_feasible(problem, other, where)
        if reference.objective is None or other.objective is None:
            assert reference.objective is other.objective is None, where
        else:
            rel = OBJECTIVE_REL if name not in BISECTION else 2 * OBJECTIVE_REL
            assert other.objective == pytest.approx(reference.objective, rel=rel, abs=1e-9), (
                f"{where}: objective {other.objective} vs HiGHS-direct {reference.objective}"
            )
        if unique:
            difference = largest_difference(reference, other)
            assert difference <= ALLOCATION_TOLERANCE, (
                f"{where}: allocation differs from HiGHS-direct's by {difference} on an "
                f"instance with a unique optimum\n{reference}\n{other}"
            )
