"""What Ray carries to other nodes for a workload (runtime_env py_modules), and where it lands there: the user's
file's folder (or the file alone, where the folder is big), or their package's folder (`shipment`); inside a Ray
worker, the shipped copy of the user's file (`shipped_copy`). Built-ins travel with tuner."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tuner.workload.frames import LIB_DIRS
from tuner.workload.reference import WorkloadRef


def shipped_copy(ref: WorkloadRef) -> Path | None:
    """Inside a Ray worker: the copy of the user's file that Ray shipped with the job (ship_paths; runtime_env
    py_modules puts the folder it unpacks to on sys.path, under Ray's `runtime_resources`): `<entry>/<folder>/<file>`
    where the file's folder was shipped, `<entry>/<file>` where the file alone was. None outside Ray."""
    if ref.file is None:
        return None
    original = Path(ref.file)
    for entry in sys.path:
        if entry and "runtime_resources" in Path(entry).parts:
            for candidate in (Path(entry) / original.parent.name / original.name, Path(entry) / original.name):
                if candidate.is_file():
                    return candidate.resolve()
    return None


SHIP_FOLDER_MAX_BYTES = 5 * 2**20  # a file workload's folder travels with it up to this size (its source, small data)
SHIP_EXCLUDES = (".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache",
                 ".pytest_cache", ".ruff_cache", ".tox", ".ipynb_checkpoints", "*.pyc")  # never shipped (runtime_env)


@dataclass(frozen=True)
class Shipment:
    """What Ray carries to other nodes for a workload (runtime_env py_modules), a note for the user when a
    file's folder is too big to go with it, and what Ray leaves out of the folder beyond SHIP_EXCLUDES
    (runtime_env excludes, gitignore syntax, from the folder's root: the study's reports folder inside it)."""

    paths: list[str]
    note: str | None = None
    excludes: tuple[str, ...] = ()


def _excluded(name: str) -> bool:
    return any(name.endswith(pattern[1:]) if pattern.startswith("*") else name == pattern for pattern in SHIP_EXCLUDES)


def importable_sources(folder: Path) -> list[Path]:
    """The .py files a module in `folder` can import beside it: the folder's own, and its packages' (subfolders
    with an __init__.py, recursively), less what is never shipped (SHIP_EXCLUDES); never a data folder's. What
    tells a workload's source apart (a parity verdict's cache key, tuner.parity)."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _excluded(d) and (Path(root) / d / "__init__.py").is_file())
        out.extend(Path(root) / f for f in files if f.endswith(".py") and not _excluded(f))
    return out


def _folder_fits(folder: Path, limit: int, skip: Path | None = None) -> bool:
    """Whether the folder's files (less SHIP_EXCLUDES and the folder `skip`, both resolved) come to `limit` bytes
    at most; the walk stops past it, so a home folder costs no more than a small one."""
    total = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not _excluded(d) and Path(root, d) != skip]
        for name in files:
            if _excluded(name):
                continue
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > limit:
                return False
    return True


def shipment(ref: WorkloadRef, leave_out: Path | str | None = None) -> Shipment:
    """What Ray must carry to other nodes for this workload: a file's folder (so the file finds the modules and
    data beside it by `__file__` there too) when it comes to SHIP_FOLDER_MAX_BYTES at most, else the file alone,
    with a note; a package's top-level folder when it is not installed (site-packages) there too. Built-ins travel
    with tuner. `leave_out`: the folder studies are written to (--reports-dir), neither counted nor shipped where
    it lies in the file's folder: tuner's own output is no source of the workload, and `reports/` beside a
    user's model.py (the default, run from the model's folder) went with every study and grew with each."""
    if ref.builtin:
        return Shipment([])
    if ref.file is not None:
        folder = Path(ref.file).parent
        here = folder.resolve()
        skip = Path(leave_out).resolve() if leave_out is not None else None
        if skip is not None and (skip == here or not skip.is_relative_to(here)):
            skip = None  # not inside the folder: nothing of it ships anyway
        if _folder_fits(here, SHIP_FOLDER_MAX_BYTES, skip):
            return Shipment([str(folder)], excludes=(f"/{skip.relative_to(here).as_posix()}/",) if skip else ())
        mb = SHIP_FOLDER_MAX_BYTES // 2**20
        return Shipment([ref.file], f"{folder} is over {mb} MB, so only {Path(ref.file).name} is shipped to the "
                                    f"cluster's other nodes: what it reads beside itself must be there at the same "
                                    f"path (a shared file system) or installed")
    top = ref.module.split(".")[0]
    spec = importlib.util.find_spec(top)
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or origin in ("built-in", "frozen"):
        return Shipment([])
    origin_path = Path(origin).resolve()
    if str(origin_path).startswith(LIB_DIRS):
        return Shipment([])  # installed: the cluster's nodes need it installed as well
    return Shipment([str(origin_path.parent if origin_path.name == "__init__.py" else origin_path)])


def ship_paths(ref: WorkloadRef) -> list[str]:
    """The paths of `shipment`."""
    return shipment(ref).paths
