"""What the shockwave policy predicts about a job: its remaining run time and its fair finish.

Shockwave's scheduler knows each job's epoch profile (batch size and isolated duration of
every epoch, from its adaptation model) and its epoch progress. The remaining run time is a
Dirichlet posterior over the batch-size modes of the profile:

- prior: E / M pseudo-epochs for each of the M modes of the job's E-epoch profile;
- observed: the modes of the profile's first p + 1 epochs (p = epochs done);
- the posterior's expected epochs per mode over the whole job, E x concentration / sum, less
  the epochs already seen at that mode (while at least one whole epoch is left of it);
- remaining run time = sum over modes of those epochs x the mode's mean epoch duration,
  scaled by (E - p) / max(E - p, int(expected epochs + 1)).

The job's finish-time estimate at a uniform share is arrival + (run time of the epochs done
+ remaining) / min(1, GPUs / jobs); the policy keeps a series of them, re-estimated when jobs
arrive or finish, and compares plans with their momentum average.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

# Shockwave re-calibrates profiled epoch durations only when the measured samples stray more
# than 40% from the profile's (JobMetaData.calibrate_profiled_epoch_duration).
CALIBRATION_TOLERANCE = 0.4


@dataclass(frozen=True, slots=True)
class JobProfile:
    """A job's batch size and isolated duration (s, fastest worker type) in every epoch."""

    batch_sizes: tuple[int, ...]
    durations_s: tuple[float, ...]
    # Mean epoch duration per batch size, computed once: the policy asks for it for every job
    # in every round (over 60,000 times in a 220-job run).
    _means: Mapping[int, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.batch_sizes) != len(self.durations_s) or not self.batch_sizes:
            raise ValueError("a profile needs one batch size and one duration per epoch")
        sums: dict[int, float] = {}
        counts: Counter[int] = Counter(self.batch_sizes)
        for size, duration in zip(self.batch_sizes, self.durations_s, strict=True):
            sums[size] = sums.get(size, 0.0) + duration
        object.__setattr__(self, "_means", {size: sums[size] / counts[size] for size in sums})

    @property
    def epochs(self) -> int:
        return len(self.batch_sizes)

    def mean_duration_by_mode(self) -> Mapping[int, float]:
        return self._means

    def done_s(self, epochs_done: int) -> float:
        """Isolated run time of the first `epochs_done` epochs."""
        return sum(self.durations_s[: max(0, epochs_done)])

    def mean_epoch_s(self, epochs_done: int) -> float:
        """Mean duration of the epochs up to the current one (Shockwave's planned-time rate)."""
        upto = self.durations_s[: min(max(0, epochs_done) + 1, self.epochs)]
        return sum(upto) / len(upto)


def posterior_remaining_s(profile: JobProfile, epochs_done: int, calibration: float = 1.0) -> float:
    """Predicted isolated run time left after `epochs_done` epochs (see the module text)."""
    total = profile.epochs
    left = total - epochs_done
    if left <= 0:
        return 0.0
    durations = profile.mean_duration_by_mode()
    modes = sorted(durations)
    seen = Counter(profile.batch_sizes[: epochs_done + 1])
    concentration = {mode: total / len(modes) + seen[mode] for mode in modes}
    scale = total / sum(concentration.values())
    expected_left: dict[int, float] = {}
    for mode in modes:
        whole = concentration[mode] * scale
        expected_left[mode] = whole - min(seen[mode], math.floor(whole))
    runtime = sum(expected_left[mode] * durations[mode] for mode in modes)
    inflated = max(int(sum(expected_left.values()) + 1), left)
    return runtime * left / inflated * calibration


@dataclass(frozen=True, slots=True)
class Measurement:
    """A job's speed in a round it ran, recorded at the round's end (Shockwave's throughput
    timeline: steps/s and the batch size)."""

    time_s: float
    steps_per_s: float
    batch_size: int


def calibration_factor(
    factor: float,
    measurements: Sequence[Measurement],
    durations_s: Sequence[float],
    samples_per_epoch: float,
) -> float:
    """Shockwave's re-calibration of a job's profiled epoch durations
    (`JobMetaData.calibrate_profiled_epoch_duration`), as the factor every profiled duration
    is multiplied by; `measurements` in time order. Both sides count samples from time 0 to
    the last measurement:

    - measured: each measurement's samples/s held since the one before it (the first since
      time 0, so also over the time before the job arrived);
    - profiled: the profile's epochs in order from epoch 0 over the same time, the epoch the
      time ends in counted in part at its current (calibrated) duration, beyond the profile's
      end at its last epoch's.

    When they differ by more than 40% of the profiled samples every duration becomes the
    profiled one x profiled / measured; otherwise the current factor stays (it is sticky)."""
    if not measurements or samples_per_epoch <= 0:
        return factor
    measured = 0.0
    previous = 0.0
    for m in measurements:  # in time order, as recorded
        measured += m.steps_per_s * m.batch_size * (m.time_s - previous)
        previous = m.time_s
    horizon = previous
    elapsed = profiled = 0.0
    index = 0  # the epoch the time ends in (the last one if it runs past the profile)
    for duration in durations_s:
        if elapsed + duration > horizon:
            break
        elapsed += duration
        profiled += samples_per_epoch
        index += 1
    index = min(index, len(durations_s) - 1)
    deficit = horizon - elapsed
    if deficit > 0:
        profiled += samples_per_epoch * deficit / (durations_s[index] * factor)
    if measured <= 0 or profiled <= 0:
        return factor
    if abs(measured - profiled) / profiled <= CALIBRATION_TOLERANCE:
        return factor
    return profiled / measured


@dataclass(frozen=True, slots=True)
class RoundRun:
    """The epochs (fractional) a job did in one round it ran, and its batch size then."""

    epochs: float
    batch_size: int


@dataclass(slots=True)
class SpeedTally:
    """shock's calibration of a job's profiled epoch durations from its measured speed, kept
    as it goes: the epochs it did in the rounds it ran, and the epochs the profile's mean
    epoch duration at each round's batch size gives for those rounds.

    Shockwave's `calibration_factor` counts both sides from time 0 along the profile's epochs
    in order, so a job that arrives late or waits is judged at its first speed over time it
    never ran against batch sizes it has not reached. This one compares speeds at the batch
    size each round ran, so in a simulator whose speeds are the profile's it stays at 1 (the
    40% tolerance absorbs restart costs), and on a real cluster it follows the measured
    speed. Tolerance and stickiness are Shockwave's."""

    measured_epochs: float = 0.0
    profiled_epochs: float = 0.0

    def add(self, run: RoundRun, round_length_s: float, profile: JobProfile) -> None:
        duration = profile.mean_duration_by_mode().get(run.batch_size)
        if duration is None or duration <= 0:  # a batch size the profile lacks: no reference
            return
        self.measured_epochs += run.epochs
        self.profiled_epochs += round_length_s / duration

    def factor(self, current: float) -> float:
        """The factor on the profiled durations: the current one while the measured epochs
        lie within 40% of the profiled ones, profiled / measured otherwise."""
        measured, profiled = self.measured_epochs, self.profiled_epochs
        if measured <= 0 or profiled <= 0:
            return current
        if abs(measured - profiled) / profiled <= CALIBRATION_TOLERANCE:
            return current
        return profiled / measured


def running_calibration_factor(
    factor: float, runs: Sequence[RoundRun], round_length_s: float, profile: JobProfile
) -> float:
    """`SpeedTally`'s factor after `runs`, starting from `factor`."""
    tally = SpeedTally()
    for run in runs:
        tally.add(run, round_length_s, profile)
    return tally.factor(factor)


def uniform_share(gpus: float, jobs: int) -> float:
    """Each job's share of the cluster when every job gets the same: min(1, GPUs / jobs)."""
    return min(1.0, gpus / max(jobs, 1))


def momentum_average(series: Sequence[tuple[float, float]], now: float, momentum: float) -> float:
    """Shockwave's fair-finish target from a series of (time, finish-time estimate): the
    estimates averaged by how long each held (up to `now`), mixed with the latest one as
    momentum x average + (1 - momentum) x latest."""
    if not series:
        raise ValueError("no finish-time estimate yet")
    times = [t for t, _ in series] + [max(now, series[-1][0])]
    held = [b - a for a, b in pairwise(times)]
    total = sum(held)
    weights = [h / total for h in held] if total > 0 else [1.0 / len(series)] * len(series)
    average = sum(w * value for w, (_, value) in zip(weights, series, strict=True))
    return momentum * average + (1.0 - momentum) * series[-1][1]
