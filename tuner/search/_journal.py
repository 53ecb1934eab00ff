"""SQLite's journal for a search's study database: why a search writes ahead, where it may, and its return to the
default journal at the end (issue 55: the driver's commits are on the critical path between trials)."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any


# File systems where SQLite's write-ahead log is safe: it needs shared memory between the processes that open the
# database, which a network file system (NFS, SMB, Lustre...) does not give; on any other the default journal stays.
LOCAL_FILE_SYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "bcachefs", "tmpfs",
                                "overlay", "apfs", "hfs", "ntfs"})
def sqlite_path(url: str) -> Path | None:
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


_ENGINES: dict[str, list[Any]] = {}  # database path -> weak references to the engines opened on it (settle_storage)


def opened(engine: Any, url: str, *, searching: bool) -> None:
    """Keep a reference to an engine open_storage made on a SQLite file, for settle_storage; the search's own
    writer (`searching`) on a local disk writes ahead."""
    path = sqlite_path(url)
    if path is None:
        return
    path = path.expanduser().absolute()
    refs = [ref for ref in _ENGINES.get(str(path), []) if ref() is not None]  # a report opening it again and again
    _ENGINES[str(path)] = [*refs, weakref.ref(engine)]  # kept no dead references
    if searching and on_local_disk(path.parent):
        _write_ahead(engine)


def on_local_disk(folder: Path) -> bool:
    """Whether `folder` lies on a local file system (the longest mount point above it)."""
    import psutil

    try:
        mounts = psutil.disk_partitions(all=True)
    except Exception:  # noqa: BLE001 - no mount table to read: not known to be local
        return False
    where = str(folder.resolve())
    inside = [m for m in mounts if where == m.mountpoint or where.startswith(m.mountpoint.rstrip("/\\") + os.sep)]
    if not inside:
        return False
    return max(inside, key=lambda m: len(m.mountpoint)).fstype.lower() in LOCAL_FILE_SYSTEMS


def _write_ahead(engine: Any) -> None:
    """SQLite's write-ahead log, synced at checkpoints rather than at every commit: a search commits about 16 times
    a trial (ask, each parameter, the record, tell), and the default journal's two syncs a commit cost it ~13 ms a
    trial on the driver's critical path (issue 55, row 1). A crash or power cut may lose the last commits, never
    the database's consistency; --resume re-runs a trial whose tell was lost."""
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    engine.dispose()  # the connections RDBStorage opened to create the schema: the next ones take the pragmas


def settle_storage(url: str) -> None:
    """At the search's end: close this process's connections to a SQLite study database and return it to the
    default rollback journal, so that study.db alone holds the study again (a copied file, a read-only folder and
    a network file system open it as before). Best effort: a reader still holding it (`tuner report` running) keeps
    the write-ahead log, which is still a sound database."""
    import sqlite3

    path = sqlite_path(url)
    if path is None:
        return
    path = path.expanduser().absolute()
    for ref in _ENGINES.pop(str(path), []):
        engine = ref()
        if engine is not None:
            engine.dispose()
    if not path.exists():
        return
    try:
        connection = sqlite3.connect(str(path), timeout=1.0)
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                connection.execute("PRAGMA journal_mode=DELETE")
        finally:
            connection.close()
    except sqlite3.Error:
        pass
