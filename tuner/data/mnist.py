"""`mnist:DIR` and `fashion_mnist:DIR`: the idx files in torchvision's layout, DIR/MNIST/raw or DIR/FashionMNIST/raw.

Both kinds share the format and the checks; only the folder name and the class names differ. tuner never
downloads them, so the check says which file is missing and what is probably wrong (gzipped, wrong DIR).
Train is the train split and val the t10k split.
"""

from __future__ import annotations

from pathlib import Path

from torchvision import transforms
from torchvision.datasets import MNIST, FashionMNIST

from tuner.data._common import normalize, require_folder
from tuner.data.spec import Datasets, DatasetSpec
from tuner.errors import DatasetError

_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _reader(spec: DatasetSpec) -> type[MNIST]:
    return MNIST if spec.kind == "mnist" else FashionMNIST


def check(spec: DatasetSpec) -> None:
    """Refuse a DIR without the four uncompressed idx files (or torchvision's legacy processed/*.pt)."""
    root = require_folder(spec)
    kind = spec.kind
    sub = _reader(spec).__name__
    raw = root / sub / "raw"
    if (root / sub / "processed" / "training.pt").is_file() and (root / sub / "processed" / "test.pt").is_file():
        return  # torchvision's legacy layout, which it still reads
    for fname in _FILES:
        want = raw / fname
        if want.is_file():
            continue
        if want.with_name(fname + ".gz").is_file():
            fix = f"gunzip {want}.gz (torchvision reads the uncompressed files)"
        elif (root / fname).is_file() or (root / "raw" / fname).is_file():
            fix = f"point {kind}:DIR at the folder that contains {sub}/raw/"
        else:
            fix = "put the four idx files there"
        raise DatasetError(
            f"dataset {spec.given!r}: expected {want} (torchvision's {sub} layout); {fix}; "
            "tuner never downloads datasets"
        )


def load(spec: DatasetSpec, image_size: int, cache_dir: Path, seed: int, train_augment: bool) -> Datasets:
    """Read both splits, refusing unreadable or inconsistent idx files; seed, cache and augment do not apply."""
    cls = _reader(spec)
    tf = transforms.Compose([transforms.Resize((image_size, image_size)), transforms.ToTensor(), normalize(1)])
    raw = Path(spec.path or ".") / cls.__name__ / "raw"
    splits = []
    for train in (True, False):
        prefix = "train" if train else "t10k"
        try:
            ds = cls(root=str(spec.path), train=train, transform=tf, download=False)
        except Exception as err:  # noqa: BLE001 - torchvision raises assert/Type/Value/RuntimeError on bad idx files
            raise DatasetError(
                f"dataset {spec.given!r}: cannot read {raw}/{prefix}-images-idx3-ubyte / {prefix}-labels-idx1-ubyte "
                f"({type(err).__name__}: {err or 'bad idx header'}); replace them with intact uncompressed idx files"
            ) from None
        if len(ds.data) == 0 or len(ds.data) != len(ds.targets):
            raise DatasetError(
                f"dataset {spec.given!r}: {raw}/{prefix}-images-idx3-ubyte has {len(ds.data)} images but "
                f"{prefix}-labels-idx1-ubyte has {len(ds.targets)} labels; they must match and be non-empty"
            )
        if int(ds.targets.max()) >= len(cls.classes):
            raise DatasetError(
                f"dataset {spec.given!r}: {raw}/{prefix}-labels-idx1-ubyte has label {int(ds.targets.max())}, "
                f"expected 0..{len(cls.classes) - 1}; replace the label file"
            )
        splits.append(ds)
    return Datasets(splits[0], splits[1], channels=1, num_classes=len(cls.classes), name=spec.name, synthetic=False)
