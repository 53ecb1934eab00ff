"""One `tuner search` per study at a time: an exclusive flock on `<study>/.search.lock`, held for the whole
search or resume and released by the kernel when the process ends, however it ends (a kill -9 leaves no stale
lock).

A new study's folder is created and claimed here in one step (mkdir, then the lock, then the emptiness check
under the lock), so two searches started together cannot both pass an "already exists" check and write into
one folder and one database."""

from __future__ import annotations

import os
from pathlib import Path

from tuner.errors import StudyError
from tuner.study.folder import LOCK_FILE


class StudyLock:
    """The held lock of one study folder. `release()` gives it back; a new study's folder that never got past
    its lock (bad input found after the claim) is removed again, so nothing is left on disk."""

    def __init__(self, folder: Path, fd: int, created: list[Path]) -> None:
        self.folder, self.fd, self.created = folder, fd, created  # created: the folders made, deepest first

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def release(self) -> None:
        if self.fd < 0:
            return
        os.close(self.fd)  # closing the descriptor releases the flock
        self.fd = -1

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
    return lock
