"""One exception root for everything tuner refuses or cannot do.

The CLI maps these to exit codes in one place (`tuner.cli.main`): user errors (bad input, a study that
already exists, a GPU asked for where there is none) exit 2 with one line on stderr; nothing else should.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Collection


def error_line(err: BaseException) -> str:
    """`Type: first line of the message`, at most 500 characters: what a trial record keeps of a failure."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}".strip()[:500]


def unknown_key_hint(model: typing.Any, loc: tuple[typing.Any, ...], hidden: Collection[str] = ()) -> str:
    """What to say after "unknown key" for the key at a pydantic error's `loc` inside `model`: "; did you mean X?"
    for a near miss (`workload_option`, or `options` for `workload_options`), else the keys that level takes; ''
    where the level is not a model. A user who misspells a key in a file learns the right one from the error."""
    level = _model_at(model, loc[:-1]) if loc else None
    if level is None:
        return ""
    known = [name for name in level.model_fields if not (len(loc) == 1 and name in hidden)]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    close = close or [name for name in known if str(loc[-1]) in name.split("_")]
    return f"; did you mean {close[0]}?" if close else f" (known keys: {', '.join(known)})"


def _model_at(model: typing.Any, path: tuple[typing.Any, ...]) -> typing.Any:
    """The pydantic model class that `path` (a validation error's location) points into, through fields, dict
    values and list items; None where the way leaves the models or forks (a union of several types)."""
    here = model
    for step in path:
        here = _unwrap(here)
        if isinstance(here, type) and hasattr(here, "model_fields"):
            field = here.model_fields.get(str(step))
            here = field.annotation if field is not None else None
        elif typing.get_origin(here) in (list, dict):
            here = typing.get_args(here)[-1]
        else:
            return None
    here = _unwrap(here)
    return here if isinstance(here, type) and hasattr(here, "model_fields") else None


def _unwrap(here: typing.Any) -> typing.Any:
    """`here` without Optional and Annotated; None for a union of several types."""
    while (origin := typing.get_origin(here)) in (typing.Annotated, typing.Union, types.UnionType):
        args = typing.get_args(here)[:1] if origin is typing.Annotated else [
            a for a in typing.get_args(here) if a is not type(None)]
        if len(args) != 1:
            return None
        here = args[0]
    return here


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
