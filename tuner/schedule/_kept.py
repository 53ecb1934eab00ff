"""What a scheduler keeps beside each trial in the study folder (trials/NNNN/rungs.json), so --resume rebuilds it.

Ray's own experiment state lags behind a kill -9, so a scheduler is rebuilt from the folder instead: the entries of
every trial that has a record. A trial running at the kill has none (Optuna marks it FAIL and a new trial runs in
its place), so its entries are dropped with it and every rung holds finished trials only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.errors import StudyError
from tuner.study import StudyFolder

RUNGS_FILE = "rungs.json"


def write_kept(folder: StudyFolder, number: int, entries: list[dict[str, Any]]) -> None:
    """One trial's entries, beside it (atomic: a kill leaves the previous file; never a deleted study made again)."""
    folder.write_file(folder.trial_dir(number) / RUNGS_FILE, json.dumps(entries) + "\n")


def kept_entries(folder: StudyFolder, *, prune: bool) -> list[tuple[Path, list[dict[str, Any]]]]:
    """Every recorded trial's entries, read (a StudyError line names a file that does not read). `prune`: remove
    those of a trial with no record (running at a kill); without it (a check before anything runs) nothing on
    disk changes."""
    out = []
    for number, trial_dir in folder.trial_dirs():  # the study's own trial folders (not a user's copy of one)
        path = trial_dir / RUNGS_FILE
        if not path.is_file():
            continue
        if not folder.has_record(number):
            if prune:
                path.unlink(missing_ok=True)
            continue
        out.append((path, read_kept(path)))
    return out


def read_kept(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text() or "[]")
        if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
            raise ValueError("not a list of rung entries")
        return data
    except (OSError, ValueError) as err:
        raise kept_error(path, err) from None


def kept_error(path: Path, err: BaseException) -> StudyError:
    """A file that does not read as a trial's entries (cut short, edited): one StudyError line naming it."""
    why = f"missing key {err}" if isinstance(err, KeyError) else (str(err).splitlines() or [type(err).__name__])[0]
    return StudyError(f"{path}: the trial's rung entries do not read ({why}); restore the file, or delete it (the "
                      f"rung scheduler then leaves that trial out of its rungs)")
