"""The identity of a study folder a search holds (device, inode), beside its lock (tuner.study.lock): while this
process searches a study, a deleted or replaced folder is gone for good, and no write creates it again
(StudyFolder.make_dir, StudyFolder.lost)."""

from __future__ import annotations

from pathlib import Path

# The study folders this process holds the search lock of (tuner.study.lock), with the identity (device, inode) the
# folder had when it was locked: their writes never create the folder again (StudyFolder.make_dir).
_HELD: dict[str, tuple[int, int]] = {}


def hold(path: Path) -> tuple[int, int]:
    """While this process searches the study at `path` (its lock held): a deleted folder is gone for good.
    Returns the folder's identity (device, inode)."""
    import os

    st = os.stat(path)
    _HELD[os.path.abspath(path)] = (st.st_dev, st.st_ino)
    return st.st_dev, st.st_ino


def let_go(path: Path, ident: tuple[int, int]) -> None:
    import os

    if _HELD.get(os.path.abspath(path)) == ident:
        del _HELD[os.path.abspath(path)]


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the folder at `path`; None when there is none."""
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def held(path: Path) -> tuple[int, int] | None:
    """The identity the folder at `path` had when this process locked it; None where this process holds no lock
    on it."""
    import os

    return _HELD.get(os.path.abspath(path))
