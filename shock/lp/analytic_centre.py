"""The analytic centre of a time-fraction polytope with rate floors.

Gavel's and Shockwave's feasibility problems (solve for any x meeting every constraint, with a
constant objective) are answered by an interior-point solver (ECOS), whose answer lies near the
analytic centre of the feasible set: the point that maximises the sum of the logarithms of all
slacks. Reproducing such a policy means computing that centre. The polytope is

    x[j, w] >= 0,   sum_w x[j, w] <= 1,   sum_j s_j x[j, w] <= N_w,
    sum_w r[j, w] x[j, w] >= d_j,

and the centre is found by damped Newton steps on the log barrier (self-concordant, so the
steps converge from any strictly feasible start). Its Hessian is block diagonal per job (the
job's own rows) plus one rank-one term per worker type (the capacity rows), so each Newton
system is solved with m small n x n solves and the Woodbury identity: O(m n^3), not O((mn)^3).
"""

from __future__ import annotations

import numpy as np

_TOLERANCE = 1e-10  # half the squared Newton decrement at which the centre is reached
_MAX_STEPS = 100


def slacks(
    x: np.ndarray, rates: np.ndarray, floors: np.ndarray, scale: np.ndarray, capacity: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, 1 - row sums, capacity - GPUs used, rate - floor): every one must stay > 0."""
    return (
        x,
        1.0 - x.sum(axis=1),
        capacity - scale @ x,
        (rates * x).sum(axis=1) - floors,
    )


def is_strictly_feasible(
    x: np.ndarray, rates: np.ndarray, floors: np.ndarray, scale: np.ndarray, capacity: np.ndarray
) -> bool:
    return all(bool((part > 0).all()) for part in slacks(x, rates, floors, scale, capacity))


def analytic_centre(
    start: np.ndarray,
    rates: np.ndarray,
    floors: np.ndarray,
    scale: np.ndarray,
    capacity: np.ndarray,
) -> np.ndarray:
    """The analytic centre, from a strictly feasible `start` (m x n)."""
    x = start.astype(float).copy()
    m, n = x.shape
    ones = np.ones(n)
    for _ in range(_MAX_STEPS):
        a, b, c, e = slacks(x, rates, floors, scale, capacity)
        gradient = -1.0 / a + (1.0 / b)[:, None] + scale[:, None] / c[None, :] - rates / e[:, None]
        # Per-job blocks: diag(1/a^2) + 11'/b^2 + r r'/e^2; capacity: sum_w u_w u_w' / c_w^2.
        blocks = np.zeros((m, n, n))
        blocks[:, np.arange(n), np.arange(n)] = 1.0 / a**2
        blocks += (1.0 / b**2)[:, None, None] * np.outer(ones, ones)[None, :, :]
        blocks += (1.0 / e**2)[:, None, None] * rates[:, :, None] * rates[:, None, :]
        # Right-hand sides per job: the gradient and the n columns of U (u_w = s_j e_w).
        rhs = np.concatenate([gradient[:, :, None], scale[:, None, None] * np.eye(n)], axis=2)
        solved = np.linalg.solve(blocks, rhs)
        s_inv_g, s_inv_u = solved[:, :, 0], solved[:, :, 1:]
        # Woodbury: (S + U C U')^-1 g = S^-1 g - S^-1 U (C^-1 + U' S^-1 U)^-1 U' S^-1 g.
        capacitance = np.diag(c**2) + np.einsum("j,jvw->vw", scale, s_inv_u)
        correction = np.linalg.solve(capacitance, scale @ s_inv_g)
        step = -(s_inv_g - np.einsum("jvw,w->jv", s_inv_u, correction))
        decrement = float(-(gradient * step).sum())
        if decrement / 2 < _TOLERANCE:
            break
        size = 1.0 / (1.0 + np.sqrt(decrement)) if decrement > 0.25 else 1.0
        while not is_strictly_feasible(x + size * step, rates, floors, scale, capacity):
            size *= 0.5
            if size < 1e-12:
                return x
        x = x + size * step
    return x
