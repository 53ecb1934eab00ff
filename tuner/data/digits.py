"""`digits`: scikit-learn's bundled 8x8 digits (1797 images), a real dataset that needs no download.

It is resized once per image size into a PNG tree, <cache>/datasets/digits-<size>/train|val/<class>/NNNN.png,
split with the fixed validation split, and read back as torchvision's ImageFolder would, with PIL alone
(tuner.data._pngtree: one import less in every trial process). The tree is written into a temp dir
and renamed into place, so no reader ever sees half a cache; the builders of <cache>/datasets take its lock,
so concurrent trials build it once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tuner.data._common import fixed_split
from tuner.data._pngtree import GrayTensor, PngTree
from tuner.data.spec import Datasets, DatasetSpec
from tuner.errors import DatasetError
from tuner.files import locked


def cache_folder(cache_dir: Path, image_size: int) -> Path:
    return Path(cache_dir) / "datasets" / f"digits-{image_size}"


def write_cache(final: Path, image_size: int) -> None:
    """Write the PNG tree into a temp dir and rename it into place, so no reader ever sees half a cache."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images * (255.0 / 16.0)).clip(0, 255).round().astype("uint8")
    labels = digits.target.tolist()
    train_idx, val_idx = fixed_split(len(labels))
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-tmp-", dir=final.parent))
    try:
        for split, idxs in (("train", train_idx), ("val", val_idx)):
            for c in sorted(set(labels)):
                (tmp / split / str(c)).mkdir(parents=True)
            for i in idxs:
                img = Image.fromarray(images[i]).resize((image_size, image_size), Image.Resampling.BILINEAR)
                img.save(tmp / split / str(labels[i]) / f"{i:04d}.png")
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():  # not "someone else finished first" (a builder without the lock): a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def check(spec: DatasetSpec) -> None:
    """Nothing to check: scikit-learn ships the images."""


def load(spec: DatasetSpec, image_size: int, cache_dir: Path, seed: int, train_augment: bool) -> Datasets:
    """Build the PNG cache if it is missing, then read it; `seed` does not apply (the split is fixed)."""
    final = cache_folder(cache_dir, image_size)
    if not final.is_dir():
        try:
            with locked(final.parent):
                if not final.is_dir():  # another builder may have finished while this one waited
                    write_cache(final, image_size)
        except OSError as err:
            raise DatasetError(
                f"dataset 'digits': cannot write its image cache {final}: {err.strerror or err}; "
                "use a writable cache dir"
            ) from None
    train = PngTree(final / "train", GrayTensor(augment=train_augment))
    val = PngTree(final / "val", GrayTensor(augment=False), classes=train.classes)
    return Datasets(train, val, channels=1, num_classes=len(train.classes), name=spec.name, synthetic=False)
