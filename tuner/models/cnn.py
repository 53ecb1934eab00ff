"""A small conv classifier: the `cnn` workload, and (reused) the FID feature extractor for small datasets."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Two conv blocks + MLP head. `features(x)` is the penultimate layer (used as FID features)."""

    def __init__(self, channels: int = 1, num_classes: int = 10, width: int = 32, feature_dim: int = 64,
                 batch_norm: bool = True) -> None:
        super().__init__()
        norm = (lambda c: nn.BatchNorm2d(c)) if batch_norm else (lambda c: nn.Identity())
        self.body = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1), norm(width), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(width, width * 2, 3, padding=1), norm(width * 2), nn.ReLU(True), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(4), nn.Flatten(),
            nn.Linear(width * 2 * 16, feature_dim), nn.ReLU(True),
        )
        self.head = nn.Linear(feature_dim, num_classes)
        self.feature_dim = feature_dim

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))
