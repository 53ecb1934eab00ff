"""The Optuna storage of a study: its URL, opening it, and reconciling it with the study folder after a kill.

The Optuna database is written at every tell, so it is the record of truth on resume: trials a kill left RUNNING
are marked FAIL (the samplers ignore them), and a complete trial whose result file is missing is rewritten from
the record kept in its user attributes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.errors import ConfigError
from tuner.study import StudyFolder, TrialRecord
from tuner.study.record import Rerun

RECORD_ATTR = "record"  # Optuna user attribute holding the trial's record
RERUN_ATTR = "confirm"  # Optuna study user attributes `confirm:<trial>` hold each trial's confirmation re-runs


def rerun_attr(trial: int) -> str:
    return f"{RERUN_ATTR}:{trial}"


def default_storage(study_dir: Path) -> str:
    return f"sqlite:///{Path(study_dir) / 'study.db'}"


def sqlite_path(url: str) -> Path | None:
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


# Database kinds whose driver is a separate install: what to tell a user whose driver is missing.
_DRIVER_FIX = {
    "postgresql": ("PostgreSQL", "pip install 'tuner[postgres]'"),
    "mysql": ("MySQL", "pip install PyMySQL and write the URL as mysql+pymysql://..."),
}


def shown_url(url: str) -> str:
    """The URL for messages: the password masked."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: nothing to mask that SQLAlchemy could find
        return url


SECRET_FILE = "storage.url"  # the one copy of a storage URL that holds a password (see kept_url)


def has_password(url: str) -> bool:
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).password is not None
    except Exception:  # not a URL SQLAlchemy reads: it holds no password it could find either
        return False


def kept_url(url: str) -> str:
    """What study.json, reports, logs and Ray's files may hold of a storage URL: the URL, its password masked."""
    return shown_url(url) if has_password(url) else url


def keep_secret(folder: Path, url: str) -> None:
    """The one place a storage URL's password is written: `storage.url` in the study folder, readable by its
    owner alone (0600), which --resume reads. Nothing is written for a URL without a password."""
    if not has_password(url):
        return
    import os

    path = Path(folder) / SECRET_FILE
    tmp = path.with_name(f".{SECRET_FILE}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(url + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def saved_url(folder: Path, stored: str) -> str:
    """The storage URL of a study, whole: its secret file where the study keeps one, else study.json's."""
    path = Path(folder) / SECRET_FILE
    if path.is_file():
        return path.read_text().strip() or stored
    return stored


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def engine_url(url: str) -> str:
    """The URL SQLAlchemy gets. `postgresql://` and `postgres://` (what users type) mean psycopg 3, the `postgres`
    extra's driver, unless only psycopg2 is installed; a URL that names its driver (`postgresql+psycopg2://`) is
    left as it is. A missing driver or an unknown kind of database is a ConfigError naming the fix."""
    if url.startswith("sqlite:"):
        return url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(f"--storage {shown_url(url)} is not a database URL; use e.g. sqlite:///path/to/study.db or "
                          f"postgresql://user@host/db") from None
    if parsed.drivername in ("postgres", "postgresql"):
        driver = "psycopg2" if not _has_module("psycopg") and _has_module("psycopg2") else "psycopg"
        parsed = parsed.set(drivername=f"postgresql+{driver}")
    elif parsed.drivername.startswith("postgres+"):
        parsed = parsed.set(drivername="postgresql+" + parsed.drivername.partition("+")[2])
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        raise ConfigError(f"--storage {shown_url(url)}: unknown kind of database {parsed.drivername!r}; use "
                          f"sqlite:///path/to/study.db, postgresql://user@host/db or another SQLAlchemy URL") from None
    try:
        dialect.import_dbapi()
    except ImportError:
        kind, fix = _DRIVER_FIX.get(parsed.get_backend_name(), (parsed.get_backend_name(), ""))
        fix = fix or f"install the Python driver SQLAlchemy's {parsed.drivername} dialect uses"
        raise ConfigError(f"--storage {shown_url(url)}: no {kind} driver installed ({parsed.get_driver_name()}); "
                          f"{fix}") from None
    return parsed.render_as_string(hide_password=False)


def check_storage_url(url: str) -> None:
    """Refuse, before anything starts, a URL that is not one, a SQLite file in a missing folder, or a database
    whose Python driver is not installed."""
    if "://" not in url:
        raise ConfigError(f"--storage {url!r} is not a database URL; use e.g. sqlite:///path/to/study.db or "
                          f"postgresql://user@host/db")
    path = sqlite_path(url)
    if path is not None and not path.expanduser().parent.is_dir():
        raise ConfigError(f"--storage {url}: folder {path.expanduser().parent} does not exist")
    engine_url(url)


def open_storage(url: str) -> Any:
    import optuna

    resolved = engine_url(url)
    try:
        return optuna.storages.RDBStorage(resolved)
    except Exception as err:  # a bad URL or an unreachable server: the user's to fix
        raise ConfigError(f"--storage {shown_url(url)}: cannot open the database: {type(err).__name__}: "
                          f"{_first_line(err)}") from None


def _first_line(err: BaseException) -> str:
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def storage_has_study(url: str, name: str) -> bool:
    """Whether the storage holds a study of that name (a missing SQLite file holds none; nothing is created)."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return False
    return any(s.study_name == name for s in open_storage(url).get_all_studies())


def reconcile_study(folder: StudyFolder, storage: Any, study_name: str) -> int:
    """After a kill: RUNNING trials become FAIL, missing result files of complete trials are rewritten.
    Returns the number of Optuna trials (any state)."""
    import optuna
    from optuna.trial import TrialState

    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        return 0
    trials = study.get_trials(deepcopy=False)
    reruns = study.user_attrs
    for t in trials:  # WAITING (an enqueued baseline never asked for) stays: the next search asks it first
        if t.state == TrialState.RUNNING:
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        elif t.state == TrialState.COMPLETE and RECORD_ATTR in t.user_attrs and not folder.has_record(t.number):
            folder.write_record(TrialRecord.model_validate(t.user_attrs[RECORD_ATTR]))
        for run in reruns.get(rerun_attr(t.number), []):  # confirmation re-runs whose file a kill lost
            if not folder.rerun_path(t.number, int(run["repeat"])).is_file():
                folder.write_rerun(t.number, Rerun.model_validate(run))
    return len(trials)


def fail_if_running(study: Any, number: int) -> None:
    """Mark one trial FAIL if it is still RUNNING (stopped by Ctrl-C before it reported)."""
    from optuna.trial import TrialState

    try:
        trial = study.get_trials(deepcopy=False)[number]
        if trial.state == TrialState.RUNNING:
            study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    except Exception:  # best effort: --resume does the same
        pass
