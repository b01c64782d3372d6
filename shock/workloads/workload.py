"""Build a family's workload: model, optimiser, synthetic data and loss, all from the seed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from shock.workloads import cnn, gan, recommendation, reinforcement, sequence
from shock.workloads.data import BatchSource, EpochSampler
from shock.workloads.families import FAMILIES, UnknownJobTypeError

LossFn = Callable[[nn.Module, tuple[torch.Tensor, ...]], torch.Tensor]


@dataclass(slots=True)
class Workload:
    family: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    data: BatchSource
    loss: LossFn
    device: torch.device

    def batch(self, position: int, size: int) -> tuple[torch.Tensor, ...]:
        return tuple(t.to(self.device) for t in self.data.batch(position, size))

    def train_step(self, position: int, size: int) -> float:
        """One optimiser step on the batch at `position`; the gradients stay readable after."""
        batch = self.batch(position, size)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.model, batch)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def _resnet18(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    return cnn.resnet18(10), cnn.synthetic_images(seed, 2048, 10), cnn.classification_loss, "sgd"


def _resnet50(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    return cnn.resnet50(10), cnn.synthetic_images(seed, 2048, 10), cnn.classification_loss, "sgd"


def _transformer(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    vocab, length = 32, 10
    pairs = sequence.reversal_pairs(seed, 4096, vocab, length)
    return sequence.TinyTransformer(vocab, length), pairs, sequence.translation_loss, "adam"


def _language_model(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    vocab = 64
    windows = sequence.markov_windows(seed, 2048, vocab, 20)
    return sequence.LstmLanguageModel(vocab), (windows,), sequence.language_model_loss, "adam"


def _recommendation(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    vectors = recommendation.low_rank_interactions(seed, 16384, 256)
    return recommendation.Autoencoder(256), (vectors,), recommendation.reconstruction_loss, "adam"


def _cycle_gan(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    return gan.TinyCycleGan(), gan.unpaired_domains(seed, 1024), gan.cycle_gan_loss, "adam"


def _a3c(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], LossFn, str]:
    data = reinforcement.contextual_bandit(seed, 4096, 16, 4)
    return reinforcement.ActorCritic(16, 4), data, reinforcement.actor_critic_loss, "adam"


_BUILDERS = {
    "ResNet-18": _resnet18,
    "ResNet-50": _resnet50,
    "Transformer": _transformer,
    "LM": _language_model,
    "Recommendation": _recommendation,
    "CycleGAN": _cycle_gan,
    "A3C": _a3c,
}


def check_device(device: str) -> torch.device:
    """`cpu` or a CUDA device that is present here; ValueError otherwise."""
    if device == "cpu":
        return torch.device("cpu")
    if not device.startswith("cuda"):
        raise ValueError(f"--device: expected cpu or cuda:N, got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine")
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) present"
        )
    return torch.device(device)


def build_workload(family: str, seed: int, device: str | torch.device = "cpu") -> Workload:
    """The same seed always gives the same initial weights and the same data."""
    builder = _BUILDERS.get(family)
    if builder is None or family not in FAMILIES:
        raise UnknownJobTypeError(f"no workload for model family {family!r}")
    torch.manual_seed(seed)
    model, tensors, loss, optimizer_name = builder(seed)
    target = torch.device(device)
    model, optimizer = training_setup(model, optimizer_name, target, adam_lr=3e-3)
    return Workload(family, model, optimizer, EpochSampler(tensors, seed), loss, target)


def training_setup(
    model: nn.Module, optimizer_name: str, device: torch.device, adam_lr: float
) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model on `device` in training mode, and its optimiser ("sgd", else Adam)."""
    model = model.to(device)
    model.train()
    optimizer: torch.optim.Optimizer
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=adam_lr)
    return model, optimizer
