"""The Gittins index of a job whose size is drawn from an empirical service distribution.

For a job that has attained service `a` (GPU-seconds) and a service quantum `Δ`:

    G(a, Δ) = P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]

the chance that the job finishes within the next Δ of service, per unit of service it is
expected to use in it. `G(a) = sup_Δ G(a, Δ)` is the textbook index; Tiresias's simulator uses
one fixed Δ. A job that has outlived every sample gets index 0 (nothing is known about it but
that it is long).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from shock.api import InputError


class ServiceDistribution:
    """Service samples (GPU-seconds), sorted, with prefix sums for O(log n) fixed-Δ indices."""

    def __init__(self, samples: Iterable[float]) -> None:
        values = np.sort(np.fromiter(samples, float))
        if values.size and (not np.all(np.isfinite(values)) or values[0] <= 0):
            raise ValueError("service samples must be finite and > 0")
        self.samples = values
        self._prefix = np.concatenate(([0.0], np.cumsum(values)))

    def __len__(self) -> int:
        return int(self.samples.size)

    def index(self, attained: float, quantum: float | None) -> float:
        """G(attained, quantum); `quantum=None` takes the supremum over every Δ > 0."""
        values = self.samples
        first = int(np.searchsorted(values, attained, side="right"))  # first sample > a
        alive = values.size - first
        if alive == 0:
            return 0.0
        if quantum is not None:
            end = int(np.searchsorted(values, attained + quantum, side="right"))
            done = end - first  # samples finishing within the quantum
            used = (self._prefix[end] - self._prefix[first]) - done * attained
            used += quantum * (values.size - end)
            return float(done / used)
        # P(Δ) steps up only where a sample ends and E(Δ) grows in between, so the supremum
        # sits at some Δ = s - a: the last of each run of equal samples.
        tail = values[first:]
        last_of_run = np.append(tail[1:] != tail[:-1], True)
        done = np.arange(1, alive + 1)[last_of_run]
        ends = tail[last_of_run]
        used = (np.cumsum(tail - attained)[last_of_run]) + (ends - attained) * (alive - done)
        return float(np.max(done / used))


def read_samples(path: str) -> list[float]:
    """One service sample (GPU-seconds) per line; blank lines and `#` comments skipped."""
    file = Path(path)
    try:
        lines = file.read_text().splitlines()
    except OSError as exc:
        raise InputError(f"cannot read service samples: {exc.strerror}", path=path) from None
    samples: list[float] = []
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"'{text}' is not a number", path=path, line=number) from None
        if not np.isfinite(value) or value <= 0:
            raise InputError(f"a service sample must be > 0, got {text}", path=path, line=number)
        samples.append(value)
    if not samples:
        raise InputError("no service samples in the file", path=path)
    return samples
