"""A study ends at the first set-up timeout of the user's code (issue 57): the probes, the parity check and the
target's reference run call the workload's factory and datasets() under setup_timeout_s as the trials do, and a
factory that blocked there (a lock, a dead network mount met only outside the pre-flight) would make each probe,
check and trial after it wait as long again; a study sat 15 minutes at its probes before."""

from __future__ import annotations

from typing import Any

from tuner.errors import WorkloadError
from tuner.train import is_setup_timeout


def setup_timeout_text(error: Any) -> str | None:
    """The set-up timeout's own line in `error` (an exception, a Ray task's error around one, or a recorded error
    line), or None when it is not one."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        error = getattr(error, "cause", None) or error  # a Ray task's error: the exception the task raised
        text = str(error)
    else:
        text = str(error)
    for line in text.splitlines():
        if is_setup_timeout(line):
            return line.split(": ", 1)[1] if line.startswith(("SetupTimeout: ", "WorkloadError: ")) else line
    return None


def end_on_setup_timeout(error: Any, where: str) -> None:
    """Raise the study's one-line end when `error` is a set-up timeout met in `where` (e.g. "the loader probes")."""
    text = setup_timeout_text(error)
    if text is not None:
        raise WorkloadError(f"{text}, in {where}: the study ends here (each probe, check and trial after it would "
                            f"wait as long); fix the workload's factory or datasets(), or raise setup_timeout_s, "
                            f"and --resume")
