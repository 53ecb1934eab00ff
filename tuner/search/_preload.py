"""What a trial's fork server (tuner.search._fresh_server) imports of the user's workload before it forks: the
module once for every trial, where that import changes nothing a trial reads (`preload`), tried first in a
throw-away fork (tuner.workload.import_changes). A module's import cost each trial 30 ms (a small file) to seconds
(one that imports scikit-learn: 1.3-1.7 s on 2 cores) between trials (issue 55 row 1)."""

from __future__ import annotations

import os
import sys

from tuner.workload import import_changes


# The user's workload references this server has tried to import (`preload`): True where it did.
PRELOADED: dict[str, bool] = {}


def preload(ref_text: str) -> bool:
    """Import the user's workload module here, once, so every child forked after starts with it imported: a
    module's import cost each trial 30 ms (a small file) to seconds (a library such as transformers) between
    trials (issue 55 row 1). Only a module whose import, tried first in a throw-away fork
    (tuner.workload.import_changes), ends well, leaves what a trial reads as it found it (no Python thread, no CUDA
    context, the same torch random state, thread counts and numerics flags) and leaves a process whose forks still
    run torch's and NumPy's parallel kernels. Any other (imported once for all, a module that seeds torch
    would be re-seeded by each trial after it, unlike in `tuner train`) is imported by each child, as before, and
    so is one whose import fails (the child reports it as the trial's error). A built-in is preloaded
    already (_PRELOAD). Returns whether the module is imported here."""
    if ref_text not in PRELOADED:
        PRELOADED[ref_text] = False
        try:
            from tuner.builtin import resolve_workload
            from tuner.workload import import_factory

            ref = resolve_workload(ref_text)
            if not ref.builtin and not import_changes(ref):
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
