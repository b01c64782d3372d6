"""The shockwave policy's knobs (`--policy-option key=value`), with their defaults.

Defaults are Shockwave's own (its tacc_32gpus configuration and scheduler constants) where
they are semantics; the solver limits are shock's, so that a 120-job run takes under a minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

RANKINGS = ("milp", "greedy", "slack")
CALIBRATIONS = ("running", "artifact", "off")


@dataclass(frozen=True, slots=True)
class ShockwaveOptions:
    # T: rounds planned ahead (tacc_32gpus "future_rounds").
    num_rounds: int = 20
    # Round length the plan assumes; 0: the mechanism's (--round-length / the preset's).
    round_length_s: float = 0.0
    # Also re-plan every this many rounds, whatever other re-plans happened in between
    # (Shockwave's simulator: REOPT_ROUNDS = 8, counted from the run's first round).
    replan_every_rounds: int = 8
    # Weight of the longest predicted run time left after the window, per second ("k").
    k: float = 1e-3
    # A job whose projected finish exceeds its fair-finish target by rho > rho_max gets
    # priority rho^lambda when the FTF constraint is relaxed ("lambda", "rhomax").
    lambda_: float = 12.0
    rho_max: float = 1.0
    # Priority power for such a job with less than one round left (Shockwave: 100).
    near_done_power: float = 100.0
    # Cap on a priority, so the MILP stays within the solver's numeric range (shock's; rho^100
    # alone can exceed 1e17).
    max_priority: float = 1e6
    # Measure rho's projected finish and target from the job's arrival, as finish-time
    # fairness defines rho (a ratio of durations); false: from time 0, as Shockwave's
    # artifact does (its ratio of absolute times moves little for jobs that arrive late).
    rho_since_arrival: bool = True
    # Epoch-duration calibration from measured progress: "running" (the epochs the job did in
    # the rounds it ran against the profile's at each round's batch size), "artifact"
    # (Shockwave's: samples counted from time 0, so also over time the job never ran), or
    # "off". Both calibrate when the two differ by more than 40% and keep the factor otherwise.
    calibration: str = "running"
    # Weight of the series average in the fair-finish target (Shockwave: 0.9).
    momentum: float = 0.9
    # Try first the plan in which every job meets its fair-finish target.
    ftf_constraint: bool = True
    # Progress fractions where the piecewise-linear log meets the log ("log_approximation_
    # bases"), and the stand-in for log(0) (Shockwave's logapx_origin).
    log_bases: str = "0,0.2,0.4,0.6,0.8,1"
    log_origin: float = 1e-6
    # How the planned rounds are placed in the window: "milp" (Shockwave's ranking MILP),
    # "greedy" (its order, greedily: makespan and JCT within 2%, 2-3x faster), "slack"
    # (least slack first, then priority).
    ranking: str = "greedy"
    # Solver limits per solve (--time-limit overrides the first); Shockwave: 15 s, gap 1e-3.
    time_limit_s: float = 2.0
    mip_gap: float = 1e-3

    def __post_init__(self) -> None:
        if self.num_rounds < 1:
            raise ValueError("num_rounds must be >= 1")
        if self.replan_every_rounds < 1:
            raise ValueError("replan_every_rounds must be >= 1")
        if self.round_length_s < 0 or self.k < 0 or self.lambda_ < 0:
            raise ValueError("round_length_s, k and lambda must be >= 0")
        if self.near_done_power < 0 or self.max_priority < 1 or not 0 <= self.momentum <= 1:
            raise ValueError("near_done_power >= 0, max_priority >= 1, 0 <= momentum <= 1 needed")
        if self.time_limit_s <= 0 or not 0 <= self.mip_gap < 1:
            raise ValueError("time_limit_s > 0 and 0 <= mip_gap < 1 needed")
        if not 0 < self.log_origin < 1:
            raise ValueError("log_origin must lie in (0, 1)")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {', '.join(CALIBRATIONS)}")
        if self.ranking not in RANKINGS:
            raise ValueError(f"ranking must be one of {', '.join(RANKINGS)}")
        self.bases()  # checks the text

    def bases(self) -> tuple[float, ...]:
        """The log bases as numbers: from 0 to 1, increasing."""
        try:
            values = tuple(float(part) for part in self.log_bases.split(","))
        except ValueError:
            raise ValueError(
                f"log_bases must be numbers separated by commas: '{self.log_bases}'"
            ) from None
        if (
            len(values) < 2
            or values[0] != 0.0
            or values[-1] != 1.0
            or any(b <= a for a, b in pairwise(values))
        ):
            raise ValueError("log_bases must rise from 0 to 1, e.g. 0,0.2,0.4,0.6,0.8,1")
        return values
