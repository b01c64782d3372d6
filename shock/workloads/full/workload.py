"""Full-size workloads: model, optimiser, data generated on the device, loss."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from shock.workloads.cnn import classification_loss
from shock.workloads.families import FAMILIES, UnknownJobTypeError
from shock.workloads.full import models
from shock.workloads.full.data import BatchMaker, GeneratedData
from shock.workloads.gan import cycle_gan_loss
from shock.workloads.reinforcement import actor_critic_loss
from shock.workloads.workload import LossFn, Workload, training_setup

# Nominal epoch sizes (samples) of the datasets Gavel trains on; data are generated, so an
# epoch only sets the adaptation window.
_EPOCH = {
    "ResNet-18": 50_000,  # CIFAR-10
    "ResNet-50": 100_000,  # Shockwave's ImageNet epoch
    "Transformer": 29_000,  # Multi30k training pairs
    "LM": 59_675,  # Wikitext-2 windows
    "Recommendation": 117_907,  # Shockwave's ML-20M epoch
    "CycleGAN": 6_287,  # monet2photo
    "A3C": 4,
}


def _images(side: int, classes: int) -> BatchMaker:
    def make(g: torch.Generator, size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        labels = torch.randint(0, classes, (size,), generator=g, device=device)
        images = torch.randn(size, 3, side, side, generator=g, device=device)
        # A class-dependent brightness, so the labels are learnable.
        return images + (labels.float() / classes)[:, None, None, None], labels

    return make


def _sentences(g: torch.Generator, size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    length = models.TRANSLATION_LENGTH
    source = torch.randint(1, models.MULTI30K_SOURCE_VOCAB, (size, length), generator=g,
                           device=device)  # fmt: skip
    target = (source * 7 + 3) % models.MULTI30K_TARGET_VOCAB  # a learnable "translation"
    return source, target


def _windows(g: torch.Generator, size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    start = torch.randint(0, models.WIKITEXT2_VOCAB, (size, 1), generator=g, device=device)
    steps = torch.arange(models.LM_WINDOW + 1, device=device)[None, :]
    return ((start + 17 * steps) % models.WIKITEXT2_VOCAB,)  # a learnable token stream


def _ratings(g: torch.Generator, size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    users = torch.randint(0, models.ML20M_USERS, (size,), generator=g, device=device)
    items = torch.randint(0, models.ML20M_ITEMS, (size,), generator=g, device=device)
    return users, items, ((users + items) % 2).float()


def _image_pairs(g: torch.Generator, size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    a = torch.rand(size, 3, 256, 256, generator=g, device=device) * 2 - 1
    b = (torch.rand(size, 3, 256, 256, generator=g, device=device) * 2 - 1).flip(1) * 0.5
    return a, b


def _frames(g: torch.Generator, size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    frames = torch.rand(size, 4, 84, 84, generator=g, device=device)
    best = (frames[:, :, :42].mean(dim=(1, 2, 3)) * 1000).long() % models.ATARI_ACTIONS
    return frames, best


Builder = Callable[[], tuple[nn.Module, BatchMaker, LossFn, str]]

_BUILDERS: dict[str, Builder] = {
    "ResNet-18": lambda: (models.resnet18_cifar(), _images(32, 10), classification_loss, "sgd"),
    "ResNet-50": lambda: (
        models.ImageNetResNet50(), _images(224, 1000), classification_loss, "sgd"
    ),
    "Transformer": lambda: (models.Translator(), _sentences, models.translation_loss, "adam"),
    "LM": lambda: (models.WordLanguageModel(), _windows, models.language_model_loss, "sgd"),
    "Recommendation": lambda: (models.NeuMF(), _ratings, models.ncf_loss, "adam"),
    "CycleGAN": lambda: (models.CycleGan(), _image_pairs, cycle_gan_loss, "adam"),
    "A3C": lambda: (models.AtariActorCritic(), _frames, actor_critic_loss, "adam"),
}


def build_full_workload(family: str, seed: int, device: str | torch.device = "cpu") -> Workload:
    """The family's full-size model on `device`; the same seed gives the same weights and data."""
    builder = _BUILDERS.get(family)
    if builder is None or family not in FAMILIES:
        raise UnknownJobTypeError(f"no full-size workload for model family {family!r}")
    torch.manual_seed(seed)
    model, make, loss, optimizer_name = builder()
    target = torch.device(device)
    model, optimizer = training_setup(model, optimizer_name, target, adam_lr=1e-4)
    data = GeneratedData(make, seed, _EPOCH[family], target)
    return Workload(family, model, optimizer, data, loss, target)
