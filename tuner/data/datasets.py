"""Datasets named by a spec string: digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR.

Every dataset yields (image float tensor [C, S, S] in [-1, 1], int label) and has a fixed validation split, so
trials of a study train and are scored on the same data whatever their seed. tuner never downloads anything:
the DIR kinds read files the user already has, and `check_dataset` says cheaply (before Ray starts) which file
is missing where. Each kind lives in its own module with its check and its loader; this one only dispatches,
through one table, so adding a kind is one module and one row.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from tuner.data.spec import Datasets, DatasetSpec, parse_dataset_spec
from tuner.errors import DatasetError


class DatasetKind(NamedTuple):
    """A kind's module, imported when the kind is used: the DIR kinds import torchvision, whose import pulls in
    torch._dynamo (about 1.5 s of CPU a process, before torch's optimizers import it at their first step), which
    a process that only checks a spec never needs; synthetic and digits never import it."""

    module: str  # tuner.data.<module>

    def check(self, spec: DatasetSpec) -> None:  # cheap: file presence only, nothing decoded
        importlib.import_module(f"tuner.data.{self.module}").check(spec)

    def load(self, spec: DatasetSpec, image_size: int, cache_dir: Path, seed: int, train_augment: bool) -> Datasets:
        return importlib.import_module(f"tuner.data.{self.module}").load(spec, image_size, cache_dir, seed,
                                                                         train_augment)


KINDS = MappingProxyType(
    {
        "digits": DatasetKind("digits"),
        "synthetic": DatasetKind("synthetic"),
        "mnist": DatasetKind("mnist"),
        "fashion_mnist": DatasetKind("mnist"),
        "cifar10": DatasetKind("cifar"),
        "folder": DatasetKind("folder"),
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
