"""An A3C-like workload: an advantage actor-critic on a synthetic contextual bandit.

Each sample is an observation whose best action follows a hidden linear rule; the agent gets
reward 1 for the best action, 0 otherwise. Actions are sampled with torch's global generator,
whose state every checkpoint saves, so a resumed run samples the same actions.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

ENTROPY_BONUS = 0.01


def contextual_bandit(
    seed: int, num_samples: int, features: int, actions: int
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    observations = torch.randn(num_samples, features, generator=generator)
    rule = torch.randn(features, actions, generator=generator)
    return observations, (observations @ rule).argmax(dim=1)


class ActorCritic(nn.Module):
    def __init__(self, features: int, actions: int, hidden: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        self.policy = nn.Linear(hidden, actions)
        self.value = nn.Linear(hidden, 1)

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.body(observations)
        return self.policy(hidden), self.value(hidden).squeeze(1)


def actor_critic_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    observations, best_actions = batch
    logits, values = model(observations)
    distribution = torch.distributions.Categorical(logits=logits)
    actions = distribution.sample()
    rewards = (actions == best_actions).float()
    advantages = rewards - values.detach()
    policy_loss = -(distribution.log_prob(actions) * advantages).mean()
    value_loss = F.mse_loss(values, rewards)
    return policy_loss + 0.5 * value_loss - ENTROPY_BONUS * distribution.entropy().mean()
