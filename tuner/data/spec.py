"""What a dataset spec string names, and what loading one returns.

Kept apart from the loaders so every kind module can import these types without importing the others, and so
parsing (which needs no files) stays cheap and in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torch.utils.data import Dataset

from tuner.errors import DatasetError

DIR_KINDS = ("mnist", "fashion_mnist", "cifar10", "folder")
PLAIN_KINDS = ("digits", "synthetic")
ACCEPTED = "digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR"


@dataclass
class DatasetSpec:
    kind: str  # "digits" | "synthetic" | "mnist" | "fashion_mnist" | "cifar10" | "folder"
    path: Path | None  # for the DIR kinds, resolved absolute
    given: str = field(default="", compare=False)  # the spec as the user wrote it: error messages quote it

    def __post_init__(self) -> None:
        if not self.given:
            self.given = self.name

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
    given = spec
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower().replace("-", "_")
    if kind in PLAIN_KINDS:
        if sep:
            raise DatasetError(f"dataset {spec!r}: {kind} takes no DIR (it needs no files); use plain '{kind}'")
        return DatasetSpec(kind, None, given)
    if kind in DIR_KINDS:
        if not rest.strip():
            raise DatasetError(f"dataset {spec!r}: {kind} needs a folder, e.g. '{kind}:/data/{kind}'; accepted: {ACCEPTED}")
        return DatasetSpec(kind, Path(rest.strip()).expanduser().resolve(), given)
    raise DatasetError(f"unknown dataset {spec!r}; use one of {ACCEPTED}")
