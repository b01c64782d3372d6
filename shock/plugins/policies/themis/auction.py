"""One Themis auction: the proportional-fair assignment of offered GPUs, and partial allocation.

Each bidder j needs a gang of s_j GPUs of one worker type (shock's jobs have a fixed scale
factor), so its feasible bundles are "s_j GPUs of type w" for each type with at least s_j
offered GPUs, and its bid is the rho it would reach with each (`rho[j, w]`), beside the rho
it reaches if it wins nothing (`rho[j, 0]`). Proportional fairness maximises

    sum_j log(1 / rho_j(chosen bundle))

With y[j, w] = 1 when j wins type w (at most one per job, capacity per type) this is

    maximise  sum_{j, w} g[j, w] y[j, w]  (+ the constant sum_j log(1 / rho[j, 0]))
    g[j, w] = log(rho[j, 0] / rho[j, w])

linear in the binaries: the log is taken over the finite set of values each job's rho can
take, and since a job picks exactly one of them the objective is the log exactly, with no
approximation. Partial allocation (Cole, Gkatzelis and Goel, 2013): winner i keeps the
fraction

    c_i = prod_{j != i} (1 / rho_j under the full optimum) / prod_{j != i} (1 / rho_j under
          the optimum of the auction without i) = exp(G - g_i - G_{-i})

of its bundle, where G and G_{-i} are the optimal total gains with and without i. Its
utility c_i / rho_i is then the whole auction's welfare divided by a number it cannot
influence, so no misreport raises it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from shock.api import MatrixLP, SolverSpec, solve_matrix_milp

# Gains at or below this are no gain: such a bundle is never worth a GPU.
MIN_GAIN = 1e-12


@dataclass(frozen=True, slots=True)
class Bid:
    job_id: int
    gpus: int  # the job's scale factor: every bundle is this many GPUs of one type
    rho_without: float  # the rho it reaches if it wins nothing
    rho_with: Mapping[int, float]  # worker-type column -> rho with a gang of that type

    def gain(self, column: int) -> float:
        return math.log(self.rho_without / self.rho_with[column])


@dataclass(frozen=True, slots=True)
class AuctionResult:
    bundles: dict[int, int] = field(default_factory=dict)  # winner -> worker-type column
    kept: dict[int, float] = field(default_factory=dict)  # winner -> c_i, the fraction it keeps
    welfare_gain: float = 0.0  # G: the optimum's total gain over everyone winning nothing
    solves: int = 0
    solve_seconds: float = 0.0


def proportional_fair(
    bids: Sequence[Bid], offered: np.ndarray, spec: SolverSpec
) -> tuple[dict[int, int], float]:
    """The proportional-fair assignment of `offered` GPUs (per type) to `bids`: each winner's
    worker-type column, and the total gain G."""
    pairs = [
        (b, w)
        for b, bid in enumerate(bids)
        for w in sorted(bid.rho_with)
        if bid.gpus <= offered[w] and bid.gain(w) > MIN_GAIN
    ]
    if not pairs:
        return {}, 0.0
    gains = np.array([bids[b].gain(w) for b, w in pairs])
    chosen = _solve(bids, pairs, gains, offered, spec)
    winners = {bids[pairs[k][0]].job_id: pairs[k][1] for k in np.flatnonzero(chosen > 0.5)}
    return winners, float(gains[chosen > 0.5].sum())


def run_auction(bids: Sequence[Bid], offered: np.ndarray, spec: SolverSpec) -> AuctionResult:
    """The full assignment, then one solve without each winner for its hidden payment: the
    n + 1 solves of a partial-allocation auction, timed."""
    started = time.perf_counter()
    bundles, total = proportional_fair(bids, offered, spec)
    solves = 1
    kept: dict[int, float] = {}
    for bid in bids:
        column = bundles.get(bid.job_id)
        if column is None:
            continue
        others = [b for b in bids if b.job_id != bid.job_id]
        _, without = proportional_fair(others, offered, spec)
        solves += 1
        # Rounding in the solver can push the ratio a hair above 1.
        kept[bid.job_id] = min(1.0, math.exp(total - bid.gain(column) - without))
    return AuctionResult(bundles, kept, total, solves, time.perf_counter() - started)


def exact_spec(spec: SolverSpec, mip_gap: float, time_limit_s: float | None) -> SolverSpec:
    """The run's solver with the auction's own gap and time limit."""
    return replace(spec, mip_gap=mip_gap, time_limit_s=time_limit_s)


def _solve(
    bids: Sequence[Bid],
    pairs: list[tuple[int, int]],
    gains: np.ndarray,
    offered: np.ndarray,
    spec: SolverSpec,
) -> np.ndarray:
    """The MILP over y[choice] (binary): maximise gains . y; rows are one per bidder (at most
    one bundle each), then one per worker type (its offered GPUs). HiGHS takes it directly,
    any other MILP solver as a Pyomo model of the same matrix."""
    n_bidders = len(bids)
    index = np.empty(2 * len(pairs), dtype=np.int32)
    value = np.empty(2 * len(pairs))
    for k, (b, w) in enumerate(pairs):
        index[2 * k], value[2 * k] = b, 1.0
        index[2 * k + 1], value[2 * k + 1] = n_bidders + w, float(bids[b].gpus)
    lp = MatrixLP(
        cost=-gains,
        col_lower=np.zeros(len(pairs)),
        col_upper=np.ones(len(pairs)),
        row_lower=np.full(n_bidders + len(offered), -np.inf),
        row_upper=np.concatenate([np.ones(n_bidders), np.asarray(offered, dtype=float)]),
        a_start=np.arange(0, 2 * len(pairs) + 1, 2, dtype=np.int32),
        a_index=index,
        a_value=value,
    )
    return solve_matrix_milp(lp, np.ones(len(pairs), dtype=bool), spec)
