"""A CycleGAN-like workload: two tiny generators and two patch discriminators on unpaired
synthetic 3x16x16 images of two "styles"."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

IMAGE_SIZE = 16
CYCLE_WEIGHT = 10.0  # CycleGAN's lambda for the cycle-consistency term


def unpaired_domains(seed: int, num_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Domain A: smooth random images; domain B: other draws with channels swapped and
    brightened (a "style" a generator can learn to map)."""
    generator = torch.Generator().manual_seed(seed)

    def smooth_images() -> torch.Tensor:
        coarse = torch.rand(num_samples, 3, 4, 4, generator=generator) * 2 - 1
        return F.interpolate(coarse, size=IMAGE_SIZE, mode="bilinear", align_corners=False)

    domain_a = smooth_images()
    domain_b = (smooth_images().flip(1) * 0.5 + 0.4).clamp(-1, 1)
    return domain_a, domain_b


def _generator() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.InstanceNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.InstanceNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 3, 3, padding=1),
        nn.Tanh(),
    )


def _discriminator() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 4, stride=2, padding=1),
        nn.LeakyReLU(0.2),
        nn.Conv2d(16, 1, 4, stride=2, padding=1),
    )


class TinyCycleGan(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a_to_b = _generator()
        self.b_to_a = _generator()
        self.judge_a = _discriminator()
        self.judge_b = _discriminator()

    def judges_learn(self, enabled: bool) -> None:
        for judge in (self.judge_a, self.judge_b):
            for parameter in judge.parameters():
                parameter.requires_grad_(enabled)


def _least_squares(scores: torch.Tensor, target: float) -> torch.Tensor:
    return F.mse_loss(scores, torch.full_like(scores, target))


def cycle_gan_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Generator and discriminator objectives in one scalar: the generator terms are built
    while the discriminators' weights are frozen, and the discriminators see detached fakes,
    so one backward pass gives each network the gradient of its own objective."""
    assert isinstance(model, TinyCycleGan)
    real_a, real_b = batch
    model.judges_learn(False)
    fake_b, fake_a = model.a_to_b(real_a), model.b_to_a(real_b)
    adversarial = _least_squares(model.judge_b(fake_b), 1.0) + _least_squares(
        model.judge_a(fake_a), 1.0
    )
    cycle = F.l1_loss(model.b_to_a(fake_b), real_a) + F.l1_loss(model.a_to_b(fake_a), real_b)
    model.judges_learn(True)
    judges = 0.5 * (
        _least_squares(model.judge_b(real_b), 1.0)
        + _least_squares(model.judge_b(fake_b.detach()), 0.0)
        + _least_squares(model.judge_a(real_a), 1.0)
        + _least_squares(model.judge_a(fake_a.detach()), 0.0)
    )
    return adversarial + CYCLE_WEIGHT * cycle + judges
