"""Where FID's per-dataset cache lives and how its files are checked.

One folder per (dataset, image size) under `cache_dir/fid/`, so two studies on the same data share the trained
classifier and the real statistics, and two different datasets never do. Writes and the build lock are the
project's (tuner.files.atomic_write / locked); this module only names the folder and fingerprints files.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuner.data import Datasets


def image_size_of(datasets: Datasets) -> int:
    """Side of the dataset's images (Datasets does not store it; every item has it)."""
    return int(datasets.val[0][0].shape[-1])


def dataset_slug(name: str, image_size: int) -> str:
    """A folder name for (dataset, image size): readable for plain names, hashed when a path is in it."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "dataset"
    if safe != name or len(safe) > 48:
        safe = f"{safe[-40:].strip('._')}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    return f"{safe}-{image_size}px"


def fid_cache_dir(datasets: Datasets, cache_dir: Path) -> Path:
    return Path(cache_dir) / "fid" / dataset_slug(datasets.name, image_size_of(datasets))


def sha256(path: Path) -> str:
    """Hex digest of a file, read in blocks: ties cached real statistics to the exact extractor weights."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
