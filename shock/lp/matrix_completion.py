"""Low-rank matrix completion by probabilistic matrix factorisation (alternating ridge
regressions), the method Gavel's throughput estimator uses to fill in a new job's unmeasured
throughputs from the fully measured rows of its reference jobs.

A matrix X (rows: jobs, columns: features) with a mask of observed entries is approximated by
U V^T with U (rows x k) and V (columns x k) minimising

    sum over observed (i, j) of (X_ij - U_i . V_j)^2  +  mu (|U|^2 + |V|^2),

one factor at a time: with V fixed each row of U is a ridge regression on the observed
columns, and the other way round. Every row's (and column's) k x k system is solved in one
batched call, so a 27 x 81 matrix costs a few milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_RANK = 10  # Gavel's k
DEFAULT_REGULARISATION = 1e-2  # Gavel's mu
DEFAULT_MAX_ITERATIONS = 100
DEFAULT_TOLERANCE = 1e-4  # relative change of the observed-entry fit that stops the iteration


@dataclass(frozen=True, slots=True)
class CompletionSettings:
    rank: int = DEFAULT_RANK
    regularisation: float = DEFAULT_REGULARISATION
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    tolerance: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"rank must be >= 1, got {self.rank}")
        if not self.regularisation > 0:
            raise ValueError(f"regularisation must be > 0, got {self.regularisation}")
        if self.max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {self.max_iterations}")


def complete_matrix(
    values: np.ndarray,
    observed: np.ndarray,
    settings: CompletionSettings | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The low-rank reconstruction U V^T of `values` (float, rows x columns) from the entries
    where `observed` is true. Observed entries are returned as the reconstruction has them
    too; callers keep their measured values with `np.where(observed, values, completed)`.
    `start`: factors (U, V) to start from (e.g. those of the matrix without its last rows,
    see `starting_factors`); default: the truncated SVD of the matrix with its gaps at 0."""
    settings = settings or CompletionSettings()
    values = np.asarray(values, dtype=float)
    mask = np.asarray(observed, dtype=bool)
    if values.ndim != 2 or values.shape != mask.shape:
        raise ValueError(f"values {values.shape} and mask {mask.shape} must be one 2-d shape")
    rows, columns = values.shape
    rank = min(settings.rank, rows, columns)
    weight = mask.astype(float)
    target = np.where(mask, values, 0.0)
    if start is None:
        # Deterministic, and near the answer where few entries are missing (random starts
        # can leave a row observed in one column stuck at any scale).
        u, v = starting_factors(target, rank)
    else:
        u, v = start
        if u.shape != (rows, u.shape[1]) or v.shape != (columns, u.shape[1]):
            raise ValueError(f"start factors {u.shape}, {v.shape} do not fit {values.shape}")
        rank = u.shape[1]
    ridge = settings.regularisation * np.eye(rank)
    previous = np.inf
    for _ in range(settings.max_iterations):
        u = _ridge_rows(target, weight, v, ridge)
        v = _ridge_rows(target.T, weight.T, u, ridge)
        residual = weight * (target - u @ v.T)
        fit = float((residual**2).sum())
        if abs(previous - fit) <= settings.tolerance * max(fit, 1e-12):
            break
        previous = fit
    result: np.ndarray = u @ v.T
    return result


def starting_factors(matrix: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """U, V of the rank-`rank` truncated SVD of a (fully known) matrix, sqrt(S) on each side."""
    left, singular, right = np.linalg.svd(matrix, full_matrices=False)
    rank = min(rank, len(singular))
    root = np.sqrt(singular[:rank])
    return left[:, :rank] * root, right[:rank].T * root


def fit_rows(
    values: np.ndarray, observed: np.ndarray, factor: np.ndarray, regularisation: float
) -> np.ndarray:
    """Rows' factors that best explain their observed entries, given the columns' factors."""
    ridge = regularisation * np.eye(factor.shape[1])
    return _ridge_rows(np.where(observed, values, 0.0), observed.astype(float), factor, ridge)


def _ridge_rows(
    target: np.ndarray, weight: np.ndarray, factor: np.ndarray, ridge: np.ndarray
) -> np.ndarray:
    """Each row i: argmin_x sum_j w_ij (t_ij - x . f_j)^2 + mu |x|^2, all rows at once."""
    # Gram matrices of the observed columns per row, (rows, k, k), as one matrix product.
    rank = factor.shape[1]
    outer = (factor[:, :, None] * factor[:, None, :]).reshape(len(factor), rank * rank)
    gram = (weight @ outer).reshape(len(weight), rank, rank) + ridge
    rhs = (weight * target) @ factor  # (rows, k)
    solved: np.ndarray = np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]
    return solved
