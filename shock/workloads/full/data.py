"""Synthetic batches generated on the device: a batch depends only on the seed, its data
position and its size, so a resumed job sees the batches an uninterrupted one would have."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Builds one batch of `size` samples with `generator` on `device`.
BatchMaker = Callable[[torch.Generator, int, torch.device], tuple[torch.Tensor, ...]]


class GeneratedData:
    """An endless dataset of generated samples; `num_samples` is one nominal epoch."""

    def __init__(
        self, make: BatchMaker, seed: int, num_samples: int, device: torch.device
    ) -> None:
        self.make = make
        self.seed = seed
        self.num_samples = num_samples
        self.device = device
        self._generator = torch.Generator(device=device)

    def epoch_of(self, position: int) -> int:
        return position // self.num_samples

    def batch(self, position: int, size: int) -> tuple[torch.Tensor, ...]:
        self._generator.manual_seed(self.seed * 1_000_003 + position)
        return self.make(self._generator, size, self.device)
