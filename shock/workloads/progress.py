"""A job's progress in steps and samples, and how a batch-size change rescales its target.

A job trains on exactly `target steps x initial batch size` samples. Steps are optimiser
steps at the current batch size; after a change the remaining samples are covered by
`ceil(remaining / new batch size)` steps, the last of which holds only what is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class TrainingProgress:
    step: int
    samples: int  # the data position: samples consumed so far
    batch_size: int
    target_steps: int
    total_samples: int

    @classmethod
    def start(cls, target_steps: int, batch_size: int) -> TrainingProgress:
        return cls(0, 0, batch_size, target_steps, target_steps * batch_size)

    @property
    def done(self) -> bool:
        return self.samples >= self.total_samples

    def next_batch_size(self) -> int:
        """The size of the next batch: the batch size, or what is left for the last one."""
        return min(self.batch_size, self.total_samples - self.samples)

    def advance(self, batch_size: int) -> None:
        self.step += 1
        self.samples += batch_size

    def switch(self, batch_size: int) -> bool:
        """Change the batch size, rescaling the target; False if nothing changed."""
        if batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {batch_size}")
        if batch_size == self.batch_size or self.done:
            return False
        remaining = self.total_samples - self.samples
        self.batch_size = batch_size
        self.target_steps = self.step + math.ceil(remaining / batch_size)
        return True
