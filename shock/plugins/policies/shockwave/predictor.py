"""Bayesian prediction of a dynamic job's remaining run time from its batch-size modes.

A job's future epochs are spread over batch-size modes (the batch sizes its model has in the
throughput table, from its initial one up). The share of epochs at each mode has a Dirichlet
prior with `prior_epochs` pseudo-epochs per mode; every epoch observed at a mode adds one.
The predicted remaining run time is remaining epochs x the posterior-mean epoch duration, where
each mode's epoch duration is ceil(samples / bs) / isolated throughput, calibrated by the ratio
of the table's throughput to the measured one at the job's current mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModeObservations:
    """Epochs observed at each batch-size mode, and each mode's table epoch duration (s)."""

    modes: tuple[int, ...]
    epoch_duration_s: tuple[float, ...]
    observed_epochs: tuple[float, ...]


def posterior_shares(observed_epochs: Sequence[float], prior_epochs: float) -> list[float]:
    """Posterior mean of the Dirichlet over modes: (prior + observed) / total."""
    weights = [prior_epochs + max(0.0, count) for count in observed_epochs]
    total = sum(weights)
    if total <= 0:
        return [1.0 / len(weights)] * len(weights)
    return [w / total for w in weights]


def predicted_epoch_duration_s(
    observations: ModeObservations, prior_epochs: float, calibration: float = 1.0
) -> float:
    """Expected duration of one future epoch."""
    shares = posterior_shares(observations.observed_epochs, prior_epochs)
    mean = sum(s * d for s, d in zip(shares, observations.epoch_duration_s, strict=True))
    return mean * calibration


def predicted_remaining_s(
    observations: ModeObservations,
    remaining_epochs: float,
    prior_epochs: float,
    calibration: float = 1.0,
) -> float:
    return max(0.0, remaining_epochs) * predicted_epoch_duration_s(
        observations, prior_epochs, calibration
    )


def attained_alone_s(observations: ModeObservations) -> float:
    """Run time alone of the epochs done so far, at the modes they ran at."""
    return sum(
        e * d
        for e, d in zip(observations.observed_epochs, observations.epoch_duration_s, strict=True)
    )


def calibration_factor(table_rate: float, measured_rate: float) -> float:
    """Measured epochs take table_rate / measured_rate times the table's duration."""
    if table_rate <= 0 or measured_rate <= 0:
        return 1.0
    return table_rate / measured_rate


def observations_from(
    durations_by_mode: Mapping[int, float], epochs_by_mode: Mapping[int, float]
) -> ModeObservations:
    modes = tuple(sorted(durations_by_mode))
    return ModeObservations(
        modes,
        tuple(durations_by_mode[m] for m in modes),
        tuple(epochs_by_mode.get(m, 0.0) for m in modes),
    )
