"""One LP re-solved many times with new bounds or costs (bisections, water filling).

The policy states the LP once as a `MatrixLP`; between solves it changes row bounds, column
bounds or costs, never the matrix. With HiGHS (the fast path) one reused simplex instance
holds the LP and every solve starts from the previous basis; any other solver gets the same LP
as one Pyomo model (`matrix_pyomo.MatrixModel`) whose bounds and objective are changed in
place.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np

from shock.core.errors import SolverError
from shock.core.solver import SolverSpec
from shock.lp.matrix_lp import MatrixLP, highs_lp, new_highs
from shock.lp.matrix_pyomo import MatrixModel

_SIMPLEX_INSTANCES: dict[tuple[float | None, bool], Any] = {}


def simplex_highs(spec: SolverSpec, primal: bool = False) -> Any:
    """A reused HiGHS instance running dual simplex, for sequences of LPs that differ only in
    bounds: the basis of one solve warm-starts the next, and an infeasible LP is reported as
    such (an interior-point method detects infeasibility slowly). `primal=True` runs primal
    simplex instead, for sequences whose last solution stays feasible (water filling)."""
    key = (spec.time_limit_s, primal)
    highs = _SIMPLEX_INSTANCES.get(key)
    if highs is None:
        highs = new_highs()
        highs.setOptionValue("solver", "simplex")
        highs.setOptionValue("simplex_strategy", 4 if primal else 1)
        highs.setOptionValue("presolve", "off")  # keeps the basis valid between solves
        if spec.time_limit_s is not None:
            highs.setOptionValue("time_limit", float(spec.time_limit_s))
        _SIMPLEX_INSTANCES[key] = highs
    return highs


class LpStatus(Enum):
    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"


class LpSequence:
    """The LP `lp`, solved by `run()` after any changes. `solution` holds the last optimal
    x; `row_duals` its row duals where the solver gives them (HiGHS), else None.

    `primal=True` asks HiGHS for primal simplex (a sequence whose last solution stays
    feasible); `repass=True` hands HiGHS the LP afresh before every solve (no basis kept:
    the baseline a benchmark measures warm starts against)."""

    def __init__(
        self, lp: MatrixLP, spec: SolverSpec, primal: bool = False, repass: bool = False
    ) -> None:
        self.lp = lp
        self.spec = spec
        self.repass = repass
        self.solution = np.zeros(len(lp.cost))
        self.row_duals: np.ndarray | None = None
        self._highs: Any = None
        self._model: MatrixModel | None = None
        if spec.uses_fast_path:
            self._highs = simplex_highs(spec, primal)
            self._highs.passModel(highs_lp(lp))
        else:
            self._model = MatrixModel(lp)

    @property
    def gives_duals(self) -> bool:
        return self._highs is not None

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Rows `rows` (int32) get the bounds [lower, upper] (also kept in `lp`)."""
        self.lp.row_lower[rows] = lower
        self.lp.row_upper[rows] = upper
        if self._highs is not None:
            if not self.repass:
                self._highs.changeRowsBounds(len(rows), rows, lower, upper)
        else:
            assert self._model is not None
            self._model.set_row_bounds(rows, lower, upper)

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.lp.col_lower[cols] = lower
        self.lp.col_upper[cols] = upper
        if self._highs is not None:
            if not self.repass:
                self._highs.changeColsBounds(len(cols), cols, lower, upper)
        else:
            assert self._model is not None
            self._model.set_col_bounds(cols, lower, upper)

    def set_costs(self, cost: np.ndarray) -> None:
        """Minimise cost . x from the next solve on."""
        self.lp.cost[:] = cost
        if self._highs is not None:
            if not self.repass:
                cols = np.arange(len(cost), dtype=np.int32)
                self._highs.changeColsCost(len(cost), cols, self.lp.cost)
        else:
            assert self._model is not None
            self._model.set_costs(cost)

    def run(self) -> LpStatus:
        """Solve; OPTIMAL (solution loaded) or INFEASIBLE; SolverError for anything else."""
        if self._highs is None:
            assert self._model is not None
            values = self._model.solve_if_feasible(self.spec)
            if values is None:
                return LpStatus.INFEASIBLE
            self.solution = values
            return LpStatus.OPTIMAL
        import highspy

        highs = self._highs
        if self.repass:
            highs.passModel(highs_lp(self.lp))
        highs.run()
        status = highs.getModelStatus()
        if status == highspy.HighsModelStatus.kOptimal:
            solution = highs.getSolution()
            self.solution = np.asarray(solution.col_value)
            self.row_duals = np.asarray(solution.row_dual)
            return LpStatus.OPTIMAL
        if status in (
            highspy.HighsModelStatus.kInfeasible,
            highspy.HighsModelStatus.kUnboundedOrInfeasible,
        ):
            return LpStatus.INFEASIBLE
        raise SolverError(f"HiGHS ended with {highs.modelStatusToString(status)}")
