"""Datasets named by a spec string: digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR.

Every dataset yields (image float tensor [C, S, S] in [-1, 1], int label) and has a fixed validation split, so
trials of a study train and are scored on the same data whatever their seed. tuner never downloads anything:
the DIR kinds read files the user already has, and `check_dataset` says cheaply (before Ray starts) which file
is missing where. Each kind lives in its own module with its check and its loader; this one only dispatches,
through one table, so adding a kind is one module and one row.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from tuner.data import cifar, digits, folder, mnist, synthetic
from tuner.data.spec import Datasets, DatasetSpec, parse_dataset_spec
from tuner.errors import DatasetError


class DatasetKind(NamedTuple):
    check: Callable[[DatasetSpec], None]  # cheap: file presence only, nothing decoded
    load: Callable[[DatasetSpec, int, Path, int, bool], Datasets]  # (spec, image_size, cache_dir, seed, train_augment)


KINDS = MappingProxyType(
    {
        "digits": DatasetKind(digits.check, digits.load),
        "synthetic": DatasetKind(synthetic.check, synthetic.load),
        "mnist": DatasetKind(mnist.check, mnist.load),
        "fashion_mnist": DatasetKind(mnist.check, mnist.load),
        "cifar10": DatasetKind(cifar.check, cifar.load),
        "folder": DatasetKind(folder.check, folder.load),
    }
)


def check_dataset(spec: str) -> None:
    """Refuse a spec whose files are not there, without decoding anything (run before Ray starts)."""
    parsed = parse_dataset_spec(spec)
    KINDS[parsed.kind].check(parsed)


def load_datasets(
    spec: str, image_size: int, cache_dir: Path, seed: int = 0, train_augment: bool = True
) -> Datasets:
    """Build train/val datasets for a spec. `seed` only picks the synthetic noise; real splits are fixed."""
    if image_size < 1:
        raise DatasetError(f"image_size must be positive, got {image_size}")
    parsed = parse_dataset_spec(spec)
    kind = KINDS[parsed.kind]
    kind.check(parsed)
    return kind.load(parsed, image_size, cache_dir, seed, train_augment)
