"""Whether importing the user's workload module once, before a fork, is safe (`import_changes`): the import is
tried in a throw-away fork, and is safe only where it ended well, changed nothing a run reads (`process_state`) and
left a process whose forks still run torch's parallel kernels. Used where one import can serve several processes:
a trial's fork server (tuner.search._preload) and `tuner train`'s pre-flight, whose check runs in a fork
(tuner.train.preflight)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tuner.workload.loader import _in_fork, said_on

PRELOAD_PROBE_S = 120.0  # the throw-away import (`import_changes`) may take this long at most


def process_state() -> tuple[Any, ...]:
    """What a module's import must leave as it found it to be imported once for every trial (`import_changes`): Python's
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


def import_changes(ref: Any) -> bool:
    """Import `ref`'s module in a throw-away fork of this process: True unless the import ended well, changed
    nothing `process_state` reads and, where it started native threads, left a process whose forks still run
    (`_forks_work`); True too where it took longer than PRELOAD_PROBE_S. An import that returned or raised (the
    process outlived it) needs no second fork to show that (tuner.workload.loader.probe_import). The fork says
    how it ended on a pipe, not by its exit status, which a module's own os._exit() sets."""
    from tuner.workload.loader import import_factory, outlived_import

    read, write = os.pipe()

    def imported() -> int:
        os.close(read)
        before, threads = process_state(), _native_threads()
        try:
            import_factory(ref)
        except Exception:  # noqa: BLE001 - the process outlived it; the importer reports it with the user's line
            os.write(write, b"raised")
            return 0
        if process_state() != before:
            os.write(write, b"changed")
        elif _native_threads() > threads and not _forks_work():
            os.write(write, b"forks hang")
        else:
            os.write(write, b"safe")
        return 0

    try:
        code = _in_fork(imported, PRELOAD_PROBE_S)
    finally:
        os.close(write)
    said = said_on(read, 64).decode()  # closes `read`
    said = said if code == 0 else ""  # killed at PRELOAD_PROBE_S, or ended by the import: nothing it said counts
    if said:
        outlived_import(ref)
    return said != "safe"
