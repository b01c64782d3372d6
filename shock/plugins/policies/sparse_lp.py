"""One LP given by sparse row blocks, solved by HiGHS' matrix path or through Pyomo.

    minimise cost . v   s.t.  lower_b <= A_b v <= upper_b  (each block b),  0 <= v <= col_upper

For policies whose LPs are assembled from matrices (packed units): the Pyomo model has one
variable per column and one constraint per row, so every solver gets the same LP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shock.api import MatrixLP, SolverSpec, lazy_module, solve_matrix_lp, solve_pyomo

if TYPE_CHECKING:
    import pyomo.environ as pyo
    import scipy.sparse as sparse
else:
    pyo = lazy_module("pyomo.environ")
    sparse = lazy_module("scipy.sparse")


@dataclass(frozen=True, slots=True)
class RowBlock:
    matrix: sparse.spmatrix  # rows x all columns
    lower: np.ndarray
    upper: np.ndarray


def solve_blocks(
    cost: np.ndarray, blocks: list[RowBlock], col_upper: np.ndarray, solver: SolverSpec
) -> np.ndarray:
    """The optimal v (HiGHS: interior point, the centre of the optimal face)."""
    matrix = sparse.vstack([b.matrix for b in blocks]).tocsr()
    lower = np.concatenate([b.lower for b in blocks])
    upper = np.concatenate([b.upper for b in blocks])
    if solver.uses_fast_path:
        csc = matrix.tocsc()
        lp = MatrixLP(
            cost=cost,
            col_lower=np.zeros(len(cost)),
            col_upper=col_upper,
            row_lower=lower,
            row_upper=upper,
            a_start=csc.indptr.astype(np.int32),
            a_index=csc.indices.astype(np.int32),
            a_value=csc.data.astype(float),
        )
        return solve_matrix_lp(lp, solver)
    model = pyo.ConcreteModel()
    model.C = pyo.RangeSet(0, len(cost) - 1)
    model.v = pyo.Var(
        model.C,
        domain=pyo.NonNegativeReals,
        bounds=lambda _, c: (0.0, None if np.isinf(col_upper[c]) else float(col_upper[c])),
    )
    model.R = pyo.RangeSet(0, matrix.shape[0] - 1)

    def row(mo: pyo.ConcreteModel, r: int) -> object:
        start, end = matrix.indptr[r], matrix.indptr[r + 1]
        body = sum(
            float(value) * mo.v[int(col)]
            for col, value in zip(matrix.indices[start:end], matrix.data[start:end], strict=True)
        )
        low = None if np.isinf(lower[r]) else float(lower[r])
        high = None if np.isinf(upper[r]) else float(upper[r])
        if start == end:
            return pyo.Constraint.Skip
        return (low, body, high) if low != high else body == low

    model.rows = pyo.Constraint(model.R, rule=row)
    model.objective = pyo.Objective(
        expr=sum(float(cost[c]) * model.v[c] for c in np.flatnonzero(cost)), sense=pyo.minimize
    )
    solve_pyomo(model, solver)
    return np.array([model.v[c].value or 0.0 for c in model.C])
