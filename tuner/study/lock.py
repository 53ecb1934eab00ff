"""One `tuner search` per study at a time: an exclusive flock on `<study>/.search.lock`, held for the whole
search or resume and released by the kernel when the process ends, however it ends (a kill -9 leaves no stale
lock).

While a search holds the lock, the study folder is never created again by its writes: deleted, it stays
deleted (tuner.study.held.hold), and the search ends with one line (tuner.search._runner.study_gone).

A new study's folder is created and claimed here in one step (mkdir, then the lock, then the emptiness check
under the lock), so two searches started together cannot both pass an "already exists" check and write into
one folder and one database."""

from __future__ import annotations

import os
from pathlib import Path

from tuner.errors import StudyError
from tuner.study.folder import LOCK_FILE, RECORDS, STUDY_META
from tuner.study.held import hold, identity, let_go


class StudyLock:
    """The held lock of one study folder. `release()` gives it back; a new study's folder that never got past
    its lock (bad input found after the claim) is removed again, so nothing is left on disk."""

    def __init__(self, folder: Path, fd: int, created: list[Path]) -> None:
        self.folder, self.fd, self.created = folder, fd, created  # created: the folders made, deepest first
        self.ident: tuple[int, int] | None = None  # the folder's (device, inode) once held (tuner.study.held.hold)

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def release(self) -> None:
        if self.fd < 0:
            return
        if self.ident is not None:
            let_go(self.folder, self.ident)
        os.close(self.fd)  # closing the descriptor releases the flock
        self.fd = -1

    def lost(self) -> bool:
        """Whether the folder this lock was taken in is gone (deleted while the search ran, or replaced)."""
        return self.fd >= 0 and self.ident is not None and identity(self.folder) != self.ident

    def clear_lost(self) -> list[Path]:
        """Release a lost study's lock and remove what the search's processes made again where the study was
        (a trial's folder, Ray's experiment folder, an Optuna database opened anew: named as a study's records,
        RECORDS) and the empty folders, so no half study blocks the name ("add --resume" / "start it without
        --resume"). Nothing else is removed, nor anything while another search holds the path or a study.json
        is there. Returns what is left at the study's path."""
        import shutil

        folder = self.folder
        self.release()
        if not folder.is_dir() or (folder / STUDY_META).exists() or _held_elsewhere(folder / LOCK_FILE):
            return []  # nothing there, or a study of its own (another search made it): not ours to touch
        for name in RECORDS - {STUDY_META, LOCK_FILE}:  # what the search's processes wrote where the study was
            path = folder / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_file():
                path.unlink(missing_ok=True)
        (folder / LOCK_FILE).unlink(missing_ok=True)
        for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_dir() and not path.is_symlink():
                try:
                    path.rmdir()  # empty folders only
                except OSError:
                    pass
        try:
            folder.rmdir()
        except OSError:
            return sorted(folder.iterdir())
        return []

    def abandon(self) -> None:
        """Release, and remove what the claim created if the study never got further than that."""
        self.release()
        if set(p.name for p in self.folder.iterdir()) <= {LOCK_FILE}:
            self.path.unlink(missing_ok=True)
            for made in self.created:  # the study folder, then the --reports-dir folders made for it
                try:
                    made.rmdir()
                except OSError:
                    break


def _held_elsewhere(path: Path) -> bool:
    """Whether another process holds the search lock at `path` (a search started there since)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def lock_study(folder: Path, study: str, *, new: bool) -> StudyLock:
    """Take the study's lock (a StudyError if another process holds it). `new`: create the folder, and refuse it
    if it already holds anything but the lock file, checked under the lock."""
    import fcntl

    folder = Path(folder)
    created: list[Path] = []
    try:
        if new:
            missing = [p for p in (folder, *folder.parents) if not p.exists()]
            folder.parent.mkdir(parents=True, exist_ok=True)
            try:
                folder.mkdir()
                created = missing
            except FileExistsError:
                pass  # an empty folder may be reused: the check below, under the lock, decides
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise StudyError(f"{err.filename or folder}: cannot create the study's files: {err.strerror}; check the "
                         f"folder's permissions and free space, or pass another --reports-dir") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StudyError(f"study '{study}' at {folder} is in use by another `tuner search` (it holds "
                         f"{folder / LOCK_FILE}); wait for that one to end, then add --resume, or pick another "
                         f"name with --study NEW_NAME") from None
    lock = StudyLock(folder, fd, created)
    if new and any(p.name != LOCK_FILE for p in folder.iterdir()):
        lock.release()
        raise StudyError(f"study '{study}' already exists at {folder}; add --resume to continue it, or pick another "
                         f"name with --study NEW_NAME")
    lock.ident = hold(folder)  # from here on, the search's writes never create the folder again (deleted, it stays deleted)
    return lock
