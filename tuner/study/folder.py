"""The on-disk record of a study: what `tuner search` writes as trials end and what reports read.

Layout under `<reports-dir>/<study>/`:
  study.json                 StudyMeta: space, objectives, workload, budget, sampler, hardware, versions
  study.db                   the Optuna study (SQLite), unless --storage named another database
  storage.url                a --storage URL with its password (0600; the one file that holds it), when it has one
  trials/<NNNN>/result.json  one TrialRecord (metrics flat beside the structural keys)
  trials/<NNNN>/samples.png  a GAN's sample grid (whatever the workload's evaluate wrote)
  trials.csv                 one row per trial, its row added (or replaced) as each trial ends, so it is current
                             while a study runs
  ray/                       Ray Tune's experiment folder
  horizon.json               the horizon check `tuner export --horizon` ran (tuner.study.horizon), when one did
Every write is atomic (tuner.files), so a kill never leaves half a file and a reader never sees one; in a study
a search holds (tuner.study.lock), no write creates the study folder again once it was deleted.

It is the one place that knows the folder's files: their names, what reads them back, and what may write among
them (an export never does: study_record). study.json's schema is study/meta.py's, the identity of a folder a
search holds study/held.py's, and the writes of a trial's record go through study/writer.py.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuner.errors import StudyError
from tuner.files import atomic_write, dump_json, load_json_object
from tuner.study.held import held, identity
from tuner.study.horizon import HORIZON_FILE
from tuner.study.meta import MetaShape, StudyMeta
from tuner.study.metrics import table_columns
from tuner.study.parity import PARITY_FILE
from tuner.study.record import Rerun, TrialRecord

STUDY_META = "study.json"
TRIALS_DIR = "trials"
TRIALS_CSV = "trials.csv"
RESULT_FILE = "result.json"
CONFIRM_DIR = "confirm"
RAY_DIR = "ray"
DB_FILE = "study.db"
LOCK_FILE = ".search.lock"  # flock'd by the one `tuner search` working on the study (tuner.study.lock; not
# `.lock`, which tuner.files.locked takes around a trial's writes to the folder)


# What a study folder keeps of its study (and `tuner search --resume` reads back): nothing else may write here.
# Beside them, a study folder holds what is made from them (best.yaml, report.html), which may be written again.
RECORDS = frozenset({STUDY_META, DB_FILE, f"{DB_FILE}-journal", f"{DB_FILE}-wal", f"{DB_FILE}-shm", "storage.url",
                     TRIALS_DIR, TRIALS_CSV, RAY_DIR, "probes.json", PARITY_FILE, "ceilings.json", "flops.json",
                     LOCK_FILE, ".lock", HORIZON_FILE})


def study_record(path: Path) -> tuple[Path, str] | None:
    """(study folder, record) when `path` is one of a study folder's records or lies inside one (trials/...,
    ray/...), whichever study; None otherwise. Read as given and with its folders' links resolved, so neither
    `../` nor a link to a study folder hides one."""
    import os

    path = Path(os.path.abspath(path))
    for candidate in dict.fromkeys([path, Path(os.path.realpath(path.parent)) / path.name]):
        for folder in candidate.parents:
            if (folder / STUDY_META).is_file():
                first = candidate.relative_to(folder).parts[0]
                if first in RECORDS:
                    return folder, str(candidate.relative_to(folder))
    return None


class StudyGone(StudyError):
    """The study folder a search holds was deleted (or replaced) while it ran: nothing is written there again."""


def trial_number(name: str) -> int | None:
    """The trial a folder under trials/ holds in the study's own naming (`0007`, `12345`: StudyFolder.trial_dir);
    None for any other name (a user's copy `0000.bak`, `00007`), which is never read as a trial."""
    if name.isascii() and name.isdigit() and name == f"{int(name):04d}":
        return int(name)
    return None


def param_columns(meta: StudyMeta, records: list[TrialRecord]) -> list[str]:
    """The searched params in space order, then any a record has that the meta does not name (user spaces)."""
    names = list(meta.params)
    for rec in records:
        names += [p for p in rec.params if p not in names]
    return names


class StudyFolder:
    """One study's folder: its paths and the atomic reads and writes of its files."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def meta_path(self) -> Path:
        return self.path / STUDY_META

    @property
    def csv_path(self) -> Path:
        return self.path / TRIALS_CSV

    @property
    def db_path(self) -> Path:
        return self.path / DB_FILE

    @property
    def probes_path(self) -> Path:
        """The loader probes of the study and the loader chosen per batch size (tuner.search._probe.ProbePlan)."""
        return self.path / "probes.json"

    @property
    def ceilings_path(self) -> Path:
        """The study's cache of measured ceilings (tuner.measure.ceiling.CeilingCache)."""
        return self.path / "ceilings.json"

    @property
    def ray_dir(self) -> Path:
        return self.path / RAY_DIR

    def exists(self) -> bool:
        return self.meta_path.is_file()

    # --- writing: never a study folder that was deleted under a search -----------------------------------------
    def _held(self) -> tuple[int, int] | None:
        return held(self.path)  # tuner.study.held

    def lost(self) -> bool:
        """Whether this process holds the study's search lock and the folder it locked is gone (deleted, or
        another folder in its place)."""
        locked = self._held()
        return locked is not None and identity(self.path) != locked

    def gone(self) -> StudyGone:
        return StudyGone(f"the study folder {self.path} was deleted while the search ran; nothing was written "
                         f"there again, and the name '{self.name}' is free: start the study anew with `tuner search`")

    def make_dir(self, path: Path) -> Path:
        """`path` (the study folder or a folder in it) as a folder. In a study this process searches, the study
        folder itself is never created: deleted, it stays deleted (StudyGone)."""
        path = Path(path)
        if self._held() is None:
            path.mkdir(parents=True, exist_ok=True)
            return path
        if self.lost():
            raise self.gone()
        here = self.path
        for part in path.relative_to(self.path).parts:
            here = here / part
            try:
                here.mkdir(exist_ok=True)
            except FileNotFoundError:
                raise self.gone() from None
        return path

    def write_file(self, path: Path, data: str | bytes) -> Path:
        """Write a file of the study (atomically) without ever creating the study folder again (make_dir)."""
        path = Path(path)
        self.make_dir(path.parent)
        try:
            return atomic_write(path, data, parents=self._held() is None)
        except FileNotFoundError:
            if self.lost():
                raise self.gone() from None
            raise

    def trial_dir(self, trial: int) -> Path:
        return self.path / TRIALS_DIR / f"{trial:04d}"

    def trial_dirs(self) -> list[tuple[int, Path]]:
        """The folders the study wrote for its trials (trials/NNNN, see trial_dir), by number."""
        root = self.path / TRIALS_DIR
        if not root.is_dir():
            return []
        return sorted((n, p) for p in root.iterdir() if p.is_dir() and (n := trial_number(p.name)) is not None)

    def strays(self) -> list[Path]:
        """What trials/ holds besides the study's own trial folders (a backup copy `0000.bak`, `old/`, a file):
        never read as trials, and named by `tuner report` and `tuner export` so the user knows it was left out.
        Hidden names (`.DS_Store`) are not named."""
        root = self.path / TRIALS_DIR
        if not root.is_dir():
            return []
        return sorted(p for p in root.iterdir() if not p.name.startswith(".")
                      and not (p.is_dir() and trial_number(p.name) is not None))

    # --- meta -------------------------------------------------------------------------------------------------
    def read_meta(self) -> StudyMeta:
        if not self.exists():
            raise StudyError(f"no study at {self.path} (missing {STUDY_META}); run `tuner search` first or check "
                             f"--reports-dir")
        data = load_json_object(self.meta_path, "study file", StudyError)
        try:
            MetaShape.model_validate(data)
            return StudyMeta.model_validate(data)
        except ValidationError as err:
            first = err.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise StudyError(f"{self.meta_path}: {key}: {first['msg']}; restore the file from the study's "
                             f"backup or start a new study") from None

    def write_meta(self, meta: StudyMeta) -> None:
        self.write_file(self.meta_path, dump_json(meta.model_dump(mode="json")) + "\n")

    # --- trials -----------------------------------------------------------------------------------------------
    # The folder reads and writes what a trial recorded and nothing it takes a judgement to compute: trials.csv's
    # derived columns (suspect, goodput, cached ceilings) come from tuner.analysis.trials, which calls these.
    def write_result(self, record: TrialRecord) -> Path:
        """Persist one finished trial's result.json (trials.csv is tuner.study.writer.write_record's)."""
        return self.write_file(self.trial_dir(record.trial) / RESULT_FILE, dump_json(record.to_json()) + "\n")

    def write_csv_row(self, record: TrialRecord, columns: list[str]) -> bool:
        """trials.csv with this trial's row (`record`, its derived columns filled in by the caller) added or
        replaced, the others kept as they are: a long study does not read every record back at every trial.
        False, writing nothing, when there is no file yet or its header lacks one of `columns`: the caller then
        rebuilds it from every record (write_csv)."""
        if not self.csv_path.is_file():
            return False
        rows = list(csv.reader(io.StringIO(self.csv_path.read_bytes().decode(), newline="")))
        header = rows[0] if rows else []
        if not header or header[0] != "trial" or any(c not in header for c in columns):
            return False
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore")
        row = {c: record.get(c) for c in header}
        row.update({k: v for k, v in record.params.items() if k in header})
        w.writerow(row)
        mine = next(csv.reader(io.StringIO(buf.getvalue(), newline="")))
        kept = [r for r in rows[1:] if r and r[0] != str(record.trial)] + [mine]
        kept.sort(key=lambda r: int(r[0]) if r[0].isdigit() else -1)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerows([header, *kept])
        self.write_file(self.csv_path, out.getvalue())
        return True

    def has_record(self, trial: int) -> bool:
        return (self.trial_dir(trial) / RESULT_FILE).is_file()

    # --- confirmation re-runs -----------------------------------------------------------------------------------
    def rerun_path(self, trial: int, repeat: int) -> Path:
        return self.trial_dir(trial) / CONFIRM_DIR / f"{repeat:02d}.json"

    def write_rerun(self, trial: int, rerun: Rerun) -> Path:
        """One re-run, in its own file beside the trial (the trial's result.json is never rewritten). trials.csv is
        the caller's to refresh (tuner.study.writer.write_rerun): the re-runs move its `suspect` column."""
        return self.write_file(self.rerun_path(trial, rerun.repeat), dump_json(rerun.to_json()) + "\n")

    def reruns(self, trial: int) -> list[Rerun]:
        out = []
        for path in sorted((self.trial_dir(trial) / CONFIRM_DIR).glob("*.json")):
            data = load_json_object(path, "re-run file", StudyError)
            try:
                out.append(Rerun.model_validate(data))
            except ValidationError as err:
                raise StudyError(f"{path}: {err.errors()[0]['msg']}; delete the file (`tuner search --resume` runs "
                                 f"the re-run again)") from None
        return sorted(out, key=lambda r: r.repeat)

    def read_trials(self) -> list[tuple[TrialRecord, list[Rerun]]]:
        """Every persisted trial as recorded, by number, with its re-runs; what a view makes of them (confirmed
        figures, suspects, goodput, cached ceilings) is tuner.analysis.trials.records'. A file that does not read
        as a record is a StudyError naming it."""
        out = []
        for number, trial_dir in self.trial_dirs():  # the study's own folders only: never a user's backup copy
            path = trial_dir / RESULT_FILE
            if not path.is_file():
                continue
            data = load_json_object(path, "trial result file", StudyError)
            try:
                record = TrialRecord.model_validate(data)
            except ValidationError as err:
                first = err.errors()[0]
                key = ".".join(str(p) for p in first["loc"]) or "(top level)"
                raise StudyError(f"{path}: {key}: {first['msg']}; delete the file (`tuner search --resume` "
                                 f"rewrites a complete trial from the Optuna study) or restore it") from None
            if record.trial != number:  # read as it says, it would be a second row of another trial
                raise StudyError(f"{path}: trial: {record.trial}, but the file is in trial {number}'s folder; "
                                 f"put back the file that belongs there, or delete it (`tuner search --resume` "
                                 f"rewrites a complete trial from the Optuna study)")
            out.append((record, self.reruns(record.trial)))
        return out

    def read_record(self, trial: int) -> TrialRecord | None:
        """One trial's result.json as recorded; None when absent or unreadable."""
        path = self.trial_dir(trial) / RESULT_FILE
        try:
            return TrialRecord.model_validate(load_json_object(path, "trial result file", StudyError))
        except (StudyError, ValidationError):
            return None

    def read_ceilings(self) -> dict[str, Any]:
        """The study's ceilings.json (tuner.measure.ceiling.CeilingCache) parsed; {} when absent or unreadable."""
        return _read_ceilings(self.ceilings_path)

    def csv_columns(self, meta: StudyMeta, records: list[TrialRecord]) -> list[str]:
        objectives = [o.metric for o in meta.objectives]
        measured = [m.key for m in table_columns() if m.key not in objectives]
        rungs = ["rung", "measured_at"] if any(r.rung is not None or r.measured_at is not None for r in records) \
            else []  # under a rung scheduler: where each row's figures were taken (budget's unit: meta.budget)
        return ["trial", "state", *rungs, *objectives, *measured, *param_columns(meta, records), "error"]

    def write_csv(self, records: list[TrialRecord]) -> Path:
        """trials.csv rebuilt from `records` (every trial, their derived columns filled in by the caller)."""
        meta = self.read_meta()
        cols = self.csv_columns(meta, records)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for rec in records:
            row = {c: rec.get(c) for c in cols}
            row.update({k: v for k, v in rec.params.items() if k in cols})
            w.writerow(row)
        return self.write_file(self.csv_path, buf.getvalue())


_CEILINGS: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}  # path -> (its stat stamp, parsed)


def _read_ceilings(path: Path) -> dict[str, Any]:
    """ceilings.json parsed, read again only when the file changed (inode, mtime, size: atomic_write replaces it):
    records() runs for every view and at every trial's end, and the cache grows with the study. {} when absent or
    unreadable (the views then say the ceilings were not measured)."""
    try:
        st = path.stat()
    except OSError:
        return {}
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    hit = _CEILINGS.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        import json

        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if len(_CEILINGS) >= 16:  # a process that reads many studies (tests, `tuner report` of several) stays small
        _CEILINGS.clear()
    _CEILINGS[str(path)] = (stamp, data if isinstance(data, dict) else {})
    return _CEILINGS[str(path)][1]
