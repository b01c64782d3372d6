"""A synthetic dataset read in epochs: the data position is the number of samples consumed.

Each epoch visits every sample once in an order drawn from (seed, epoch), so a batch depends
only on the position and the batch size: a job resumed at the same position sees exactly the
batches an uninterrupted run would have seen.
"""

from __future__ import annotations

from typing import Protocol

import torch


class BatchSource(Protocol):
    """Where a workload's batches come from: a fixed set read in epochs (`EpochSampler`) or
    batches generated on the device (`shock.workloads.full.data.GeneratedData`)."""

    num_samples: int  # samples in one epoch

    def batch(self, position: int, size: int) -> tuple[torch.Tensor, ...]: ...


class EpochSampler:
    """Batches of a fixed set of tensors (first dimension = samples), reshuffled every epoch."""

    def __init__(self, tensors: tuple[torch.Tensor, ...], seed: int) -> None:
        if not tensors or any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("tensors must share their first (sample) dimension")
        self.tensors = tensors
        self.num_samples = int(tensors[0].shape[0])
        self.seed = seed
        self._cached_epoch = -1
        self._cached_order = torch.empty(0, dtype=torch.long)

    def epoch_of(self, position: int) -> int:
        return position // self.num_samples

    def batch(self, position: int, size: int) -> tuple[torch.Tensor, ...]:
        """The `size` samples starting at data position `position` (may span two epochs)."""
        indices = self.indices(position, size)
        return tuple(t.index_select(0, indices) for t in self.tensors)

    def indices(self, position: int, size: int) -> torch.Tensor:
        parts = []
        while size > 0:
            epoch, offset = divmod(position, self.num_samples)
            take = min(size, self.num_samples - offset)
            parts.append(self._order(epoch)[offset : offset + take])
            position += take
            size -= take
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _order(self, epoch: int) -> torch.Tensor:
        if epoch != self._cached_epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._cached_order = torch.randperm(self.num_samples, generator=generator)
            self._cached_epoch = epoch
        return self._cached_order
