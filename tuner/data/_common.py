"""Pieces several dataset kinds share: the fixed validation split, split views, transforms, the folder check.

One copy each, so every kind holds out the same way (whatever the trial seed) and scales pixels to [-1, 1] the
same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import Dataset

from tuner.data.spec import DatasetSpec
from tuner.errors import DatasetError

if TYPE_CHECKING:
    from torchvision import transforms

# Fixed seed of the held-out splits: independent of the trial seed so the split never changes.
_SPLIT_SEED = 20240607
_VAL_FRACTION = 0.2


def fixed_split(n: int) -> tuple[list[int], list[int]]:
    """(train, val) indices: the same 20% held out on every call, for every seed."""
    if n < 2:
        raise DatasetError(f"need at least 2 items to hold out a validation split, found {n}")
    n_val = min(n - 1, max(1, round(n * _VAL_FRACTION)))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(_SPLIT_SEED)).tolist()
    return sorted(perm[n_val:]), sorted(perm[:n_val])


class Split(Dataset):
    """A subset of an (image, label) dataset with its own transform, so train and val share one file scan."""

    def __init__(self, base: Dataset, indices: list[int], transform: Callable[[Any], torch.Tensor]):
        self.base = base
        self.indices = indices
        self.transform = transform

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img, label = self.base[self.indices[i]]
        return self.transform(img), int(label)


def normalize(channels: int) -> transforms.Normalize:
    """[0, 1] tensors to [-1, 1] (the torchvision kinds; digits does it in tuner.data._pngtree)."""
    from torchvision import transforms

    return transforms.Normalize((0.5,) * channels, (0.5,) * channels)


def require_folder(spec: DatasetSpec) -> Path:
    """The DIR of a DIR kind, refused unless it is an existing folder (the first check of every DIR kind)."""
    root = spec.path
    assert root is not None, f"{spec.kind} is not a DIR kind"
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise DatasetError(f"dataset {spec.given!r}: {root} {what}; point {spec.kind}:DIR at an existing folder")
    return root
