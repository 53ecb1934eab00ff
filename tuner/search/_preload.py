"""What a trial's fork server (tuner.search._fresh_server) imports of the user's workload before it forks: the
module once for every trial, where that import changes nothing a trial reads (`preload`), tried first in a
throw-away fork (`_import_changes`). A module's import cost each trial 30 ms (a small file) to seconds (one that
imports scikit-learn: 1.3-1.7 s on 2 cores) between trials (issue 55 row 1)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


# The user's workload references this server has tried to import (`preload`): True where it did.
PRELOADED: dict[str, bool] = {}
PRELOAD_PROBE_S = 120.0  # the throw-away import (`_import_changes`) may take this long at most


def preload(ref_text: str) -> bool:
    """Import the user's workload module here, once, so every child forked after starts with it imported: a
    module's import cost each trial 30 ms (a small file) to seconds (a library such as transformers) between
    trials (issue 55 row 1). Only a module whose import, tried first in a throw-away fork (`_import_changes`),
    ends well, leaves what a trial reads as it found it (`process_state`: no Python thread, no CUDA context, the
    same torch random state, thread counts and numerics flags) and leaves a process whose forks still run torch's
    and NumPy's parallel kernels (`_forks_work`). Any other (imported once for all, a module that seeds torch
    would be re-seeded by each trial after it, unlike in `tuner train`) is imported by each child, as before, and
    so is one whose import fails (the child reports it as the trial's error). A built-in is preloaded
    already (_PRELOAD). Returns whether the module is imported here."""
    if ref_text not in PRELOADED:
        PRELOADED[ref_text] = False
        try:
            from tuner.builtin import resolve_workload
            from tuner.workload import import_factory

            ref = resolve_workload(ref_text)
            if not ref.builtin and not _import_changes(ref):
                stdout = os.dup(1)
                os.dup2(2, 1)  # its prints go to stderr: stdout is the protocol
                try:
                    import_factory(ref)
                finally:
                    sys.stdout.flush()
                    os.dup2(stdout, 1)
                    os.close(stdout)
                PRELOADED[ref_text] = True
        except Exception:  # noqa: BLE001 - each child imports it, and reports what fails as its trial's error
            pass
    return PRELOADED[ref_text]


def process_state() -> tuple[Any, ...]:
    """What a module's import must leave as it found it to be imported once for every trial (`preload`): Python's
    threads (a thread does not survive a fork: every trial would lack it), CUDA, torch's random state (a trial
    seeds it before its workload's import, so an import that draws from it or seeds it changes the trial's data
    and weights), torch's thread counts and numerics flags, and grad mode. Not Python's and NumPy's random states,
    which tuner does not seed (the import's draws leave them alike either way), nor the environment (a variable
    the import sets is set before the training either way)."""
    import threading

    import torch

    return (tuple(sorted(t.ident or 0 for t in threading.enumerate())), torch.cuda.is_initialized(),
            torch.random.get_rng_state().numpy().tobytes(), torch.get_num_threads(), torch.get_default_dtype(),
            torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,
            torch.are_deterministic_algorithms_enabled(), torch.is_grad_enabled())


def _native_threads() -> int:
    task = Path("/proc/self/task")
    return len(list(task.iterdir())) if task.is_dir() else 1


FORK_CHECK_S = 10.0  # a child's parallel kernels that have not returned by then hang (`_forks_work`)


def _forks_work() -> bool:
    """Whether a process forked from this one runs torch's parallel kernels, and NumPy's BLAS where NumPy is
    imported, within FORK_CHECK_S. An import that started native threads may leave a pool a fork breaks: GNU
    OpenMP's, after a parallel region, hangs the child's first one; OpenBLAS and jemalloc make theirs again in
    the child (scikit-learn's and SciPy's imports start them)."""
    def kernels() -> int:
        import torch

        torch.ones(1 << 20).add_(1).sum()
        x = torch.ones(128, 128)
        x @ x
        np = sys.modules.get("numpy")
        if np is not None:
            a = np.ones((128, 128))
            a @ a
        return 0

    return _in_fork(kernels, FORK_CHECK_S) == 0


def _in_fork(fn: Callable[[], int], seconds: float) -> int | None:
    """`fn()` in a throw-away fork of this process, its output dropped: the exit code it returns (1 where it
    raised), or None (and the fork killed) if it has not ended within `seconds`."""
    import time

    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            code = fn()
        finally:
            os._exit(code)
    deadline = time.monotonic() + seconds
    while True:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            kill(pid)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def _import_changes(ref: Any) -> bool:
    """Import `ref`'s module in a throw-away fork of this process: True unless the import ended well, changed
    nothing `process_state` reads and, where it started native threads, left a process whose forks still run
    (`_forks_work`); True too where it took longer than PRELOAD_PROBE_S."""
    from tuner.workload import import_factory

    def imported() -> int:
        before, threads = process_state(), _native_threads()
        import_factory(ref)
        if process_state() != before:
            return 3
        return 0 if _native_threads() <= threads or _forks_work() else 5

    return _in_fork(imported, PRELOAD_PROBE_S) != 0


def kill(pid: int) -> None:
    """SIGKILL `pid`, if it still runs."""
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
