"""A time limit around the user's code that runs before the training loop (the workload's factory, its datasets()),
which the loop's wall cap does not cover: a factory that blocks would hang `tuner train` and hold a study on one
trial forever.

A watchdog thread says on stderr when the call takes long, and at the limit raises SetupTimeout in the thread that
runs it: by a signal in the main thread (it interrupts sleeps, waits and reads), by an asynchronous exception in
another (a Ray trial's thread: delivered at its next Python line). A call that is stuck in native code past a
grace period cannot be stopped from inside the process: the process ends with the message on stderr (exit 2).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator

NOTE_AFTER_S = 10.0  # say on stderr what is running once it has taken this long
GRACE_S = 10.0  # after the limit, how long the thread may take to notice before the process ends


class SetupTimeout(Exception):
    """The user's setup code did not return within setup_timeout_s."""


class TrialTimeout(Exception):
    """A trial's training and what follows it ran past its wall cap and the time after it (tuner.train.trial)."""


SETUP_SETTING = "(setup_timeout_s; raise it if it needs longer)"  # every setup timeout's message ends so


def is_setup_timeout(error: str | None) -> bool:
    """Whether a recorded trial error is a setup timeout (the driver stops a study that meets one: issue 37)."""
    return bool(error) and " did not return within " in error and SETUP_SETTING in error  # type: ignore[operator]


def _raise_in(thread_id: int, error: type[BaseException] = SetupTimeout) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(error))


def _clear_in(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


@contextlib.contextmanager
def setup_deadline(seconds: float | None, what: str, *, note_after: float = NOTE_AFTER_S,
                   grace: float = GRACE_S) -> Iterator[None]:
    """Run the block within `seconds` (None: no limit); past it, SetupTimeout naming `what` (e.g. "the workload's
    datasets()") and the setting that sets the limit."""
    message = f"{what} did not return within {seconds:g} s {SETUP_SETTING}" if seconds is not None else ""
    with time_limit(seconds, message, SetupTimeout, what, note_after=note_after, grace=grace):
        yield


@contextlib.contextmanager
def time_limit(seconds: float | None, message: str, error: type[Exception], what: str, *,
               note_after: float = NOTE_AFTER_S, grace: float | None = GRACE_S) -> Iterator[None]:
    """Run the block within `seconds` (None: no limit); past it, `error(message)` in the thread that runs it, or
    the process's end with the message on stderr (exit 2) when that thread does not notice within `grace` (None:
    the process is left to whoever started it, as a search's driver ends a trial past its limits)."""
    if seconds is None:
        yield
        return
    target = threading.get_ident()
    in_main = threading.current_thread() is threading.main_thread()
    lock, done, fired = threading.Lock(), threading.Event(), threading.Event()
    previous = None

    def on_alarm(signum: int, frame: object) -> None:
        if fired.is_set() and not done.is_set():
            raise error(message)

    if in_main:
        previous = signal.signal(signal.SIGALRM, on_alarm)

    def watch() -> None:
        if done.wait(min(note_after, seconds)):
            return
        if note_after < seconds:
            print(f"tuner: still waiting for {what} after {note_after:g} s (limit {seconds:g} s) ...",
                  file=sys.stderr, flush=True)
            if done.wait(seconds - note_after):
                return
        with lock:
            if done.is_set():
                return
            fired.set()
            if in_main:
                signal.pthread_kill(target, signal.SIGALRM)
            else:
                _raise_in(target, error)
        if grace is not None and not done.wait(grace):  # stuck in native code: nothing inside can stop it
            print(f"tuner: error: {message}", file=sys.stderr, flush=True)
            os._exit(2)

    watchdog = threading.Thread(target=watch, name="tuner-time-limit", daemon=True)
    watchdog.start()
    try:
        yield
    except error as err:  # the same exception, its traceback kept: it ends at the user's line that waited
        err.args = (message,)
        raise
    finally:
        with lock:
            done.set()
            if fired.is_set() and not in_main:
                _clear_in(target)  # an exception not delivered yet must not surface after the block
        if in_main:
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
