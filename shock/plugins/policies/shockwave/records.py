"""What the shockwave policy keeps about each job and its plan, and their JSON forms (so that a
scheduler restarted from its journal goes on with the same targets, calibration and plan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shock.plugins.policies.shockwave.planner import Plan
from shock.plugins.policies.shockwave.predictor import JobProfile, Measurement, SpeedTally


@dataclass(slots=True)
class JobHistory:
    """What the policy keeps about one job."""

    profile: JobProfile
    admitted_s: float  # when the policy first saw it: Shockwave's submit time
    samples_per_epoch: float  # 0 for a model without a known dataset
    # (time, finish-time estimate at a uniform share), one per re-estimation.
    finish_estimates: list[tuple[float, float]] = field(default_factory=list)
    # Speed in each round it ran, and the factor on its profiled epoch durations.
    measurements: list[Measurement] = field(default_factory=list)
    calibration: float = 1.0
    # The epochs it did in the rounds it ran, against the profile's (calibration=running).
    speed: SpeedTally = field(default_factory=SpeedTally)
    # Its epochs done, speed and batch size when the last round was planned (epochs, not
    # steps: a batch-size change rescales the steps).
    last_epochs: float = 0.0
    last_rate: float = 0.0
    last_batch_size: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_sizes": list(self.profile.batch_sizes),
            "durations_s": list(self.profile.durations_s),
            "admitted_s": self.admitted_s,
            "samples_per_epoch": self.samples_per_epoch,
            "finish_estimates": [list(pair) for pair in self.finish_estimates],
            "measurements": [[m.time_s, m.steps_per_s, m.batch_size] for m in self.measurements],
            "calibration": self.calibration,
            "speed": [self.speed.measured_epochs, self.speed.profiled_epochs],
            "last": [self.last_epochs, self.last_rate, self.last_batch_size],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobHistory:
        profile = JobProfile(
            tuple(int(b) for b in data["batch_sizes"]),
            tuple(float(d) for d in data["durations_s"]),
        )
        last_epochs, last_rate, last_batch_size = data["last"]
        return cls(
            profile=profile,
            admitted_s=float(data["admitted_s"]),
            samples_per_epoch=float(data["samples_per_epoch"]),
            finish_estimates=[(float(t), float(v)) for t, v in data["finish_estimates"]],
            measurements=[
                Measurement(float(t), float(rate), int(size))
                for t, rate, size in data["measurements"]
            ],
            calibration=float(data["calibration"]),
            speed=SpeedTally(*(float(epochs) for epochs in data["speed"])),
            last_epochs=float(last_epochs),
            last_rate=float(last_rate),
            last_batch_size=int(last_batch_size),
        )


def plan_to_json(plan: Plan) -> dict[str, Any]:
    return {
        "job_ids": list(plan.job_ids),
        "rounds": plan.rounds.tolist(),
        "ftf_enforced": plan.ftf_enforced,
        "objective": plan.objective,
        "counts": list(plan.counts),
        "ranked_by_milp": plan.ranked_by_milp,
    }


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    job_ids = tuple(int(j) for j in data["job_ids"])
    rounds = np.array(data["rounds"], dtype=float).reshape(len(job_ids), -1)
    return Plan(
        job_ids,
        rounds,
        bool(data["ftf_enforced"]),
        float(data["objective"]),
        tuple(int(c) for c in data["counts"]),
        bool(data["ranked_by_milp"]),
    )
