"""The shockwave policy's knobs (`--policy-option key=value`), with their defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShockwaveOptions:
    # T: rounds planned ahead.
    num_rounds: int = 10
    # Round length the plan assumes; 0: the mechanism's (--round-length / the preset's).
    round_length_s: float = 0.0
    # Re-plan after this many rounds even without arrivals or completions.
    replan_every_rounds: int = 5
    # Weight of the largest predicted remaining run time (in units of the planning window).
    k: float = 10.0
    # lambda: a job whose projected rho exceeds the threshold gets log-utility weight rho^lambda.
    lambda_: float = 2.0
    rho_threshold: float = 1.0
    # Try first a plan giving every job above the threshold its equal share of the window.
    ftf_constraint: bool = True
    # Pieces of each piecewise-linear log utility; 0: one per round (exact at every integer).
    log_pieces: int = 0
    # Solver limits per plan (--time-limit overrides the first).
    time_limit_s: float = 5.0
    mip_gap: float = 0.01
    # Dirichlet prior: pseudo-epochs per batch-size mode.
    prior_epochs: float = 1.0

    def __post_init__(self) -> None:
        if self.num_rounds < 1:
            raise ValueError("num_rounds must be >= 1")
        if self.replan_every_rounds < 1:
            raise ValueError("replan_every_rounds must be >= 1")
        if self.round_length_s < 0 or self.k < 0 or self.lambda_ < 0:
            raise ValueError("round_length_s, k and lambda must be >= 0")
        if self.log_pieces < 0 or self.time_limit_s <= 0 or not 0 <= self.mip_gap < 1:
            raise ValueError("log_pieces >= 0, time_limit_s > 0 and 0 <= mip_gap < 1 needed")
        if self.prior_epochs < 0:
            raise ValueError("prior_epochs must be >= 0")
