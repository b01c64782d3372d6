"""The point a conic interior-point solver of ECOS's design stops at, on a time-fraction polytope.

Gavel's and Shockwave's feasibility problems (a constant objective, so every feasible x is
optimal) are answered by ECOS, and which feasible point ECOS returns is decided by its method,
not by the problem: the answer is neither a vertex nor the analytic centre. Their linear
programs with an objective are answered by it too, and there its answer is not the exact
optimum: a share the optimum sets to 0 comes back as a tiny number (about 1e-8, sometimes a
tiny negative one), and Gavel's round mechanism ranks jobs by those numbers (a job never run
gets priority share x 1e9). Reproducing those policies means running that method. It is the
primal-dual method for cone programs published with CVXOPT (Vandenberghe, "The CVXOPT linear
and quadratic cone program solvers") and ECOS (Domahidi, Chu, Boyd, ECC 2013), here for the
non-negative orthant only:

- the problem min c'x subject to G x <= h (c = 0 for a feasibility problem) is first
  equilibrated (three Ruiz passes: every row and column divided by the square root of its
  largest absolute entry), which fixes the geometry the method works in;
- the start is x = argmin ||G x - h||, s = h - G x, and z = argmin ||z|| subject to G'z = -c
  (z = 0 when c = 0), s and z shifted into the orthant;
- it follows the homogeneous self-dual embedding (tau, kappa) with Mehrotra's predictor-
  corrector: centring sigma = (1 - affine step)^3 in [1e-4, 1], steps of 0.99 of the way to
  the boundary, at most 0.999;
- it stops when the residuals are below 1e-8 of the data's scale and the gap s'z below 1e-8
  or below 1e-8 of the objective's value, and gives no answer on a certificate of
  infeasibility, a step that makes no progress or a residual that blows up (where ECOS
  reports no optimal solution).

The polytope has the time-fraction structure (x[j, w] >= 0, sum_w x[j, w] <= 1,
sum_j s_j x[j, w] <= N_w, and in the feasibility problems sum_w r[j, w] x[j, w] >= d_j), so
each Newton system is solved with m small n x n solves and the Woodbury identity, as in
shock.lp.analytic_centre. With an objective the method runs into the optimum's face, where
the scalings span twenty orders of magnitude; there each system is solved in augmented form
(m small (n + 1) x (n + 1) solves and an n x n Schur complement) and refined iteratively, as
ECOS refines its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EQUILIBRATION_PASSES = 3
_TOLERANCE = 1e-8  # residuals, absolute gap
_STEP_FRACTION = 0.99
_MAX_STEP = 0.999
_MIN_STEP = 1e-6
_MIN_CENTRING = 1e-4
_MAX_ITERATIONS = 100
_BLOW_UP = 500.0  # growth of the primal residual in one step that stops the method
_TINY = 1e-13
# ECOS's iterative refinement of each Newton direction: at most 9 corrections, until the
# residual is below 1e-14 of the right-hand side or stops shrinking 6-fold.
_REFINEMENTS = 9
_LINSYS = 1e-14
_REFINEMENT_GAIN = 6.0


@dataclass
class _Rows:
    """G's four blocks of rows, each as an m x n array of coefficients on x[j, w]:
    `bound` (row (j, w): x[j, w] >= 0, as -x <= 0), `capacity` (row w), `share` (row j:
    sum_w x <= 1) and `rate` (row j: -sum_w r x <= -d; None where the problem has no such
    rows)."""

    bound: np.ndarray
    capacity: np.ndarray
    share: np.ndarray
    rate: np.ndarray | None

    def times(self, x: np.ndarray) -> np.ndarray:
        blocks = [
            (self.bound * x).ravel(),
            (self.capacity * x).sum(axis=0),
            (self.share * x).sum(axis=1),
        ]
        if self.rate is not None:
            blocks.append((self.rate * x).sum(axis=1))
        return np.concatenate(blocks)

    def transpose_times(self, z: np.ndarray) -> np.ndarray:
        bound, capacity, share, rate = self.split(z)
        product = (
            self.bound * bound + self.capacity * capacity[None, :] + self.share * share[:, None]
        )
        if self.rate is not None:
            product = product + self.rate * rate[:, None]
        return product

    def split(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        m, n = self.bound.shape
        return (
            v[: m * n].reshape(m, n),
            v[m * n : m * n + n],
            v[m * n + n : m * n + n + m],
            v[m * n + n + m :],
        )

    def row_maxima(self) -> np.ndarray:
        blocks = [
            np.abs(self.bound).ravel(),
            np.abs(self.capacity).max(axis=0),
            np.abs(self.share).max(axis=1),
        ]
        if self.rate is not None:
            blocks.append(np.abs(self.rate).max(axis=1))
        return np.concatenate(blocks)

    def column_maxima(self) -> np.ndarray:
        blocks = [self.bound, self.capacity, self.share]
        if self.rate is not None:
            blocks.append(self.rate)
        return np.max(np.abs(np.stack(blocks)), axis=0)

    def scaled(self, rows: np.ndarray, columns: np.ndarray) -> _Rows:
        """diag(1 / rows) G diag(1 / columns)."""
        bound, capacity, share, rate = self.split(rows)
        return _Rows(
            self.bound / bound / columns,
            self.capacity / capacity[None, :] / columns,
            self.share / share[:, None] / columns,
            None if self.rate is None else self.rate / rate[:, None] / columns,
        )

    def solve_augmented(
        self, weights: np.ndarray, rhs_x: np.ndarray, rhs_z: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """[0 G'; G -D] [dx; dz] = [rhs_x; rhs_z], D = diag(1 / weights), G without rate rows,
        the way that stays accurate when the weights span many orders of magnitude (near an
        optimum): the bound rows are eliminated (diagonal), each job's share row is kept
        beside its x in a small (n + 1) x (n + 1) system solved with pivoting, and the
        capacity rows' dz come from their n x n Schur complement, so no huge weight ever
        multiplies a right-hand side that a subtraction must then cancel."""
        assert self.rate is None
        m, n = self.bound.shape
        bound_w, capacity_w, share_w, _ = self.split(weights)
        bound_r, capacity_r, share_r, _ = self.split(rhs_z)
        # Bound rows: dz_b = w_b (beta dx - r_b), so the x rows get beta^2 w_b on the diagonal.
        reduced = rhs_x + self.bound * bound_w * bound_r
        blocks = np.zeros((m, n + 1, n + 1))
        blocks[:, np.arange(n), np.arange(n)] = self.bound**2 * bound_w
        blocks[:, :n, n] = self.share
        blocks[:, n, :n] = self.share
        blocks[:, n, n] = -1.0 / share_w
        # Right-hand sides: the job's own, then one per capacity row (its coefficient in x).
        sides = np.zeros((m, n + 1, n + 1))
        sides[:, :n, 0] = reduced
        sides[:, n, 0] = share_r
        sides[:, np.arange(n), 1 + np.arange(n)] = self.capacity
        solved = np.linalg.solve(blocks, sides)
        own, per_capacity = solved[:, :, 0], solved[:, :, 1:]
        # Capacity rows: sum_j c_j dx_j - dz_c / w_c = r_c with dx_j = own_j - per_j dz_c.
        schur = np.einsum("jv,jvw->vw", self.capacity, per_capacity[:, :n, :])
        schur[np.arange(n), np.arange(n)] += 1.0 / capacity_w
        dz_capacity = np.linalg.solve(schur, (self.capacity * own[:, :n]).sum(axis=0) - capacity_r)
        dx_and_share = own - np.einsum("jvw,w->jv", per_capacity, dz_capacity)
        dx = dx_and_share[:, :n]
        dz_bound = bound_w * (self.bound * dx - bound_r)
        dz = np.concatenate([dz_bound.ravel(), dz_capacity, dx_and_share[:, n]])
        return dx, dz

    def solve_normal(self, weights: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """(G' diag(weights) G)^-1 rhs: per-job n x n blocks plus one rank-one term per
        worker type (its capacity row), by the Woodbury identity."""
        bound, capacity, share, rate = self.split(weights)
        if self.bound.shape[1] == 1:  # one worker type
            return self._solve_normal_one_type(bound, capacity, share, rate, rhs)
        return self._solve_normal_blocks(bound, capacity, share, rate, rhs)

    def _solve_normal_blocks(
        self,
        bound: np.ndarray,
        capacity: np.ndarray,
        share: np.ndarray,
        rate: np.ndarray,
        rhs: np.ndarray,
    ) -> np.ndarray:
        m, n = self.bound.shape
        blocks = np.zeros((m, n, n))
        blocks[:, np.arange(n), np.arange(n)] = bound * self.bound**2
        blocks += share[:, None, None] * self.share[:, :, None] * self.share[:, None, :]
        if self.rate is not None:
            blocks += rate[:, None, None] * self.rate[:, :, None] * self.rate[:, None, :]
        # Columns of U, one per type w: capacity coefficients in column w, zero elsewhere.
        u = self.capacity[:, :, None] * np.eye(n)[None, :, :]
        solved = np.linalg.solve(blocks, np.concatenate([rhs[:, :, None], u], axis=2))
        b_inv_rhs, b_inv_u = solved[:, :, 0], solved[:, :, 1:]
        capacitance = np.diag(1.0 / capacity) + np.einsum("jv,jvw->vw", self.capacity, b_inv_u)
        correction = np.linalg.solve(capacitance, (self.capacity * b_inv_rhs).sum(axis=0))
        return b_inv_rhs - np.einsum("jvw,w->jv", b_inv_u, correction)

    def _solve_normal_one_type(
        self,
        bound: np.ndarray,
        capacity: np.ndarray,
        share: np.ndarray,
        rate: np.ndarray,
        rhs: np.ndarray,
    ) -> np.ndarray:
        """solve_normal with 1 x 1 blocks, by the arithmetic np.linalg.solve does there, so
        the result is the same to the bit, without two LAPACK calls per Newton system:
        OpenBLAS's getrs multiplies by the pivot's reciprocal when it solves for several
        right-hand sides (trsm: the job's blocks, two sides each) and divides by the pivot
        for one (trsv: the capacitance). The einsum calls get arrays of the same shapes and
        strides as in the general path, so they add in the same order."""
        diagonal = bound * self.bound**2 + share[:, None] * self.share * self.share
        if self.rate is not None:
            diagonal = diagonal + rate[:, None] * self.rate * self.rate
        if not diagonal.all():
            raise np.linalg.LinAlgError("Singular matrix")  # (as LAPACK reports a 0 pivot)
        sides = np.concatenate([rhs[:, :, None], self.capacity[:, :, None]], axis=2)
        solved = sides * (1.0 / diagonal)[:, :, None]
        b_inv_rhs, b_inv_u = solved[:, :, 0], solved[:, :, 1:]
        capacitance = np.diag(1.0 / capacity) + np.einsum("jv,jvw->vw", self.capacity, b_inv_u)
        if not capacitance.all():
            raise np.linalg.LinAlgError("Singular matrix")
        correction = (self.capacity * b_inv_rhs).sum(axis=0) / capacitance[0]
        return b_inv_rhs - np.einsum("jvw,w->jv", b_inv_u, correction)


def _equilibrate(rows: _Rows) -> tuple[_Rows, np.ndarray, np.ndarray]:
    row_scale = np.ones(rows.row_maxima().shape)
    column_scale = np.ones(rows.bound.shape)
    for _ in range(_EQUILIBRATION_PASSES):
        by_row, by_column = rows.row_maxima(), rows.column_maxima()
        by_row = np.where(by_row < 1e-6, 1.0, np.sqrt(by_row))
        by_column = np.where(by_column < 1e-6, 1.0, np.sqrt(by_column))
        rows = rows.scaled(by_row, by_column)
        row_scale *= by_row
        column_scale *= by_column
    return rows, row_scale, column_scale


def _into_orthant(r: np.ndarray) -> np.ndarray:
    """r shifted by 1 + the size of its most negative entry if one is <= 0, else by 0.01."""
    worst = max(-0.99, float(np.max(np.where(r <= 0, -r, -np.inf))))
    return r + 1.0 + worst


def _newton(
    rows: _Rows, weights: np.ndarray, rhs_x: np.ndarray, rhs_z: np.ndarray, refine: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """[0 G'; G -W^2] [dx; dz] = [rhs_x; rhs_z] with W^-2 = diag(weights). With `refine`
    (problems without rate rows), solved in augmented form and corrected by ECOS's
    iterative refinement: near the optimum the weights span many orders of magnitude and
    the normal equations lose the digits the method needs there."""
    if not refine:
        dx = rows.solve_normal(weights, rhs_x + rows.transpose_times(weights * rhs_z))
        return dx, weights * (rows.times(dx) - rhs_z)
    dx, dz = rows.solve_augmented(weights, rhs_x, rhs_z)
    threshold = (1.0 + max(float(np.abs(rhs_x).max()), float(np.abs(rhs_z).max()))) * _LINSYS
    previous = np.inf
    correction_x, correction_z = np.zeros_like(dx), np.zeros_like(dz)
    for refinement in range(_REFINEMENTS + 1):
        error_x = rhs_x - rows.transpose_times(dz)
        error_z = rhs_z - (rows.times(dx) - dz / weights)
        error = max(float(np.abs(error_x).max()), float(np.abs(error_z).max()))
        if refinement > 0 and error > previous:  # no better: undo the last correction
            return dx - correction_x, dz - correction_z
        if (
            refinement == _REFINEMENTS
            or error < threshold
            or (refinement > 0 and previous < _REFINEMENT_GAIN * error)
        ):
            break
        previous = error
        correction_x, correction_z = rows.solve_augmented(weights, error_x, error_z)
        dx, dz = dx + correction_x, dz + correction_z
    return dx, dz


def _step(
    lam: np.ndarray,
    ds: np.ndarray,
    dz: np.ndarray,
    tau: float,
    dtau: float,
    kappa: float,
    dkappa: float,
) -> float:
    """The largest step keeping s, z, tau, kappa >= 0 (ds, dz scaled by W^-1 and W)."""
    rho, sigma = float(np.min(ds / lam)), float(np.min(dz / lam))
    worst = min(rho, sigma)
    alpha = 1.0 / -worst if worst < 0 else 1.0 / _TINY
    for value, change in ((tau, dtau), (kappa, dkappa)):
        limit = -value / change if change != 0 else -np.inf
        if 0 < limit < alpha:
            alpha = limit
    return min(max(alpha, _MIN_STEP), _MAX_STEP)


def conic_interior_point(
    rates: np.ndarray,
    floors: np.ndarray,
    scale: np.ndarray,
    capacity: np.ndarray,
) -> np.ndarray | None:
    """ECOS's kind of answer to: find x (m x n) with x >= 0, sum_w x[j, w] <= 1,
    sum_j scale_j x[j, w] <= capacity_w, sum_w rates[j, w] x[j, w] >= floors_j.
    None when the method does not reach its tolerances (then ECOS reports no optimum)."""
    m, n = rates.shape
    rows = _Rows(
        -np.ones((m, n)),
        np.repeat(scale[:, None].astype(float), n, axis=1),
        np.ones((m, n)),
        -rates.astype(float),
    )
    h = np.concatenate([np.zeros(m * n), capacity.astype(float), np.ones(m), -floors])
    return _guarded(rows, h, np.zeros((m, n)), refine=False)


def conic_interior_point_optimum(
    gains: np.ndarray, scale: np.ndarray, capacity: np.ndarray
) -> np.ndarray | None:
    """ECOS's kind of answer to: maximise sum gains[j, w] x[j, w] (m x n) over x >= 0,
    sum_w x[j, w] <= 1, sum_j scale_j x[j, w] <= capacity_w. Not clipped: a share the optimum
    sets to 0 comes back as the method leaves it, tiny and of either sign. None when the
    method does not reach its tolerances."""
    m, n = gains.shape
    rows = _Rows(
        -np.ones((m, n)),
        np.repeat(scale[:, None].astype(float), n, axis=1),
        np.ones((m, n)),
        None,
    )
    h = np.concatenate([np.zeros(m * n), capacity.astype(float), np.ones(m)])
    return _guarded(rows, h, -gains.astype(float), refine=True)


def _guarded(
    original: _Rows, h_original: np.ndarray, cost: np.ndarray, refine: bool
) -> np.ndarray | None:
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _solve(original, h_original, cost, refine)
    except np.linalg.LinAlgError:
        return None  # a singular Newton system: ECOS reports numerical trouble


def _solve(
    original: _Rows, h_original: np.ndarray, cost: np.ndarray, refine: bool
) -> np.ndarray | None:
    """min cost'x subject to G x <= h (G = original), by ECOS's method; `refine` refines each
    Newton direction as ECOS does (the feasibility problems were matched without it)."""
    m, n = original.bound.shape
    rows, row_scale, column_scale = _equilibrate(original)
    h = h_original / row_scale
    c = cost / column_scale
    cones = h.size
    h_norm = max(1.0, float(np.linalg.norm(h)))
    c_norm = max(1.0, float(np.linalg.norm(c)))

    # Start: least squares for x (G'G x = G'h) and its residual; z = argmin ||z|| subject to
    # G'z = -c (G'G v = -c, z = G v; 0 when c = 0); s and z moved into the orthant.
    ones = np.ones(cones)
    if refine:
        x, minus_residual = _newton(rows, ones, np.zeros_like(c), h, refine)
        s = _into_orthant(-minus_residual)
        z = _into_orthant(_newton(rows, ones, -c, np.zeros(cones), refine)[1])
    else:
        x = rows.solve_normal(ones, rows.transpose_times(h))
        s = _into_orthant(h - rows.times(x))
        z = _into_orthant(np.zeros(cones))
    tau = kappa = 1.0
    previous_primal = np.inf
    step = 1.0
    for _ in range(_MAX_ITERATIONS + 1):
        g_z = rows.transpose_times(z)
        rx = -g_z - tau * c
        rz = s + rows.times(x) - tau * h
        cx = float((c * x).sum())
        hz = float(h @ z)
        rt = kappa + cx + hz
        gap = float(s @ z)
        mu = (gap + kappa * tau) / (cones + 1)
        x_norm, z_norm = float(np.linalg.norm(x)), float(np.linalg.norm(z))
        primal = float(np.linalg.norm(rz)) / max(h_norm + x_norm + float(np.linalg.norm(s)), 1.0)
        primal /= tau
        dual = float(np.linalg.norm(rx)) / max(c_norm + z_norm, 1.0) / tau
        primal_cost, dual_cost = cx / tau, -hz / tau
        if primal_cost < 0:
            relative_gap = gap / -primal_cost
        else:
            relative_gap = gap / dual_cost if dual_cost > 0 else np.nan
        if not np.isfinite(primal) or primal > _BLOW_UP * previous_primal or gap < 0:
            return None  # ECOS's safeguards: it falls back and reports at best inaccuracy
        previous_primal = primal
        if (
            (-cx > 0 or -hz >= -_TOLERANCE)
            and primal < _TOLERANCE
            and dual < _TOLERANCE
            and (gap < _TOLERANCE or relative_gap < _TOLERANCE)
        ):
            return (x / (column_scale * tau)).reshape(m, n)
        # A certificate that no x exists: h'z < 0 with G'z ~ 0 (and kappa outgrowing tau).
        if hz / max(z_norm, 1.0) < -_TOLERANCE:
            certificate = float(np.linalg.norm(g_z)) / max(z_norm, 1.0)
            if certificate < _TOLERANCE and (
                tau < kappa or (tau < _TOLERANCE and kappa < _TOLERANCE)
            ):
                return None
        if step <= _MIN_STEP * _STEP_FRACTION:
            return None  # no progress: ECOS stops there short of its tolerances
        # Scaling W = diag(sqrt(s / z)); lambda = W z.
        w2 = s / np.maximum(z, _TINY)
        w = np.sqrt(w2)
        lam = w * z
        weights = 1.0 / w2
        dx1, dz1 = _newton(rows, weights, -c, h, refine)
        denominator = kappa / tau - float((c * dx1).sum()) - float(h @ dz1)
        # Predictor.
        dx2, dz2 = _newton(rows, weights, rx, s - rz, refine)
        dtau_affine = (rt - kappa + float((c * dx2).sum()) + float(h @ dz2)) / denominator
        w_dz = w * (dz2 + dtau_affine * dz1)
        ds_by_w = -w_dz - lam
        dkappa_affine = -kappa - kappa / tau * dtau_affine
        affine = _step(lam, ds_by_w, w_dz, tau, dtau_affine, kappa, dkappa_affine)
        centring = min(max((1.0 - affine) ** 3, _MIN_CENTRING), 1.0)
        # Corrector.
        ds_combined = lam * lam + ds_by_w * w_dz - centring * mu
        ds_by_lambda = ds_combined / np.maximum(lam, _TINY)
        dx2, dz2 = _newton(
            rows,
            weights,
            (1.0 - centring) * rx,
            -(1.0 - centring) * rz + w * ds_by_lambda,
            refine,
        )
        b_kappa = kappa * tau + dkappa_affine * dtau_affine - centring * mu
        dtau = (
            (1.0 - centring) * rt - b_kappa / tau + float((c * dx2).sum()) + float(h @ dz2)
        ) / denominator
        dx = dx2 + dtau * dx1
        dz = dz2 + dtau * dz1
        w_dz = w * dz
        ds_by_w = -(ds_by_lambda + w_dz)
        dkappa = -(b_kappa + kappa * dtau) / tau
        step = _step(lam, ds_by_w, w_dz, tau, dtau, kappa, dkappa) * _STEP_FRACTION
        x = x + step * dx
        z = z + step * dz
        s = s + step * (w * ds_by_w)
        kappa += step * dkappa
        tau += step * dtau
    return None
