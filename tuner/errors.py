"""One exception root for everything tuner refuses or cannot do.

The CLI maps these to exit codes in one place (`tuner.cli.main`): user errors (bad input, a study that
already exists, a GPU asked for where there is none) exit 2 with one line on stderr; nothing else should.
"""

from __future__ import annotations


def error_line(err: BaseException) -> str:
    """`Type: first line of the message`, at most 500 characters: what a trial record keeps of a failure."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}".strip()[:500]


class TunerError(Exception):
    """Root of tuner's errors. `exit_code` is what the CLI exits with."""

    exit_code = 1


class RunFailed(TunerError):
    """A training run that ended in a failed state (oom, diverged), or a rerun that did not verify: exit 3."""

    exit_code = 3


class UserError(TunerError):
    """Bad input that the user can fix: the message says what is wrong and how to fix it."""

    exit_code = 2


class ConfigError(UserError):
    """A config or space file that is malformed, or a key with a wrong type or value."""


class BudgetError(UserError):
    """A seconds budget too short for the workload's measured step: the message names the budget it needs."""


class DatasetError(UserError):
    """A dataset spec that names something missing or malformed."""


class DeviceError(UserError):
    """A device or precision asked for that this machine does not have."""


class StudyError(UserError):
    """A study that already exists (without --resume), is unknown, or has no usable trial."""


class WeightsError(UserError):
    """Feature-extractor weights (e.g. Inception for FID) that are not on disk."""


class WorkloadError(UserError):
    """A workload reference that does not resolve, or a workload that breaks the tuner.Workload contract."""


class StorageError(UserError):
    """A folder tuner must write but cannot: a file where the folder should be, a read-only folder or file system,
    a full disk or quota. Not the user's input as such, but theirs to fix, and never worth a traceback."""


class Interrupted(TunerError):
    """A search stopped by SIGINT (Ctrl-C), SIGTERM or SIGHUP before there was a study to resume: exit 128 + the
    signal."""

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code
