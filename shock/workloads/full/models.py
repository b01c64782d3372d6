"""The seven families' models at their published sizes.

ResNet-18 is the CIFAR-10 layout Gavel trains (3x3 stem, widths 64-512, 11.2M parameters);
ResNet-50 the ImageNet one (7x7 stem, max-pool, bottlenecks 3-4-6-3, 25.6M parameters). The
Transformer is the base model of "Attention Is All You Need" (d_model 512, 8 heads, 6+6
layers, feed-forward 2048) with Multi30k-sized vocabularies; the language model is PyTorch's
word-language-model example as Gavel runs it on Wikitext-2 (2-layer LSTM, 200-wide
embedding and hidden state, 33,278-word vocabulary, 35-token windows). NCF is NeuMF (GMF and
MLP towers, 64 factors, MLP 256-128-64) with MovieLens-20M's 138,493 users and 26,744 items.
CycleGAN has two ResNet generators (9 blocks, 64 filters) and two 70x70 PatchGAN
discriminators on 256x256 images; A3C the convolutional actor-critic of Mnih et al. (2016)
on stacks of four 84x84 frames with 6 actions (Pong).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from shock.workloads.cnn import BasicBlock, Bottleneck, ResNet
from shock.workloads.gan import TinyCycleGan

WIKITEXT2_VOCAB = 33_278
LM_WINDOW = 35  # tokens per window (the example's bptt)
MULTI30K_SOURCE_VOCAB = 7_853  # German side, after the usual min-frequency cut
MULTI30K_TARGET_VOCAB = 5_893  # English side
TRANSLATION_LENGTH = 32  # tokens per sentence (Multi30k's are shorter than this)
ML20M_USERS = 138_493
ML20M_ITEMS = 26_744
ATARI_ACTIONS = 6


def resnet18_cifar(num_classes: int = 10) -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2), (64, 128, 256, 512), num_classes)


class ImageNetResNet50(nn.Module):
    """ResNet-50 v1.5 (stride in the 3x3 convolution), 1000 classes."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers: list[nn.Module] = []
        in_planes = 64
        for stage, (count, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True)):
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(Bottleneck(in_planes, width, stride))
                in_planes = width * Bottleneck.expansion
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(in_planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


class Translator(nn.Module):
    """Encoder-decoder Transformer, base size."""

    def __init__(
        self,
        source_vocab: int = MULTI30K_SOURCE_VOCAB,
        target_vocab: int = MULTI30K_TARGET_VOCAB,
        d_model: int = 512,
        heads: int = 8,
        layers: int = 6,
        feed_forward: int = 2048,
        length: int = TRANSLATION_LENGTH,
    ) -> None:
        super().__init__()
        self.source_embedding = nn.Embedding(source_vocab, d_model)
        self.target_embedding = nn.Embedding(target_vocab, d_model)
        self.position = nn.Parameter(torch.zeros(1, length, d_model))
        self.transformer = nn.Transformer(
            d_model, heads, layers, layers, feed_forward, dropout=0.1, batch_first=True
        )
        self.out = nn.Linear(d_model, target_vocab)
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(length), persistent=False
        )

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        length = target_in.shape[1]
        encoded = self.source_embedding(source) + self.position[:, : source.shape[1]]
        decoded = self.target_embedding(target_in) + self.position[:, :length]
        causal: torch.Tensor = self.causal  # type: ignore[assignment]
        mask = causal[:length, :length]
        return self.out(self.transformer(encoded, decoded, tgt_mask=mask))


def translation_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    source, target = batch
    logits = model(source, target[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1))


class WordLanguageModel(nn.Module):
    def __init__(
        self, vocab: int = WIKITEXT2_VOCAB, width: int = 200, layers: int = 2
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)
        self.dropout = nn.Dropout(0.2)
        self.lstm = nn.LSTM(width, width, layers, dropout=0.2, batch_first=True)
        self.decoder = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.dropout(self.embedding(tokens)))
        return self.decoder(self.dropout(hidden))


def language_model_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    (windows,) = batch
    logits = model(windows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))


class NeuMF(nn.Module):
    """Neural collaborative filtering: a GMF and an MLP tower over user and item embeddings."""

    def __init__(
        self, users: int = ML20M_USERS, items: int = ML20M_ITEMS, factors: int = 64
    ) -> None:
        super().__init__()
        self.gmf_user = nn.Embedding(users, factors)
        self.gmf_item = nn.Embedding(items, factors)
        self.mlp_user = nn.Embedding(users, 128)
        self.mlp_item = nn.Embedding(items, 128)
        self.mlp = nn.Sequential(
            nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, factors)
        )
        self.predict = nn.Linear(2 * factors, 1)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        gmf = self.gmf_user(users) * self.gmf_item(items)
        mlp = self.mlp(torch.cat([self.mlp_user(users), self.mlp_item(items)], dim=1))
        return self.predict(torch.cat([gmf, mlp], dim=1)).squeeze(1)


def ncf_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    users, items, labels = batch
    return F.binary_cross_entropy_with_logits(model(users, items), labels)


class _ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReflectionPad2d(1),
            nn.Conv2d(width, width, 3),
            nn.InstanceNorm2d(width),
            nn.ReLU(inplace=True),
            nn.ReflectionPad2d(1),
            nn.Conv2d(width, width, 3),
            nn.InstanceNorm2d(width),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def resnet_generator(filters: int = 64, blocks: int = 9) -> nn.Module:
    layers: list[nn.Module] = [
        nn.ReflectionPad2d(3),
        nn.Conv2d(3, filters, 7),
        nn.InstanceNorm2d(filters),
        nn.ReLU(inplace=True),
    ]
    width = filters
    for _ in range(2):  # downsampling
        layers += [nn.Conv2d(width, width * 2, 3, 2, 1), nn.InstanceNorm2d(width * 2),
                   nn.ReLU(inplace=True)]  # fmt: skip
        width *= 2
    layers += [_ResidualBlock(width) for _ in range(blocks)]
    for _ in range(2):  # upsampling
        layers += [nn.ConvTranspose2d(width, width // 2, 3, 2, 1, output_padding=1),
                   nn.InstanceNorm2d(width // 2), nn.ReLU(inplace=True)]  # fmt: skip
        width //= 2
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(width, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


def patch_discriminator(filters: int = 64) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, filters, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(filters, filters * 2, 4, 2, 1), nn.InstanceNorm2d(filters * 2),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(filters * 2, filters * 4, 4, 2, 1), nn.InstanceNorm2d(filters * 4),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(filters * 4, filters * 8, 4, 1, 1), nn.InstanceNorm2d(filters * 8),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(filters * 8, 1, 4, 1, 1),
    )  # fmt: skip


class CycleGan(TinyCycleGan):
    """CycleGAN's networks at full size; trained by the stand-in's loss (`cycle_gan_loss`)."""

    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.a_to_b = resnet_generator()
        self.b_to_a = resnet_generator()
        self.judge_a = patch_discriminator()
        self.judge_b = patch_discriminator()


class AtariActorCritic(nn.Module):
    def __init__(self, actions: int = ATARI_ACTIONS, frames: int = 4) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(frames, 16, 8, 4), nn.ReLU(),
            nn.Conv2d(16, 32, 4, 2), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 9 * 9, 256), nn.ReLU(),
        )  # fmt: skip
        self.policy = nn.Linear(256, actions)
        self.value = nn.Linear(256, 1)

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.body(frames)
        return self.policy(hidden), self.value(hidden).squeeze(1)
