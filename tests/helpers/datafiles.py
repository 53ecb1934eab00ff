"""Writers of tiny datasets in the real on-disk formats (MNIST idx, CIFAR-10 pickles, ImageFolder trees)."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
from PIL import Image



def _write_idx_images(path: Path, images: np.ndarray) -> None:
    n, h, w = images.shape
    path.write_bytes(struct.pack(">IIII", 0x00000803, n, h, w) + images.astype(np.uint8).tobytes())


def _write_idx_labels(path: Path, labels: np.ndarray) -> None:
    path.write_bytes(struct.pack(">II", 0x00000801, len(labels)) + labels.astype(np.uint8).tobytes())


def write_mnist(root: Path, sub: str = "MNIST", n_train: int = 12, n_test: int = 5) -> Path:
    raw = root / sub / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        _write_idx_images(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        _write_idx_labels(raw / f"{prefix}-labels-idx1-ubyte", np.arange(n) % 10)
    return root


def write_cifar(root: Path, n_per_batch: int = 3, n_test: int = 4) -> Path:
    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batches = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in batches:
        n = n_test if name == "test_batch" else n_per_batch
        entry = {"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8), "labels": [i % 10 for i in range(n)]}
        (base / name).write_bytes(pickle.dumps(entry))
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    (base / "batches.meta").write_bytes(pickle.dumps({"label_names": names}))
    return root


def write_tree(root: Path, classes: dict[str, int], mode: str = "RGB", size: tuple[int, int] = (20, 14)) -> Path:
    for c, n in classes.items():
        (root / c).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            color = (i * 20) % 256 if mode == "L" else ((i * 20) % 256, 40, 200)
            Image.new(mode, size, color).save(root / c / f"{i}.png")
    return root
