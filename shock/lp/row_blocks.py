"""An LP assembled from named blocks of sparse rows, as a `MatrixLP`.

    minimise cost . v   s.t.  lower_b <= A_b v <= upper_b  (each block b),
                              col_lower <= v <= col_upper

For policies whose LPs are assembled from matrices (packed units): each block is one kind of
constraint over all columns, stacked in the order given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shock.lp.matrix_lp import MatrixLP

if TYPE_CHECKING:
    import scipy.sparse as sparse


@dataclass(frozen=True, slots=True)
class RowBlock:
    name: str  # what its rows say, for readers and error messages
    matrix: sparse.spmatrix  # rows x all columns
    lower: np.ndarray
    upper: np.ndarray


def blocks_lp(
    cost: np.ndarray,
    blocks: list[RowBlock],
    col_upper: np.ndarray,
    col_lower: np.ndarray | None = None,
) -> MatrixLP:
    """The blocks stacked in order as one LP (columns v >= 0 unless `col_lower` says)."""
    import scipy.sparse as sparse

    matrix = sparse.vstack([b.matrix for b in blocks]).tocsr()
    csc = matrix.tocsc()
    return MatrixLP(
        cost=cost,
        col_lower=np.zeros(len(cost)) if col_lower is None else col_lower,
        col_upper=col_upper,
        row_lower=np.concatenate([b.lower for b in blocks]),
        row_upper=np.concatenate([b.upper for b in blocks]),
        a_start=csc.indptr.astype(np.int32),
        a_index=csc.indices.astype(np.int32),
        a_value=csc.data.astype(float),
    )
