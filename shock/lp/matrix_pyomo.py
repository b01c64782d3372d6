"""A matrix-form LP or MILP as a Pyomo model: how every solver but HiGHS' direct path gets a
policy's one formulation.

The model has one variable per column and one constraint per row, in the matrix's order, so a
solver sees exactly the problem HiGHS is handed (the same rows, columns, bounds and costs).
Bounds and costs can be changed in place between solves, for policies that re-solve one LP
with new bounds (bisections, water filling).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from shock.core.solver import SolverSpec
from shock.lp.pyomo_solver import solve_pyomo

if TYPE_CHECKING:
    from shock.lp.matrix_lp import MatrixLP


def _bound(value: float) -> float | None:
    return None if math.isinf(value) else float(value)


class MatrixModel:
    """A Pyomo model of one MatrixLP; `x[j]` is column j, and each row with entries and a
    finite bound is a constraint of `rows` (a row with no entries is only checked: Pyomo
    refuses constant constraints; one whose bounds are both infinite is inactive)."""

    def __init__(self, lp: MatrixLP, integer: np.ndarray | None = None) -> None:
        import pyomo.environ as pyo

        num_col = len(lp.cost)
        model = pyo.ConcreteModel()
        model.x = pyo.Var(range(num_col))
        for j in range(num_col):
            var = model.x[j]
            if integer is not None and integer[j]:
                var.domain = pyo.Integers
            var.setlb(_bound(lp.col_lower[j]))
            var.setub(_bound(lp.col_upper[j]))
        terms: list[list[tuple[int, float]]] = [[] for _ in range(len(lp.row_lower))]
        for j in range(num_col):
            for k in range(int(lp.a_start[j]), int(lp.a_start[j + 1])):
                terms[int(lp.a_index[k])].append((j, float(lp.a_value[k])))
        model.rows = pyo.ConstraintList()
        self.model = model
        self.num_col = num_col
        self.row_lower = lp.row_lower.astype(float)
        self.row_upper = lp.row_upper.astype(float)
        self.bodies: list[Any] = [
            pyo.quicksum(value * model.x[j] for j, value in row_terms) if row_terms else None
            for row_terms in terms
        ]
        self.constraint_of_row: list[Any] = [None] * len(terms)
        for r in range(len(terms)):
            self._apply_bounds(r)
        self._check_empty_rows()
        self.set_costs(lp.cost)

    def _apply_bounds(self, r: int) -> None:
        """Row r's constraint with its current bounds (inactive while it has none)."""
        body = self.bodies[r]
        if body is None:
            return
        lower, upper = _bound(self.row_lower[r]), _bound(self.row_upper[r])
        constraint = self.constraint_of_row[r]
        if lower is None and upper is None:
            if constraint is not None:
                constraint.deactivate()
            return
        relation = body == lower if lower is not None and lower == upper else (lower, body, upper)
        if constraint is None:
            self.constraint_of_row[r] = self.model.rows.add(relation)
        else:
            constraint.set_value(relation)
            constraint.activate()

    def _check_empty_rows(self) -> None:
        from shock.core.errors import SolverError

        for r, body in enumerate(self.bodies):
            if body is None and (self.row_lower[r] > 0 or self.row_upper[r] < 0):
                raise SolverError(f"row {r} has no entries and bounds that exclude 0")

    def set_costs(self, cost: np.ndarray) -> None:
        """Minimise cost . x (replaces the objective)."""
        import pyomo.environ as pyo

        model = self.model
        if hasattr(model, "objective"):
            model.del_component(model.objective)
        used = np.flatnonzero(cost)
        expr = pyo.quicksum(float(cost[j]) * model.x[int(j)] for j in used) if len(used) else 0.0
        model.objective = pyo.Objective(expr=expr, sense=pyo.minimize)

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        for r, low, high in zip(rows, lower, upper, strict=True):
            self.row_lower[r], self.row_upper[r] = float(low), float(high)
            self._apply_bounds(int(r))
        self._check_empty_rows()

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        for j, low, high in zip(cols, lower, upper, strict=True):
            var = self.model.x[int(j)]
            var.setlb(_bound(low))
            var.setub(_bound(high))

    def solve(self, spec: SolverSpec) -> np.ndarray:
        """The optimal x (SolverError otherwise)."""
        solve_pyomo(self.model, spec)
        return self.values()

    def solve_if_feasible(self, spec: SolverSpec) -> np.ndarray | None:
        """The optimal x, or None when the solver proves the LP infeasible."""
        if not solve_pyomo(self.model, spec, infeasible_ok=True):
            return None
        return self.values()

    def values(self) -> np.ndarray:
        x = self.model.x
        return np.array([x[j].value or 0.0 for j in range(self.num_col)], dtype=float)


def solve_with_pyomo(
    lp: MatrixLP, spec: SolverSpec, integer: np.ndarray | None = None
) -> np.ndarray:
    """Solve the matrix LP (MILP where `integer` is true) with the spec's solver plugin."""
    return MatrixModel(lp, integer).solve(spec)
