"""`cifar10:DIR`: the python-version CIFAR-10 batches in torchvision's layout, DIR/cifar-10-batches-py/.

The files are checked for presence, not md5 (trimmed or re-pickled batches are fine); tuner never downloads
them, so the check says which file is missing and what is probably wrong (still a tarball, wrong DIR).
Train is the five data batches and val the test batch.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from torchvision import transforms
from torchvision.datasets import CIFAR10

from tuner.data._common import normalize, require_folder
from tuner.data.spec import Datasets, DatasetSpec
from tuner.errors import DatasetError

_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch", "batches.meta")


class _PresentOnlyCIFAR10(CIFAR10):
    """torchvision's CIFAR10 reader that checks the batch files are present instead of their md5 sums."""

    def _check_integrity(self) -> bool:
        base = Path(self.root) / self.base_folder
        return all((base / f).is_file() for f, _ in self.train_list + self.test_list)

    def _load_meta(self) -> None:
        path = Path(self.root) / self.base_folder / self.meta["filename"]
        with open(path, "rb") as f:
            self.classes = list(pickle.load(f, encoding="latin1")[self.meta["key"]])
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def __getitem__(self, index: int) -> tuple[Any, int]:
        img, target = super().__getitem__(index)
        return img, int(target)


def check(spec: DatasetSpec) -> None:
    """Refuse a DIR without the six batches and batches.meta."""
    root = require_folder(spec)
    base = root / CIFAR10.base_folder
    for fname in _FILES:
        want = base / fname
        if want.is_file():
            continue
        if (root / CIFAR10.filename).is_file():
            fix = f"extract {root / CIFAR10.filename} there (tar xzf)"
        elif (root / fname).is_file():
            fix = f"point cifar10:DIR at the folder that contains {CIFAR10.base_folder}/, i.e. {root.parent}"
        else:
            fix = "put the python-version CIFAR-10 batches there"
        raise DatasetError(
            f"dataset {spec.given!r}: expected {want} (torchvision's CIFAR10 layout); {fix}; "
            "tuner never downloads datasets"
        )


def load(spec: DatasetSpec, image_size: int, cache_dir: Path, seed: int, train_augment: bool) -> Datasets:
    """Read both splits, refusing unreadable batches or labels outside the meta's classes."""
    tf = transforms.Compose([transforms.Resize((image_size, image_size)), transforms.ToTensor(), normalize(3)])
    base = Path(spec.path or ".") / CIFAR10.base_folder
    splits = []
    for train in (True, False):
        try:
            ds = _PresentOnlyCIFAR10(root=str(spec.path), train=train, transform=tf, download=False)
        except Exception as err:  # noqa: BLE001 - unpickling garbage raises almost anything
            raise DatasetError(
                f"dataset {spec.given!r}: cannot read the CIFAR-10 batches in {base} ({type(err).__name__}: {err}); "
                "replace them with intact python-version batches (dicts with 'data' Nx3072 uint8 and 'labels')"
            ) from None
        if len(ds.data) == 0 or len(ds.data) != len(ds.targets):
            raise DatasetError(
                f"dataset {spec.given!r}: {base} {'training' if train else 'test'} batches hold {len(ds.data)} images "
                f"but {len(ds.targets)} labels; they must match and be non-empty"
            )
        splits.append(ds)
    num_classes = len(splits[0].classes)
    bad = [t for ds in splits for t in ds.targets if not 0 <= int(t) < num_classes]
    if bad:
        raise DatasetError(
            f"dataset {spec.given!r}: label {bad[0]} in {base} is outside the {num_classes} classes of batches.meta; "
            "fix the batches or the meta file"
        )
    return Datasets(splits[0], splits[1], channels=3, num_classes=num_classes, name=spec.name, synthetic=False)
