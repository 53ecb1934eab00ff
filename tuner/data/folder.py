"""`folder:DIR`: an ImageFolder tree of the user's images, DIR/<class>/* or DIR/train|val/<class>/*.

Without train/ and val/ the fixed validation split is held out; with them, val keeps train's class indices
even when it lacks a class. Grayscale trees stay 1-channel (judged by the first image), all else is RGB.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset
from torchvision import transforms
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from tuner.data._common import Split, fixed_split, normalize, require_folder
from tuner.data.spec import Datasets, DatasetSpec
from tuner.errors import DatasetError

_GRAY_MODES = ("1", "L", "LA", "I", "I;16", "F")


class ClassFolder(ImageFolder):
    """ImageFolder with the class list given, so a val tree missing a class keeps the train tree's labels."""

    def __init__(self, root: Path, classes: list[str], **kwargs: Any):
        self._given_classes = classes
        super().__init__(str(root), allow_empty=True, **kwargs)

    def find_classes(self, directory: str | Path) -> tuple[list[str], dict[str, int]]:
        return self._given_classes, {c: i for i, c in enumerate(self._given_classes)}


def _has_image(folder: Path) -> bool:
    for _, _, files in os.walk(folder):
        if any(f.lower().endswith(IMG_EXTENSIONS) for f in files):
            return True
    return False


def _check_tree(spec: DatasetSpec, tree: Path) -> None:
    classes = sorted(d for d in tree.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise DatasetError(
            f"dataset {spec.given!r}: expected class folders in {tree} (an ImageFolder tree {tree}/<class>/*.png); "
            "put each class's images in its own subfolder"
        )
    if not any(_has_image(c) for c in classes):
        raise DatasetError(
            f"dataset {spec.given!r}: no images ({', '.join(IMG_EXTENSIONS[:4])}, ...) under {tree}/<class>/; "
            "add images to the class folders"
        )


def check(spec: DatasetSpec) -> None:
    """Refuse a tree without class folders or without any image in them (nothing is decoded)."""
    root = require_folder(spec)
    if (root / "train").is_dir() and (root / "val").is_dir():
        _check_tree(spec, root / "train")
        _check_tree(spec, root / "val")
    else:
        _check_tree(spec, root)


def _first_image(tree: Path) -> Path | None:
    for dirpath, dirnames, files in os.walk(tree):
        dirnames.sort()
        for f in sorted(files):
            if f.lower().endswith(IMG_EXTENSIONS):
                return Path(dirpath) / f
    return None


def _channels(spec: DatasetSpec, tree: Path) -> int:
    """1 if the first image is grayscale, else 3 (everything else is converted to RGB)."""
    from PIL import Image, UnidentifiedImageError

    first = _first_image(tree)
    if first is None:
        raise DatasetError(f"dataset {spec.given!r}: no images under {tree}/<class>/; add images to the class folders")
    try:
        with Image.open(first) as img:
            return 1 if img.mode in _GRAY_MODES else 3
    except (OSError, UnidentifiedImageError) as err:
        raise DatasetError(
            f"dataset {spec.given!r}: cannot open {first} as an image ({err}); remove or replace it"
        ) from None


def load(spec: DatasetSpec, image_size: int, cache_dir: Path, seed: int, train_augment: bool) -> Datasets:
    """Resize and center-crop to image_size; seed, cache and augment do not apply."""
    root = Path(spec.path or ".")
    split_layout = (root / "train").is_dir() and (root / "val").is_dir()
    train_root = root / "train" if split_layout else root
    channels = _channels(spec, train_root)
    steps: list[Any] = [transforms.Resize(image_size), transforms.CenterCrop(image_size)]
    if channels == 1:
        steps.insert(0, transforms.Grayscale(1))
    tf = transforms.Compose(steps + [transforms.ToTensor(), normalize(channels)])
    try:
        if split_layout:
            train: Dataset = ImageFolder(str(train_root), transform=tf)
            classes = train.classes  # type: ignore[attr-defined]
            extra = sorted({d.name for d in (root / "val").iterdir() if d.is_dir()} - set(classes))
            if extra:
                raise DatasetError(
                    f"dataset {spec.given!r}: {root / 'val'} has class folder(s) {', '.join(extra)} that {train_root} "
                    "lacks; val classes must be train classes"
                )
            val: Dataset = ClassFolder(root / "val", classes, transform=tf)
            if len(val) == 0:
                raise DatasetError(
                    f"dataset {spec.given!r}: no images under {root / 'val'}/<class>/; add validation images"
                )
        else:
            base = ImageFolder(str(root))
            classes = base.classes
            train_idx, val_idx = fixed_split(len(base))
            train, val = Split(base, train_idx, tf), Split(base, val_idx, tf)
    except DatasetError as err:
        if str(err).startswith("dataset "):
            raise
        raise DatasetError(f"dataset {spec.given!r}: {err}; add images to {root}") from None
    except (FileNotFoundError, OSError) as err:
        raise DatasetError(
            f"dataset {spec.given!r}: cannot read the image tree {root} ({err}); fix the folder layout"
        ) from None
    return Datasets(train, val, channels=channels, num_classes=len(classes), name=spec.name, synthetic=False)
