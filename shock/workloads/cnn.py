"""ResNet-18 and ResNet-50 style CNNs at small width, on synthetic 16x16 images."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

IMAGE_SIZE = 16


def synthetic_images(
    seed: int, num_samples: int, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images = a per-class pattern plus noise, so the classes are learnable."""
    generator = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(num_classes, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    labels = torch.randint(0, num_classes, (num_samples,), generator=generator)
    noise = torch.randn(num_samples, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    return prototypes[labels] * 0.5 + noise, labels


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _shortcut(in_planes, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = _shortcut(in_planes, out_planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _shortcut(in_planes: int, out_planes: int, stride: int) -> nn.Module:
    if stride == 1 and in_planes == out_planes:
        return nn.Identity()
    return nn.Sequential(
        nn.Conv2d(in_planes, out_planes, 1, stride, bias=False), nn.BatchNorm2d(out_planes)
    )


class ResNet(nn.Module):
    """The CIFAR ResNet layout (3x3 stem, four stages, stride 2 from stage 2 on)."""

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        blocks_per_stage: tuple[int, int, int, int],
        widths: tuple[int, int, int, int],
        num_classes: int,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        layers: list[nn.Module] = []
        in_planes = widths[0]
        for stage, (count, width) in enumerate(zip(blocks_per_stage, widths, strict=True)):
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(block(in_planes, width, stride))
                in_planes = width * block.expansion
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(in_planes, num_classes)
        # Each residual branch starts at zero (its last BatchNorm scale is 0), so the deep
        # net starts close to its shortcut path and trains in a few dozen steps.
        for module in self.stages:
            if isinstance(module, Bottleneck):
                nn.init.zeros_(module.bn3.weight)
            elif isinstance(module, BasicBlock):
                nn.init.zeros_(module.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


def resnet18(num_classes: int) -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2), (8, 16, 32, 64), num_classes)


def resnet50(num_classes: int) -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3), (4, 8, 16, 32), num_classes)


def classification_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    images, labels = batch
    return F.cross_entropy(model(images), labels)
