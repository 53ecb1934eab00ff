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


def check_storage_url(url: str) -> None:
    if "://" not in url:
        raise ConfigError(f"--storage {url!r} is not a database URL; use e.g. sqlite:///path/to/study.db or "
                          f"postgresql://user@host/db")
    path = sqlite_path(url)
    if path is not None and not path.expanduser().parent.is_dir():
        raise ConfigError(f"--storage {url}: folder {path.expanduser().parent} does not exist")


def open_storage(url: str) -> Any:
    import optuna

    try:
        return optuna.storages.RDBStorage(url)
    except Exception as err:  # a bad URL or an unreachable server: the user's to fix
        raise ConfigError(f"--storage {url}: cannot open the database: {type(err).__name__}: {err}") from None


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
