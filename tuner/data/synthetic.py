"""`synthetic`: seeded uniform noise with random labels, for measuring speed without any data on disk.

Items are generated on demand from (seed, split, index), so it costs no memory or files and is the same on
every read; quality figures on it are meaningless, which `Datasets.synthetic` flags.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import Dataset

from tuner.data.spec import Datasets, DatasetSpec

_SIZES = {"train": 2048, "val": 256}
_CLASSES = 10


class SyntheticImages(Dataset):
    """Uniform noise in [-1, 1], generated per item from (seed, split, index): no memory, same item every time."""

    def __init__(self, n: int, image_size: int, seed: int, split: int):
        self.n = n
        self.image_size = image_size
        self.seed = seed
        self.split = split
        g = torch.Generator().manual_seed(seed * 2 + split)
        self.labels = torch.randint(0, _CLASSES, (n,), generator=g).tolist()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if not 0 <= i < self.n:
            raise IndexError(i)
        g = torch.Generator().manual_seed((self.seed * 2 + self.split) * 1_000_003 + i)
        x = torch.rand(1, self.image_size, self.image_size, generator=g) * 2 - 1
        return x, self.labels[i]


def check(spec: DatasetSpec) -> None:
    """Nothing to check: synthetic needs no files."""


def load(spec: DatasetSpec, image_size: int, cache_dir: Path, seed: int, train_augment: bool) -> Datasets:
    """`seed` picks the noise; train_augment and cache_dir do not apply."""
    return Datasets(
        train=SyntheticImages(_SIZES["train"], image_size, seed, 0),
        val=SyntheticImages(_SIZES["val"], image_size, seed, 1),
        channels=1,
        num_classes=_CLASSES,
        name=spec.name,
        synthetic=True,
    )
