"""Datasets named by a spec string: digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR.

Every dataset yields (image float tensor [C, S, S] in [-1, 1], int label) and has a fixed validation split, so
trials of a study train and are scored on the same data whatever their seed. tuner never downloads anything:
the DIR kinds read files the user already has, and `check_dataset` says cheaply (before Ray starts) which file
is missing where.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils.data import Dataset
from torchvision import transforms
from torchvision.datasets import CIFAR10, MNIST, FashionMNIST, ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from tuner.errors import DatasetError

DIR_KINDS = ("mnist", "fashion_mnist", "cifar10", "folder")
PLAIN_KINDS = ("digits", "synthetic")
ACCEPTED = "digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR"

# Fixed seed of the held-out splits: independent of the trial seed so the split never changes.
_SPLIT_SEED = 20240607
_VAL_FRACTION = 0.2
_SYNTHETIC_SIZES = {"train": 2048, "val": 256}
_SYNTHETIC_CLASSES = 10
_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_CIFAR_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch", "batches.meta")
_GRAY_MODES = ("1", "L", "LA", "I", "I;16", "F")


@dataclass
class DatasetSpec:
    kind: str  # "digits" | "synthetic" | "mnist" | "fashion_mnist" | "cifar10" | "folder"
    path: Path | None  # for the DIR kinds, resolved absolute

    @property
    def name(self) -> str:
        """Canonical spec string; equal for equal data, so FID code can key caches on it."""
        return self.kind if self.path is None else f"{self.kind}:{self.path}"


@dataclass
class Datasets:
    train: Dataset  # items (image float tensor [C,H,W] in [-1,1], label int)
    val: Dataset  # fixed held-out split, no random augmentation
    channels: int
    num_classes: int
    name: str  # canonical, e.g. "digits", "mnist:/abs/dir" (a cache key for FID code)
    synthetic: bool  # True only for synthetic: quality figures are meaningless there


def parse_dataset_spec(spec: str) -> DatasetSpec:
    """`kind` or `kind:DIR`; DIR is resolved to an absolute path (it need not exist yet: see check_dataset)."""
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError(f"empty dataset spec; use one of {ACCEPTED}")
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower().replace("-", "_")
    if kind in PLAIN_KINDS:
        if sep:
            raise DatasetError(f"dataset {spec!r}: {kind} takes no DIR (it needs no files); use plain '{kind}'")
        return DatasetSpec(kind, None)
    if kind in DIR_KINDS:
        if not rest.strip():
            raise DatasetError(f"dataset {spec!r}: {kind} needs a folder, e.g. '{kind}:/data/{kind}'; accepted: {ACCEPTED}")
        return DatasetSpec(kind, Path(rest.strip()).expanduser().resolve())
    raise DatasetError(f"unknown dataset {spec!r}; use one of {ACCEPTED}")


# --- cheap validation ------------------------------------------------------------------------------------


def check_dataset(spec: str) -> None:
    """Refuse a spec whose files are not there, without decoding anything (run before Ray starts)."""
    parsed = parse_dataset_spec(spec)
    if parsed.path is None:
        return
    root = parsed.path
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise DatasetError(f"dataset {spec!r}: {root} {what}; point {parsed.kind}:DIR at an existing folder")
    if parsed.kind in ("mnist", "fashion_mnist"):
        _check_mnist(spec, parsed.kind, root)
    elif parsed.kind == "cifar10":
        _check_cifar(spec, root)
    else:
        _check_folder(spec, root)


def _check_mnist(spec: str, kind: str, root: Path) -> None:
    sub = "MNIST" if kind == "mnist" else "FashionMNIST"
    raw = root / sub / "raw"
    if (root / sub / "processed" / "training.pt").is_file() and (root / sub / "processed" / "test.pt").is_file():
        return  # torchvision's legacy layout, which it still reads
    for fname in _MNIST_FILES:
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
            f"dataset {spec!r}: expected {want} (torchvision's {sub} layout); {fix}; tuner never downloads datasets"
        )


def _check_cifar(spec: str, root: Path) -> None:
    base = root / CIFAR10.base_folder
    for fname in _CIFAR_FILES:
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
            f"dataset {spec!r}: expected {want} (torchvision's CIFAR10 layout); {fix}; tuner never downloads datasets"
        )


def _has_image(folder: Path) -> bool:
    for _, _, files in os.walk(folder):
        if any(f.lower().endswith(IMG_EXTENSIONS) for f in files):
            return True
    return False


def _check_tree(spec: str, tree: Path) -> None:
    classes = sorted(d for d in tree.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise DatasetError(
            f"dataset {spec!r}: expected class folders in {tree} (an ImageFolder tree {tree}/<class>/*.png); "
            "put each class's images in its own subfolder"
        )
    if not any(_has_image(c) for c in classes):
        raise DatasetError(
            f"dataset {spec!r}: no images ({', '.join(IMG_EXTENSIONS[:4])}, ...) under {tree}/<class>/; "
            "add images to the class folders"
        )


def _check_folder(spec: str, root: Path) -> None:
    if (root / "train").is_dir() and (root / "val").is_dir():
        _check_tree(spec, root / "train")
        _check_tree(spec, root / "val")
    else:
        _check_tree(spec, root)


# --- datasets ----------------------------------------------------------------------------------------------


def _fixed_split(n: int) -> tuple[list[int], list[int]]:
    """(train, val) indices: the same 20% held out on every call, for every seed."""
    if n < 2:
        raise DatasetError(f"need at least 2 items to hold out a validation split, found {n}")
    n_val = min(n - 1, max(1, round(n * _VAL_FRACTION)))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(_SPLIT_SEED)).tolist()
    return sorted(perm[n_val:]), sorted(perm[:n_val])


class _Split(Dataset):
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


class _SyntheticImages(Dataset):
    """Uniform noise in [-1, 1], generated per item from (seed, split, index): no memory, same item every time."""

    def __init__(self, n: int, image_size: int, seed: int, split: int):
        self.n = n
        self.image_size = image_size
        self.seed = seed
        self.split = split
        g = torch.Generator().manual_seed(seed * 2 + split)
        self.labels = torch.randint(0, _SYNTHETIC_CLASSES, (n,), generator=g).tolist()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if not 0 <= i < self.n:
            raise IndexError(i)
        g = torch.Generator().manual_seed((self.seed * 2 + self.split) * 1_000_003 + i)
        x = torch.rand(1, self.image_size, self.image_size, generator=g) * 2 - 1
        return x, self.labels[i]


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


class _ClassFolder(ImageFolder):
    """ImageFolder with the class list given, so a val tree missing a class keeps the train tree's labels."""

    def __init__(self, root: Path, classes: list[str], **kwargs: Any):
        self._given_classes = classes
        super().__init__(str(root), allow_empty=True, **kwargs)

    def find_classes(self, directory: str | Path) -> tuple[list[str], dict[str, int]]:
        return self._given_classes, {c: i for i, c in enumerate(self._given_classes)}


def _normalize(channels: int) -> transforms.Normalize:
    return transforms.Normalize((0.5,) * channels, (0.5,) * channels)


def _augment() -> transforms.RandomAffine:
    return transforms.RandomAffine(degrees=8, translate=(0.06, 0.06), scale=(0.94, 1.06))


def load_datasets(
    spec: str, image_size: int, cache_dir: Path, seed: int = 0, train_augment: bool = True
) -> Datasets:
    """Build train/val datasets for a spec. `seed` only picks the synthetic noise; real splits are fixed."""
    if image_size < 1:
        raise DatasetError(f"image_size must be positive, got {image_size}")
    check_dataset(spec)
    parsed = parse_dataset_spec(spec)
    if parsed.kind == "synthetic":
        return Datasets(
            train=_SyntheticImages(_SYNTHETIC_SIZES["train"], image_size, seed, 0),
            val=_SyntheticImages(_SYNTHETIC_SIZES["val"], image_size, seed, 1),
            channels=1,
            num_classes=_SYNTHETIC_CLASSES,
            name=parsed.name,
            synthetic=True,
        )
    if parsed.kind == "digits":
        return _load_digits(parsed, image_size, Path(cache_dir), train_augment)
    assert parsed.path is not None
    if parsed.kind in ("mnist", "fashion_mnist"):
        return _load_mnist(spec, parsed, image_size)
    if parsed.kind == "cifar10":
        return _load_cifar(spec, parsed, image_size)
    return _load_folder(spec, parsed, image_size)


# digits ----------------------------------------------------------------------------------------------------


def _write_digits(final: Path, image_size: int) -> None:
    """Write the PNG tree into a temp dir and rename it into place, so no reader ever sees half a cache."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images * (255.0 / 16.0)).clip(0, 255).round().astype("uint8")
    labels = digits.target.tolist()
    train_idx, val_idx = _fixed_split(len(labels))
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
            if not final.is_dir():  # not "someone else finished first": a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load_digits(parsed: DatasetSpec, image_size: int, cache_dir: Path, train_augment: bool) -> Datasets:
    final = cache_dir / "datasets" / f"digits-{image_size}"
    if not final.is_dir():
        try:
            _write_digits(final, image_size)
        except OSError as err:
            raise DatasetError(
                f"dataset 'digits': cannot write its image cache {final}: {err.strerror or err}; "
                "use a writable cache dir"
            ) from None
    base = [transforms.Grayscale(1)]
    train_tf = transforms.Compose(base + ([_augment()] if train_augment else []) + [transforms.ToTensor(), _normalize(1)])
    val_tf = transforms.Compose(base + [transforms.ToTensor(), _normalize(1)])
    train = ImageFolder(str(final / "train"), transform=train_tf)
    val = _ClassFolder(final / "val", train.classes, transform=val_tf)
    return Datasets(train, val, channels=1, num_classes=len(train.classes), name=parsed.name, synthetic=False)


# mnist / fashion_mnist -------------------------------------------------------------------------------------


def _load_mnist(spec: str, parsed: DatasetSpec, image_size: int) -> Datasets:
    cls = MNIST if parsed.kind == "mnist" else FashionMNIST
    tf = transforms.Compose([transforms.Resize((image_size, image_size)), transforms.ToTensor(), _normalize(1)])
    raw = Path(parsed.path or ".") / cls.__name__ / "raw"
    splits = []
    for train in (True, False):
        prefix = "train" if train else "t10k"
        try:
            ds = cls(root=str(parsed.path), train=train, transform=tf, download=False)
        except Exception as err:  # noqa: BLE001 - torchvision raises assert/Type/Value/RuntimeError on bad idx files
            raise DatasetError(
                f"dataset {spec!r}: cannot read {raw}/{prefix}-images-idx3-ubyte / {prefix}-labels-idx1-ubyte "
                f"({type(err).__name__}: {err or 'bad idx header'}); replace them with intact uncompressed idx files"
            ) from None
        if len(ds.data) == 0 or len(ds.data) != len(ds.targets):
            raise DatasetError(
                f"dataset {spec!r}: {raw}/{prefix}-images-idx3-ubyte has {len(ds.data)} images but "
                f"{prefix}-labels-idx1-ubyte has {len(ds.targets)} labels; they must match and be non-empty"
            )
        if int(ds.targets.max()) >= len(cls.classes):
            raise DatasetError(
                f"dataset {spec!r}: {raw}/{prefix}-labels-idx1-ubyte has label {int(ds.targets.max())}, "
                f"expected 0..{len(cls.classes) - 1}; replace the label file"
            )
        splits.append(ds)
    return Datasets(splits[0], splits[1], channels=1, num_classes=len(cls.classes), name=parsed.name, synthetic=False)


# cifar10 ---------------------------------------------------------------------------------------------------


def _load_cifar(spec: str, parsed: DatasetSpec, image_size: int) -> Datasets:
    tf = transforms.Compose([transforms.Resize((image_size, image_size)), transforms.ToTensor(), _normalize(3)])
    base = Path(parsed.path or ".") / CIFAR10.base_folder
    splits = []
    for train in (True, False):
        try:
            ds = _PresentOnlyCIFAR10(root=str(parsed.path), train=train, transform=tf, download=False)
        except Exception as err:  # noqa: BLE001 - unpickling garbage raises almost anything
            raise DatasetError(
                f"dataset {spec!r}: cannot read the CIFAR-10 batches in {base} ({type(err).__name__}: {err}); "
                "replace them with intact python-version batches (dicts with 'data' Nx3072 uint8 and 'labels')"
            ) from None
        if len(ds.data) == 0 or len(ds.data) != len(ds.targets):
            raise DatasetError(
                f"dataset {spec!r}: {base} {'training' if train else 'test'} batches hold {len(ds.data)} images "
                f"but {len(ds.targets)} labels; they must match and be non-empty"
            )
        splits.append(ds)
    num_classes = len(splits[0].classes)
    bad = [t for ds in splits for t in ds.targets if not 0 <= int(t) < num_classes]
    if bad:
        raise DatasetError(
            f"dataset {spec!r}: label {bad[0]} in {base} is outside the {num_classes} classes of batches.meta; "
            "fix the batches or the meta file"
        )
    return Datasets(splits[0], splits[1], channels=3, num_classes=num_classes, name=parsed.name, synthetic=False)


# folder ----------------------------------------------------------------------------------------------------


def _first_image(tree: Path) -> Path | None:
    for dirpath, dirnames, files in os.walk(tree):
        dirnames.sort()
        for f in sorted(files):
            if f.lower().endswith(IMG_EXTENSIONS):
                return Path(dirpath) / f
    return None


def _folder_channels(spec: str, tree: Path) -> int:
    """1 if the first image is grayscale, else 3 (everything else is converted to RGB)."""
    from PIL import Image, UnidentifiedImageError

    first = _first_image(tree)
    if first is None:
        raise DatasetError(f"dataset {spec!r}: no images under {tree}/<class>/; add images to the class folders")
    try:
        with Image.open(first) as img:
            return 1 if img.mode in _GRAY_MODES else 3
    except (OSError, UnidentifiedImageError) as err:
        raise DatasetError(f"dataset {spec!r}: cannot open {first} as an image ({err}); remove or replace it") from None


def _load_folder(spec: str, parsed: DatasetSpec, image_size: int) -> Datasets:
    root = Path(parsed.path or ".")
    split_layout = (root / "train").is_dir() and (root / "val").is_dir()
    train_root = root / "train" if split_layout else root
    channels = _folder_channels(spec, train_root)
    steps: list[Any] = [transforms.Resize(image_size), transforms.CenterCrop(image_size)]
    if channels == 1:
        steps.insert(0, transforms.Grayscale(1))
    tf = transforms.Compose(steps + [transforms.ToTensor(), _normalize(channels)])
    try:
        if split_layout:
            train: Dataset = ImageFolder(str(train_root), transform=tf)
            classes = train.classes  # type: ignore[attr-defined]
            extra = sorted({d.name for d in (root / "val").iterdir() if d.is_dir()} - set(classes))
            if extra:
                raise DatasetError(
                    f"dataset {spec!r}: {root / 'val'} has class folder(s) {', '.join(extra)} that {train_root} "
                    "lacks; val classes must be train classes"
                )
            val: Dataset = _ClassFolder(root / "val", classes, transform=tf)
            if len(val) == 0:
                raise DatasetError(f"dataset {spec!r}: no images under {root / 'val'}/<class>/; add validation images")
        else:
            base = ImageFolder(str(root))
            classes = base.classes
            train_idx, val_idx = _fixed_split(len(base))
            train, val = _Split(base, train_idx, tf), _Split(base, val_idx, tf)
    except DatasetError as err:
        if str(err).startswith("dataset "):
            raise
        raise DatasetError(f"dataset {spec!r}: {err}; add images to {root}") from None
    except (FileNotFoundError, OSError) as err:
        raise DatasetError(f"dataset {spec!r}: cannot read the image tree {root} ({err}); fix the folder layout") from None
    return Datasets(train, val, channels=channels, num_classes=len(classes), name=parsed.name, synthetic=False)
