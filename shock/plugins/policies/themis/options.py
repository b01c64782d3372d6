"""The themis policy's knobs (`--policy-option key=value`), with their defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ThemisOptions:
    # f: only the ceil((1 - f) x jobs) jobs with the worst rho are offered freed GPUs
    # (f = 0: every job; f -> 1: only the worst). The paper's evaluation uses 0.8.
    fairness_knob: float = 0.8
    # Seconds a granted GPU share stays with its job before it returns to the arbiter. The
    # paper's evaluation uses 10-minute leases.
    lease_s: float = 600.0
    # Relative MIP gap of each proportional-fair solve. The hidden payments compare optima, so
    # they are exact only when the solves are (the default is as tight as HiGHS allows).
    mip_gap: float = 1e-9
    # Seconds per solve (None: no limit); a solve stopped early keeps its incumbent.
    time_limit_s: float = 0.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.fairness_knob < 1.0):
            raise ValueError(
                f"themis: fairness_knob must be in [0, 1) (0 offers every job, values near 1 "
                f"only the worst), got {self.fairness_knob}"
            )
        if not (math.isfinite(self.lease_s) and self.lease_s > 0):
            raise ValueError(f"themis: lease_s must be a number of seconds > 0, got {self.lease_s}")
        if not (math.isfinite(self.mip_gap) and 0.0 <= self.mip_gap < 1.0):
            raise ValueError(f"themis: mip_gap must be in [0, 1), got {self.mip_gap}")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s >= 0):
            raise ValueError(
                f"themis: time_limit_s must be >= 0 seconds (0: no limit), got {self.time_limit_s}"
            )
