"""A call in a forked child (in_child): the pre-flight's workload check runs apart from the process that trains
after it, so the run's allocator starts as the user's own run's would (tuner.train.preflight._apart)."""

from __future__ import annotations

from typing import Any

from tuner.errors import WorkloadError


def in_child(fn: Any, *args: Any) -> Any:
    """`fn(*args)` in a forked child; its result, or its exception raised here (the child's traceback kept as a
    note, which --debug shows). The result and the exception cross a pipe pickled; a child that dies without
    either is a WorkloadError naming how it ended."""
    import os
    import pickle
    import signal
    import sys
    import threading
    import traceback

    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    forked: list[int] = []

    def fork() -> None:
        try:
            pid = os.fork()
        except OSError:  # no process to spare: the check runs here, as where it cannot fork
            return
        if pid:
            forked.append(pid)
            return
        os.close(read)  # the child: never returns
        try:
            try:
                out: tuple[Any, ...] = ("ok", fn(*args))
            except BaseException as err:  # noqa: BLE001 - every ending goes back to the parent
                out = ("err", err, traceback.format_exc())
            try:
                data = pickle.dumps(out)
            except Exception:  # noqa: BLE001 - an unpicklable result or exception: its text
                data = pickle.dumps(("err", WorkloadError(str(out[1])), out[-1]))
            with os.fdopen(write, "wb") as f:
                f.write(data)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    # Forked from a new thread: GNU OpenMP keeps a thread's pool in that thread, and a child forked from a thread
    # that ran a parallel region hangs in its first one (the pool's threads are gone); a new thread has none.
    thread = threading.Thread(target=fork, name="tuner-preflight-fork")
    thread.start()
    thread.join()
    os.close(write)
    if not forked:
        os.close(read)
        return fn(*args)
    pid = forked[0]
    try:
        with os.fdopen(read, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # Ctrl-C reached both; the child must not outlive the parent
        os.waitpid(pid, 0)
        raise
    if not data:
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        raise WorkloadError(f"the pre-flight check's process ended ({how}) without a result; run with --debug, "
                            f"or check the workload's memory use")
    out = pickle.loads(data)
    if out[0] == "ok":
        return out[1]
    err = out[1]
    if isinstance(err, BaseException):
        err.add_note(f"in the pre-flight check's process:\n{out[2]}")
    raise err
