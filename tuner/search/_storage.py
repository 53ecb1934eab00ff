"""The Optuna storage of a study: its URL, opening it, and reconciling it with the study folder after a kill.

The Optuna database is written at every tell, so it is the record of truth on resume: trials a kill left RUNNING
are marked FAIL (the samplers ignore them), and a complete trial whose result file is missing is rewritten from
the record kept in its user attributes. `keep_record` is the one writer of a search trial's record in the study
folder: the searcher hands it each trial after telling Optuna, reconcile_study each one a kill lost
(tests/search/test_storage.py fails on any other caller of tuner.study.write_record).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError, StorageError, StudyError
from tuner.search._journal import opened, sqlite_path
from tuner.study import DB_FILE, Rerun, STUDY_META, StudyFolder, StudyMeta, TrialRecord, write_record, write_rerun
from tuner.analysis import CSV_FIGURES, read_records

RECORD_ATTR = "record"  # Optuna user attribute holding the trial's record
RERUN_ATTR = "confirm"  # Optuna study user attributes `confirm:<trial>` hold each trial's confirmation re-runs


def rerun_attr(trial: int) -> str:
    return f"{RERUN_ATTR}:{trial}"


ID_ATTR = "tuner_study_id"  # Optuna study user attribute: the study id kept in study.json (tuner.study.StudyMeta.id)
FOLDER_DB = "sqlite:///study.db"  # the default storage as study.json keeps it: relative to the study folder


def default_storage(study_dir: Path) -> str:
    return f"sqlite:///{Path(study_dir) / 'study.db'}"


def stored_storage(url: str, study_dir: Path) -> str:
    """The URL study.json keeps: the folder's own database relative to the folder, so that a copied or renamed
    study folder opens its own copy, never the original's; any other URL as given."""
    path = sqlite_path(url)
    if path is None:
        return url
    if path.expanduser().resolve() == (Path(study_dir) / DB_FILE).resolve():
        return FOLDER_DB
    return url if path.expanduser().is_absolute() else f"sqlite:///{path.expanduser().absolute()}"


def resolve_storage(stored: str, study_dir: Path) -> str:
    """The URL to open for a saved study: FOLDER_DB is the study folder's own database. A study.json written
    before paths were relative holds an absolute path; one that points into another study's folder (this one was
    copied or renamed) means this folder's own study.db."""
    study_dir = Path(study_dir)
    path = sqlite_path(stored)
    if path is None:
        return stored
    if stored == FOLDER_DB:
        return default_storage(study_dir)
    path = path.expanduser().absolute()  # any other relative path is from where tuner runs, as SQLAlchemy reads it
    other_study = path.name == DB_FILE and (path.parent / STUDY_META).is_file()
    if path.parent.resolve() != study_dir.resolve() and ((study_dir / DB_FILE).exists() or other_study):
        return default_storage(study_dir)
    return stored


# Database kinds whose driver is a separate install: what to tell a user whose driver is missing.
_DRIVER_FIX = {
    "postgresql": ("PostgreSQL", "pip install 'tuner[postgres]'"),
    "mysql": ("MySQL", "pip install PyMySQL and write the URL as mysql+pymysql://..."),
}


# Query keys whose value is a secret: libpq's `password` and `sslpassword`, a `PGPASSWORD`-style spelling, and
# what other drivers call theirs (`passwd`, `pwd`, a token). `passfile` names a file, not a secret.
_SECRET_KEY = re.compile(r"pass(word|wd)|pwd|secret|token", re.IGNORECASE)
_USERINFO = re.compile(r"^[A-Za-z][\w+.-]*://(?P<user>[^:/@?#]*):(?P<password>[^@]*)@")  # as SQLAlchemy reads it
MASK = "***"


def _secret_spans(url: str) -> list[tuple[int, int]]:
    """Where the URL's secrets are: the userinfo password and every secret query value (also in a conninfo string
    such as `host=h password=pw`, which has no query)."""
    spans = []
    m = _USERINFO.match(url)
    if m is not None:
        spans.append(m.span("password"))
    query = url.find("?", m.end() if m is not None else 0) if "://" in url else -1
    start = query + 1 if query >= 0 else (0 if "://" not in url else len(url))
    for kv in re.finditer(r"(?P<key>[^=&;#?\s]+)=(?P<value>[^&;#\s]*)", url[start:]):
        if _SECRET_KEY.search(kv.group("key")):
            spans.append((start + kv.start("value"), start + kv.end("value")))
    return spans


def secrets_of(url: str) -> list[str]:
    """The secret values the URL holds, as written and percent-decoded (to scrub them from a driver's message)."""
    from urllib.parse import unquote

    out = {v for a, b in _secret_spans(url) if (v := url[a:b])} | {unquote(url[a:b]) for a, b in _secret_spans(url)}
    return sorted((v for v in out if v), key=len, reverse=True)


def shown_url(url: str) -> str:
    """The URL for messages, study.json, reports and Ray's files: every credential masked (the userinfo password,
    a `password=` or other secret query value). The one masking rule: everything that writes or prints a URL uses it.
    Read as text, not parsed, so a URL SQLAlchemy cannot parse (several hosts) is masked as well."""
    for a, b in sorted(_secret_spans(url), reverse=True):
        if b > a:
            url = url[:a] + MASK + url[b:]
    return url


def scrub(text: str, url: str) -> str:
    """`text` (a driver's error message) with the URL's secrets masked, should the driver quote them."""
    for secret in secrets_of(url):
        text = text.replace(secret, MASK)
    return text


SECRET_FILE = "storage.url"  # the one copy of a storage URL that holds a password (see kept_url)


def has_password(url: str) -> bool:
    return bool(secrets_of(url))


def kept_url(url: str) -> str:
    """What study.json, reports, logs and Ray's files may hold of a storage URL: the URL, its secrets masked."""
    return shown_url(url)


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
        parsed = make_url(_hosts_in_query(url))
    except (ArgumentError, ValueError) as err:  # ValueError: a port that is not a number
        why = f" ({scrub(_first_line(err), url)})" if isinstance(err, ValueError) else ""
        raise ConfigError(f"--storage {shown_url(url)} is not a database URL{why}; use e.g. "
                          f"sqlite:///path/to/study.db or postgresql://user@host/db") from None
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


_NETLOC = re.compile(r"^(?P<head>[A-Za-z][\w+.-]*://(?:[^@/?#]*@)?)(?P<hosts>[^/?#]*)(?P<tail>.*)$", re.DOTALL)


def _hosts_in_query(url: str) -> str:
    """A URL with several hosts (`postgresql://u@h1:5432,h2:5433/db`, which libpq accepts and tries in turn) in the
    form SQLAlchemy reads (`postgresql://u@/db?host=h1:5432&host=h2:5433`), whose port parsing fails on the
    comma otherwise. Any other URL as it is."""
    m = _NETLOC.match(url)
    if m is None or "," not in m.group("hosts"):
        return url
    from urllib.parse import quote

    hosts = "&".join(f"host={quote(h, safe=':[]')}" for h in m.group("hosts").split(","))
    tail = m.group("tail")
    path, sep, query = tail.partition("?")
    return f"{m.group('head')}{path or '/'}?{hosts}{'&' + query if query else ''}"


def check_storage_url(url: str) -> None:
    """Refuse, before anything starts, a URL that is not one, a SQLite file in a missing folder, or a database
    whose Python driver is not installed."""
    if "://" not in url:
        raise ConfigError(f"--storage {shown_url(url)!r} is not a database URL; use e.g. sqlite:///path/to/study.db or "
                          f"postgresql://user@host/db")
    path = sqlite_path(url)
    if path is not None and not path.expanduser().parent.is_dir():
        raise ConfigError(f"--storage {shown_url(url)}: folder {path.expanduser().parent} does not exist")
    engine_url(url)


def open_storage(url: str, *, searching: bool = False) -> Any:
    """The Optuna storage at `url`; `searching`: the search's writer (SQLite's journal: tuner.search._journal)."""
    import optuna

    resolved = engine_url(url)
    try:
        storage = optuna.storages.RDBStorage(resolved)
    except Exception as err:  # a bad URL or an unreachable server: the user's to fix
        raise ConfigError(f"--storage {shown_url(url)}: cannot open the database: {type(err).__name__}: "
                          f"{scrub(_first_line(err), url)}") from None
    opened(storage.engine, resolved, searching=searching)
    return storage


def _first_line(err: BaseException) -> str:
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def storage_has_study(url: str, name: str) -> bool:
    """Whether the storage holds a study of that name (a missing SQLite file holds none; nothing is created)."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return False
    return any(s.study_name == name for s in open_storage(url).get_all_studies())


def check_study_database(folder: StudyFolder, meta: StudyMeta, url: str) -> None:
    """On --resume, before anything is written: the study's database is there, not empty, and holds this study
    (the id in study.json), so a lost or replaced database is refused instead of started anew, which would number
    the trials from 0 again over the folder's records; and its trials drew batch_size as this tuner does."""
    path = sqlite_path(url)
    if path is not None:
        path = path.expanduser()
        fix = (f"restore it (or the whole study folder {folder.path}) from a backup; --resume never starts the "
               f"database anew, which would renumber the trials over the records kept")
        if not path.is_file():
            raise StudyError(f"{path}: the study's database is missing; {fix}")
        if path.stat().st_size == 0:
            raise StudyError(f"{path}: the study's database is empty (0 bytes); {fix}")
    found = [s for s in open_storage(url).get_all_studies() if s.study_name == meta.name]
    held = found[0].user_attrs.get(ID_ATTR) if found else None
    if not found:
        if meta.id is None and not any((folder.path / "trials").glob("*/result.json")):
            return  # an older study stopped before its first trial: nothing to lose
        raise StudyError(f"{shown_url(url)} holds no study '{meta.name}' but {folder.meta_path} describes one; "
                         f"restore the study's own database from a backup")
    if held != meta.id:
        raise StudyError(f"{shown_url(url)} holds another study '{meta.name}' (id {held}) than {folder.meta_path} "
                         f"(id {meta.id}); resume the study folder that goes with that database, or restore this "
                         f"one's own database")
    if found and isinstance(meta.space_def, dict):  # its trials drew the effective batch's split as tuner does now
        from tuner.space import check_resumable_split, parse_space

        storage = open_storage(url)
        drawn: dict[str, Any] = {}
        for trial in storage.get_all_trials(storage.get_study_id_from_name(meta.name), deepcopy=False):
            for name, dist in trial.distributions.items():
                drawn.setdefault(name, dist)
        space = parse_space(meta.space_def, source=f"{folder.meta_path}: space_def", name=meta.space or meta.name)
        check_resumable_split(space, meta.domains, drawn, str(folder.meta_path))


def check_study_files(folder: StudyFolder, meta: StudyMeta) -> None:
    """On --resume, before anything runs or is written: what the search reads back from the study folder (the
    stored domains, every trial's record, a rung scheduler's entries) reads, or one StudyError line names the file
    and key.
    study.json itself is checked as it is read (StudyFolder.read_meta)."""
    from tuner.search._rungs import check_stored_entries
    from tuner.space import check_stored_domains

    check_stored_domains(meta.space_def, meta.domains, str(folder.meta_path))
    read_records(folder)
    check_stored_entries(folder, meta.scheduler)  # what the scheduler kept (rungs.json): it is rebuilt from them


def open_optuna_study(storage: Any, name: str, study_id: str, directions: list[str],
                      metric_names: list[str] | None = None) -> Any:
    """The study's Optuna study, created on first use with the study id in its user attributes (tagging an
    older study that has none), and its objectives named (`metric_names`: what optuna-dashboard labels its axes
    with instead of 0 and 1)."""
    import warnings

    import optuna

    study = optuna.create_study(storage=storage, study_name=name, directions=directions, load_if_exists=True)
    if metric_names and study.metric_names != metric_names:
        with warnings.catch_warnings():  # set_metric_names is marked experimental
            warnings.simplefilter("ignore")
            study.set_metric_names(metric_names)
    held = study.user_attrs.get(ID_ATTR)
    if held is None:
        study.set_user_attr(ID_ATTR, study_id)
    elif held != study_id:
        raise StudyError(f"the Optuna study '{name}' belongs to another study (id {held}, not {study_id}); pick "
                         f"another name with --study NEW_NAME")
    return study


def keep_record(folder: StudyFolder, record: TrialRecord) -> Path:
    """Write one search trial's record: result.json, then its trials.csv row. The only writer: the searcher calls
    it after Optuna has the record (the database is what --resume trusts), reconcile_study for a file a kill lost;
    a Tune run without the study's searcher records nothing."""
    return write_record(folder, record, CSV_FIGURES)


FULL = ("database or disk is full", "no space left on device", "disk quota exceeded")  # how sqlite and the OS say it


def storage_failure(err: BaseException, folder: Path) -> StorageError | None:
    """One line for a failure to write the study (Optuna's database or a file in the folder) that the file system
    caused, naming the folder: a full disk said "no space left on device" through Optuna as "StorageInternalError:
    An exception is raised during the commit" and 8 lines of traceback (issue 57); None for any other error.
    The study stays resumable: --resume marks a trial the failure left RUNNING as FAIL (reconcile_study)."""
    import errno

    from tuner.files import STORAGE_ERRNOS

    seen: list[BaseException] = []
    link: BaseException | None = err
    while link is not None and link not in seen and len(seen) < 20:  # the chain: Optuna's, SQLAlchemy's, sqlite's
        seen.append(link)
        link = link.__cause__ or link.__context__ or getattr(link, "orig", None)
    for link in seen:
        if isinstance(link, OSError) and link.errno in (errno.ENOSPC, errno.EDQUOT) or \
                any(word in str(link).lower() for word in FULL):
            return StorageError(f"{folder}: cannot write the study: no space left on device; free some space and "
                                f"run the same search with --resume")
    for link in seen:
        if isinstance(link, OSError) and link.errno in STORAGE_ERRNOS:
            return StorageError(f"{folder}: cannot write the study: {link.strerror or link}; fix it and run the "
                                f"same search with --resume")
    if any(type(link).__name__ == "StorageInternalError" for link in seen):
        return StorageError(f"{folder}: cannot write the study's Optuna storage ({str(err).splitlines()[0]}); fix it "
                            f"and run the same search with --resume")
    return None


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
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED) and RECORD_ATTR in t.user_attrs \
                and not folder.has_record(t.number):  # PRUNED: a trial the rung scheduler stopped
            keep_record(folder, TrialRecord.model_validate(t.user_attrs[RECORD_ATTR]))
        for run in reruns.get(rerun_attr(t.number), []):  # confirmation re-runs whose file a kill lost
            if not folder.rerun_path(t.number, int(run["repeat"])).is_file():
                write_rerun(folder, t.number, Rerun.model_validate(run), CSV_FIGURES)
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
