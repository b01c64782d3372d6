"""A recommendation autoencoder on synthetic user-item interaction vectors."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def low_rank_interactions(seed: int, num_users: int, num_items: int, rank: int = 8) -> torch.Tensor:
    """Binary user-item vectors from low-rank preferences (about 10% of items per user)."""
    generator = torch.Generator().manual_seed(seed)
    users = torch.randn(num_users, rank, generator=generator)
    items = torch.randn(num_items, rank, generator=generator)
    affinity = users @ items.T / rank**0.5
    probability = torch.sigmoid(2.0 * affinity - 3.0)
    return torch.bernoulli(probability, generator=generator).to(torch.bool)


class Autoencoder(nn.Module):
    def __init__(self, num_items: int, hidden: int = 64) -> None:
        super().__init__()
        self.encode = nn.Linear(num_items, hidden)
        self.decode = nn.Linear(hidden, num_items)

    def forward(self, ratings: torch.Tensor) -> torch.Tensor:
        return self.decode(F.selu(self.encode(ratings)))


def reconstruction_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    (interactions,) = batch
    ratings = interactions.float()
    return F.mse_loss(model(ratings), ratings)
