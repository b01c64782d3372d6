"""Batch-size adaptation inside a job: Accordion and the gradient noise scale (GNS).

Both only decide which batch size they would like; the harness asks the scheduler and switches
only on approval. They see gradient norms, never tensors, so they are testable without torch.

- Accordion (Agarwal et al., MLSys 2021): a critical learning regime shows as a large relative
  change of the gradient norm between consecutive windows (epochs). In a critical regime, and
  in the first window, train at the initial (small) batch size; elsewhere at the family's
  maximum batch size.
- GNS (McCandlish et al., "An Empirical Model of Large-Batch Training", 2018, appendix A):
  from squared gradient norms at two batch sizes B_small < B_big,
      |G|^2 ~ (B_big |g_big|^2 - B_small |g_small|^2) / (B_big - B_small)
      tr(S) ~ (|g_small|^2 - |g_big|^2) / (1/B_small - 1/B_big)
  and the simple noise scale B_noise = tr(S) / |G|^2, both smoothed with an EMA. When
  B_noise >= 2 B the batch size can double without wasting samples; it never passes the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

ACCORDION_THRESHOLD = 0.5  # Accordion's eta: relative gradient-norm change marking a regime
GNS_SMOOTHING = 0.9  # EMA weight of the past for the two GNS estimators


@dataclass(frozen=True, slots=True)
class GradientSample:
    """One step's squared gradient norms: over the whole batch and over its first part."""

    batch_size: int
    sq_norm: float
    small_batch_size: int | None = None
    small_sq_norm: float | None = None


class AdaptationPolicy(Protocol):
    name: str
    # True: the harness must measure the gradient of a part of each batch too (GNS).
    needs_small_batch: bool

    def observe(self, sample: GradientSample, samples_done: int) -> int | None:
        """Record one step; the batch size this policy wants now, or None for no opinion."""
        ...

    def batch_size_changed(self, samples_done: int) -> None:
        """The job switched batch size (its measurements restart from here)."""
        ...

    def state_dict(self) -> dict[str, float | int | None]: ...

    def load_state_dict(self, state: dict[str, float | int | None]) -> None: ...


class StaticPolicy:
    name = "static"
    needs_small_batch = False

    def observe(self, sample: GradientSample, samples_done: int) -> int | None:
        return None

    def batch_size_changed(self, samples_done: int) -> None:
        pass

    def state_dict(self) -> dict[str, float | int | None]:
        return {}

    def load_state_dict(self, state: dict[str, float | int | None]) -> None:
        pass


class _Windows:
    """Consecutive windows of `window_samples` samples; the mean of a value per window."""

    def __init__(self, window_samples: int) -> None:
        if window_samples < 1:
            raise ValueError(f"window must hold at least one sample, got {window_samples}")
        self.window_samples = window_samples
        self.start = 0
        self.total = 0.0
        self.count = 0

    def add(self, value: float, samples_done: int) -> float | None:
        """Add one step's value; the window's mean when this step closes the window."""
        self.total += value
        self.count += 1
        if samples_done - self.start < self.window_samples:
            return None
        mean = self.total / self.count
        self.start, self.total, self.count = samples_done, 0.0, 0
        return mean

    def restart(self, samples_done: int) -> None:
        self.start, self.total, self.count = samples_done, 0.0, 0


class AccordionPolicy:
    name = "accordion"
    needs_small_batch = False

    def __init__(
        self,
        initial_batch_size: int,
        max_batch_size: int,
        window_samples: int,
        threshold: float = ACCORDION_THRESHOLD,
    ) -> None:
        self.initial_batch_size = initial_batch_size
        self.max_batch_size = max(max_batch_size, initial_batch_size)
        self.threshold = threshold
        self._windows = _Windows(window_samples)
        self.previous_norm: float | None = None
        self.critical = True
        # After a switch the next window only sets a new baseline: a larger batch has a
        # smaller gradient norm, which is not a change of regime.
        self._baseline_only = False

    def observe(self, sample: GradientSample, samples_done: int) -> int | None:
        mean = self._windows.add(sample.sq_norm**0.5, samples_done)
        if mean is not None:
            if self.previous_norm is not None and not self._baseline_only:
                change = abs(mean - self.previous_norm) / max(self.previous_norm, 1e-12)
                self.critical = change >= self.threshold
            self.previous_norm = mean
            self._baseline_only = False
        return self.initial_batch_size if self.critical else self.max_batch_size

    def batch_size_changed(self, samples_done: int) -> None:
        self._baseline_only = True
        self._windows.restart(samples_done)

    def state_dict(self) -> dict[str, float | int | None]:
        return {
            "window_start": self._windows.start,
            "window_total": self._windows.total,
            "window_count": self._windows.count,
            "previous_norm": self.previous_norm,
            "critical": int(self.critical),
            "baseline_only": int(self._baseline_only),
        }

    def load_state_dict(self, state: dict[str, float | int | None]) -> None:
        self._windows.start = int(state["window_start"] or 0)
        self._windows.total = float(state["window_total"] or 0.0)
        self._windows.count = int(state["window_count"] or 0)
        previous = state["previous_norm"]
        self.previous_norm = None if previous is None else float(previous)
        self.critical = bool(state["critical"])
        self._baseline_only = bool(state["baseline_only"])


class GnsPolicy:
    name = "gns"
    needs_small_batch = True

    def __init__(
        self, batch_size_limit: int, window_samples: int, smoothing: float = GNS_SMOOTHING
    ) -> None:
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.batch_size_limit = batch_size_limit
        self.smoothing = smoothing
        self._windows = _Windows(window_samples)
        self.gradient_sq: float | None = None  # EMA of the |G|^2 estimate
        self.trace_sigma: float | None = None  # EMA of the tr(Sigma) estimate

    @property
    def noise_scale(self) -> float | None:
        """B_simple = tr(Sigma) / |G|^2, or None before a usable estimate exists."""
        if self.gradient_sq is None or self.trace_sigma is None or self.gradient_sq <= 0:
            return None
        return max(self.trace_sigma, 0.0) / self.gradient_sq

    def observe(self, sample: GradientSample, samples_done: int) -> int | None:
        small, big = sample.small_batch_size, sample.batch_size
        if sample.small_sq_norm is None or small is None or not 0 < small < big:
            raise ValueError("GNS needs the squared gradient norm of a smaller part of the batch")
        gradient_sq = (big * sample.sq_norm - small * sample.small_sq_norm) / (big - small)
        trace_sigma = (sample.small_sq_norm - sample.sq_norm) / (1.0 / small - 1.0 / big)
        self.gradient_sq = self._smooth(self.gradient_sq, gradient_sq)
        self.trace_sigma = self._smooth(self.trace_sigma, trace_sigma)
        if self._windows.add(0.0, samples_done) is None:
            return None
        noise = self.noise_scale
        doubled = 2 * big
        if noise is not None and noise >= doubled and doubled <= self.batch_size_limit:
            return doubled
        return None

    def _smooth(self, average: float | None, value: float) -> float:
        if average is None:
            return value
        return self.smoothing * average + (1.0 - self.smoothing) * value

    def batch_size_changed(self, samples_done: int) -> None:
        pass

    def state_dict(self) -> dict[str, float | int | None]:
        return {
            "window_start": self._windows.start,
            "window_count": self._windows.count,
            "gradient_sq": self.gradient_sq,
            "trace_sigma": self.trace_sigma,
        }

    def load_state_dict(self, state: dict[str, float | int | None]) -> None:
        self._windows.start = int(state["window_start"] or 0)
        self._windows.count = int(state["window_count"] or 0)
        gradient_sq, trace_sigma = state["gradient_sq"], state["trace_sigma"]
        self.gradient_sq = None if gradient_sq is None else float(gradient_sq)
        self.trace_sigma = None if trace_sigma is None else float(trace_sigma)


def make_policy(
    mode: str,
    initial_batch_size: int,
    accordion_max_batch_size: int | None,
    gns_batch_size_limit: int | None,
    window_samples: int,
) -> AdaptationPolicy:
    """The policy for `--adaptation`; a family without a schedule for the mode stays static."""
    if mode == "static":
        return StaticPolicy()
    if mode == "accordion":
        if accordion_max_batch_size is None:
            return StaticPolicy()  # Shockwave: Transformer, CycleGAN and A3C never adapt
        return AccordionPolicy(initial_batch_size, accordion_max_batch_size, window_samples)
    if mode == "gns":
        if gns_batch_size_limit is None or initial_batch_size < 2:
            return StaticPolicy()
        return GnsPolicy(gns_batch_size_limit, window_samples)
    raise ValueError(f"unknown adaptation mode {mode!r}; valid: static, accordion, gns")
