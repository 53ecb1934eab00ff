"""The real images FID compares against: the training split, un-augmented, at most a fixed 50k of it.

Both the feature classifier and the real statistics read them, and both must come out the same in every trial,
so nothing here may depend on augmentation draws or on the caller's random state.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from torch.utils.data import DataLoader, Dataset, Subset

if TYPE_CHECKING:
    from tuner.data import Datasets

# Real statistics: at most this many training images (the usual 50k for FID), a fixed subset when larger.
REAL_MAX_SAMPLES = 50_000
_REAL_SUBSET_SEED = 31337


def unaugmented_train(datasets: Datasets) -> Dataset:
    """The training split with the validation transform: real statistics must not depend on augmentation draws.

    tuner's datasets carry their transform as `.transform` (ImageFolder, MNIST, CIFAR10, the folder split); where
    the train split has one, a shallow copy gets val's. Datasets without transforms (synthetic) have nothing to undo.
    """
    train, val = datasets.train, datasets.val
    if hasattr(train, "transform") and hasattr(val, "transform"):
        train = copy.copy(train)
        train.transform = val.transform
    return train


def real_subset(ds: Dataset) -> Dataset:
    """All of `ds` up to REAL_MAX_SAMPLES, else a seeded subset of that size (the same one every time)."""
    n = len(ds)  # type: ignore[arg-type]
    if n <= REAL_MAX_SAMPLES:
        return ds
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(_REAL_SUBSET_SEED))[:REAL_MAX_SAMPLES]
    return Subset(ds, sorted(perm.tolist()))


def image_batches(ds: Dataset, batch_size: int) -> Iterator[torch.Tensor]:
    """The images of `ds` in order; an own generator so the global RNG is not drawn from."""
    for x, _ in DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=0, generator=torch.Generator()):
        yield x
