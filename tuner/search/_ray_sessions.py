"""The sessions of the local Rays tuner starts: each is marked with its driver (SESSION_MARK), so that the next
study ends what a killed study's Ray left running, and nothing of a study still running or of a Ray tuner did not
start."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

# In the session folder of a local Ray that tuner started: the driver's pid and start (ticks since boot, and the
# wall-clock time for marks that predate them). Ray's head processes
# (gcs_server, raylet) die with a killed driver (Ray starts them with PR_SET_PDEATHSIG), but the raylet's agents and
# workers outlived a `kill -9` of `tuner search` by about 275 s (issue 57). The mark lets the next study end them,
# and only them: a session without it (the user's own `ray start`, or another program's ray.init) is never touched.
SESSION_MARK = "tuner-driver.json"


def session_dir() -> Path | None:
    try:
        from ray._private import worker

        node = worker._global_node
        return Path(node.get_session_dir_path()) if node is not None else None
    except Exception:  # noqa: BLE001 - Ray's internals moved: no mark, no clean-up, as before
        return None


def _started_at(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/PID/stat's starttime); None off Linux or with no such
    process. psutil's create_time adds the boot time, which moves when the clock is stepped (a VM's clock synced
    mid-run): a live driver's mark then read as another process's, and the next study SIGKILLed that driver
    (CI, stop 99: six pytest workers, each the driver of the tests' shared Ray). Ticks do not move."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def mark_session() -> None:
    """Mark the local Ray session just started as this process's (SESSION_MARK)."""
    session = session_dir()
    if session is not None and session.is_dir():
        me = os.getpid()
        try:
            (session / SESSION_MARK).write_text(json.dumps({"pid": me, "started": _started_at(me),
                                                            "ticks": _start_ticks(me)}))
        except OSError:
            pass  # a temp folder tuner cannot write: no mark, as before


def _driver_alive(driver: dict[str, Any], session: str) -> bool:
    """Whether the mark's driver still runs: the same start ticks where both are known; else a process of that pid
    started within 1 s of the mark's time, or one holding the session's files (the driver itself, its clock
    stepped since: a reused pid never opened them)."""
    import psutil

    pid, ticks = int(driver["pid"]), driver.get("ticks")
    if ticks is not None and (now_ticks := _start_ticks(pid)) is not None:
        return now_ticks == int(ticks)
    now, started = _started_at(pid), driver.get("started")
    if now is None:
        return False
    return started is None or abs(now - float(started)) < 1.0 or _holds(psutil.Process(pid), session)


def ray_temp_root() -> Path | None:
    """Where Ray keeps its session folders (RAY_TMPDIR, TMPDIR or /tmp, then ray/), or None where Ray moved it."""
    try:
        from ray._common.utils import get_default_ray_temp_dir
    except ImportError:
        return None
    return Path(get_default_ray_temp_dir())


def end_stale_sessions(root: Path | None = None) -> list[int]:
    """End every process still holding a file in a session folder that tuner marked (SESSION_MARK) whose driver is
    gone (no process of that pid, or one started at another time: the pid reused); returns their pids. Called
    before a study starts its local Ray, so a killed study's agents and workers never linger into the next."""
    import psutil

    root = root if root is not None else ray_temp_root()
    if root is None or not root.is_dir():
        return []
    ended: list[int] = []
    spared = {os.getpid(), *(p.pid for p in psutil.Process().parents())}  # never this study nor what started it
    for mark in sorted(root.glob(f"session_*/{SESSION_MARK}")):
        if mark.parent.is_symlink():
            continue  # session_latest: its session is seen under its own name, which open files are named by
        session = str(mark.parent) + os.sep
        try:
            if _driver_alive(json.loads(mark.read_text()), session):
                continue  # a study running now
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            continue
        left = [p for p in psutil.process_iter() if p.pid not in spared and _holds(p, session)]
        for proc in left:
            try:
                proc.send_signal(signal.SIGKILL)
                ended.append(proc.pid)
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        try:
            mark.unlink(missing_ok=True)
        except OSError:
            pass  # another user's session in a shared temp folder: theirs to end
    return ended


def _holds(proc: object, folder: str) -> bool:
    """Whether `proc` (a psutil.Process) has a file open under `folder` (a Ray process keeps its logs open)."""
    import psutil

    try:
        return any(f.path.startswith(folder) for f in proc.open_files())  # type: ignore[attr-defined]
    except psutil.Error:
        return False
