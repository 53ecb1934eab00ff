"""One FID extractor for the whole study, whichever node a trial runs on.

FID compares only under the same feature extractor and the same real-image statistics. The driver builds both in
its pre-flight check (`check_plan` -> `tuner.train.check_workload`: the feature classifier and the real
statistics under `<reports-dir>/.cache/fid/`), but that is a path on the driver's disk: on another node of a
cluster the same path is empty or holds another build (another torch, another copy of a folder dataset), and the
node would train its own classifier, so FIDs from different nodes would not be comparable.

So the driver reads the FID cache once after the check (`SharedFiles.collect`), records each file's sha256 in
study.json (`fid_cache`), and ships the bytes with the trial setup (Ray puts it in its object store once;
`tune.with_parameters`). Before a trial runs, `install` writes into the node's cache every file that is missing
or differs (under the cache's own folder lock, atomically), so the trial loads the driver's extractor instead of
building one; on the driver's own machine the files are already identical and nothing is written. After the
trial, `changed` says whether the trial had to rebuild one of them (its dataset differs from the driver's), and
such a trial is recorded as an error instead of a FID that compares with nothing.

Inception FID (`fid_features: inception`) also needs the weights file on every node; its sha256 is part of the
real statistics' key, so a node with other weights would compute other statistics, which `changed` reports too.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tuner.files import atomic_write, locked

FID_DIR = "fid"
WARN_BYTES = 256 * 2**20  # ship more than this and say so: every trial process receives the files


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str | None:
    try:
        return _sha256(path.read_bytes())
    except OSError:
        return None


@dataclass(frozen=True)
class SharedFiles:
    """Files of the driver's cache, by path relative to the cache folder (POSIX separators)."""

    files: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def collect(cls, cache_dir: Path, sub: str = FID_DIR) -> "SharedFiles":
        """Every file under `cache_dir/sub` but locks and temp files (written with a leading dot)."""
        root = Path(cache_dir)
        base = root / sub
        files: dict[str, bytes] = {}
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file() and not any(part.startswith(".") for part in path.relative_to(base).parts):
                    files[path.relative_to(root).as_posix()] = path.read_bytes()
        return cls(files)

    @property
    def manifest(self) -> dict[str, str]:
        """sha256 of every file (what study.json records as `fid_cache`)."""
        return {rel: _sha256(data) for rel, data in self.files.items()}

    @property
    def size(self) -> int:
        return sum(len(d) for d in self.files.values())

    def install(self, cache_dir: Path) -> Path:
        """Make the node's cache hold these files exactly; returns the cache folder to use. A driver path that
        cannot be created on this node (another user's home, a read-only mount) is replaced by a folder of the
        node's temp dir named after it, so every trial of the study on the node shares one cache."""
        root = writable_cache_dir(Path(cache_dir))
        by_folder: dict[Path, list[str]] = {}
        for rel in self.files:
            by_folder.setdefault((root / rel).parent, []).append(rel)
        for folder, rels in by_folder.items():
            with locked(folder):  # the lock tuner.measure.fid builds this folder under: no build sees half of it
                for rel in rels:
                    data = self.files[rel]
                    if _file_sha256(root / rel) != _sha256(data):
                        atomic_write(root / rel, data)
        return root

    def changed(self, cache_dir: Path) -> list[str]:
        """The files that no longer match (a trial rebuilt them): empty when the node used the driver's."""
        root = Path(cache_dir)
        return [rel for rel, data in self.files.items() if _file_sha256(root / rel) != _sha256(data)]


def writable_cache_dir(preferred: Path) -> Path:
    """`preferred` if this process can write there, else `<tmp>/tuner-cache/<hash of preferred>`."""
    try:
        preferred.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=preferred, prefix=".probe-"):
            pass
        return preferred
    except OSError:
        fallback = Path(tempfile.gettempdir()) / "tuner-cache" / hashlib.sha1(str(preferred).encode()).hexdigest()[:12]
        fallback.mkdir(parents=True, exist_ok=True)
        return fallback
