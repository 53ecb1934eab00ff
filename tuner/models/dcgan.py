"""DCGAN (Radford et al. 2015) for square images whose side is a power of two >= 16.

Differences from pytorch/examples: the discriminator returns logits (BCEWithLogitsLoss is autocast-safe;
Sigmoid + BCELoss is not), and the depth follows the image size instead of being fixed at 64x64.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _depth(image_size: int) -> int:
    n = int(math.log2(image_size))
    if 2**n != image_size or image_size < 16:
        raise ValueError(f"DCGAN needs a power-of-two image size >= 16, got {image_size}")
    return n - 2  # number of 2x up/down-sampling stages between 4x4 and image_size


def check_image_size(image_size: int) -> None:
    """Refuse, when a workload is built, an image size the DCGAN cannot have."""
    _depth(image_size)


def init_weights(m: nn.Module) -> None:
    """DCGAN's N(0, 0.02) conv init and N(1, 0.02) BatchNorm scale."""
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class Generator(nn.Module):
    """z (N, nz, 1, 1) -> image (N, channels, size, size) in [-1, 1]."""

    def __init__(self, nz: int = 64, ngf: int = 32, channels: int = 1, image_size: int = 32) -> None:
        super().__init__()
        self.nz, self.channels, self.image_size = nz, channels, image_size
        stages = _depth(image_size)
        width = ngf * 2 ** (stages - 1)
        layers: list[nn.Module] = [  # (nz, 1, 1) -> (width, 4, 4)
            nn.ConvTranspose2d(nz, width, 4, 1, 0, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(True),
        ]
        for _ in range(stages - 1):  # each stage doubles the side and halves the width
            layers += [
                nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(width // 2),
                nn.ReLU(True),
            ]
            width //= 2
        layers += [nn.ConvTranspose2d(width, channels, 4, 2, 1, bias=False), nn.Tanh()]  # -> (channels, size, size)
        self.net = nn.Sequential(*layers)
        self.apply(init_weights)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)

    def latent(self, n: int, generator: torch.Generator | None = None, device: torch.device | None = None) -> torch.Tensor:
        return torch.randn(n, self.nz, 1, 1, generator=generator).to(device or "cpu")


class Discriminator(nn.Module):
    """image (N, channels, size, size) -> logit (N,). No sigmoid: pair with BCEWithLogitsLoss."""

    def __init__(self, ndf: int = 32, channels: int = 1, image_size: int = 32) -> None:
        super().__init__()
        stages = _depth(image_size)
        layers: list[nn.Module] = [nn.Conv2d(channels, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True)]
        width = ndf
        for _ in range(stages - 1):  # each stage halves the side and doubles the width, down to 4x4
            layers += [
                nn.Conv2d(width, width * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(width * 2),
                nn.LeakyReLU(0.2, True),
            ]
            width *= 2
        layers += [nn.Conv2d(width, 1, 4, 1, 0, bias=False)]  # (width, 4, 4) -> (1, 1, 1)
        self.net = nn.Sequential(*layers)
        self.apply(init_weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).flatten()
