"""Gradient statistics for a person's own job: the Accordion or GNS policy of the job's
adaptation mode, fed one step's gradient norms at a time (shock/job/adaptation.py has the
policies; the built-in harness uses the same ones)."""

from __future__ import annotations

from shock.job.adaptation import AdaptationPolicy, GradientSample, make_policy

# Samples per decision window when the script does not count samples itself: steps x batch.
DEFAULT_WINDOW_STEPS = 200


class GradientStatistics:
    """Feeds one policy; tracks the samples seen, so a window is a number of samples."""

    def __init__(self, policy: AdaptationPolicy) -> None:
        self.policy = policy
        self.mode = policy.name
        self.samples = 0

    @classmethod
    def for_mode(
        cls, mode: str, batch_size: int | None, max_batch_size: int | None
    ) -> GradientStatistics | None:
        """None for `static`, or when the script's batch size is unknown."""
        if mode == "static" or not batch_size:
            return None
        limit = max_batch_size or batch_size * 8
        window = DEFAULT_WINDOW_STEPS * batch_size
        policy = make_policy(mode, batch_size, limit, limit, window)
        return None if policy.name == "static" else cls(policy)

    def observe(
        self,
        batch_size: int,
        sq_norm: float,
        small_batch_size: int | None = None,
        small_sq_norm: float | None = None,
        samples: int | None = None,
    ) -> int | None:
        """One step's norms; the batch size the policy wants now (None: no opinion)."""
        self.samples = samples if samples is not None else self.samples + batch_size
        if self.policy.needs_small_batch and (small_batch_size is None or small_sq_norm is None):
            return None  # GNS needs a part of the batch measured too
        sample = GradientSample(batch_size, sq_norm, small_batch_size, small_sq_norm)
        return self.policy.observe(sample, self.samples)

    def batch_size_changed(self) -> None:
        self.policy.batch_size_changed(self.samples)
