"""A full disk while a search writes its study: one line naming the folder and "no space left on device", a
non-zero exit, and a study that --resume finishes (issue 57: an internal error with 8 lines of traceback, or, with
the last trial's tell lost, exit 0 with that trial RUNNING in study.db)."""

from __future__ import annotations

import sqlite3
import sys

import pytest

from tests.helpers.spaces_for_tests import fake_engine_space
from tuner.cli import main
from tuner.study import TrialResult


def engine(cfg, *, cache_dir, out_dir=None, **_):
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       loss=1.0 / cfg.params.batch_size)


def _full() -> Exception:
    """What Optuna raises when sqlite finds the disk full during a commit."""
    from optuna.exceptions import StorageInternalError

    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as err:
            raise StorageInternalError("An exception is raised during the commit. This typically happens due to "
                                       "invalid data in the commit, e.g. exceeding max length.") from err
    except StorageInternalError as err:
        return err


def _search(tmp_path, *more):
    space = tmp_path / "fake.yaml"
    space.write_text(fake_engine_space(trials=3))
    return ["search", "--space", str(space), "--study", "full", "--reports-dir", str(tmp_path / "reports"),
            "--no-probe", "--confirm", "0", *more]


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("tuner: ")]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


@pytest.mark.ray
def test_a_full_disk_when_telling_optuna_the_last_trial_is_one_line_not_exit_0_and_resumes(
        ray_session, tmp_path, capsys, trial_engine, monkeypatch):
    import ray.cloudpickle

    from tuner.search import _searcher

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trial_engine(engine)
    told = []
    real = _searcher.tell_trial

    def tell(study, trial, *args, **kwargs):
        told.append(trial.number)
        if len(told) == 3:  # the last trial's tell finds the disk full
            raise _full()
        return real(study, trial, *args, **kwargs)

    monkeypatch.setattr(_searcher, "tell_trial", tell)
    code = main(_search(tmp_path))
    line = _one_error_line(capsys.readouterr().err)
    assert code == 2
    assert str(tmp_path / "reports" / "full") in line and "no space left on device" in line
    monkeypatch.setattr(_searcher, "tell_trial", real)  # space freed
    assert main(_search(tmp_path, "--resume")) == 0, capsys.readouterr().err
    db = sqlite3.connect(tmp_path / "reports" / "full" / "study.db")
    states = [s for (s,) in db.execute("select state from trials")]
    assert "RUNNING" not in states  # the trial the full disk left RUNNING is settled by the resume


@pytest.mark.ray
def test_a_full_disk_that_optuna_meets_outside_a_tell_is_one_line_naming_the_folder(
        ray_session, tmp_path, capsys, trial_engine, monkeypatch):
    import ray.cloudpickle

    from tuner.search import _searcher

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trial_engine(engine)

    def ask(self, trial_id):
        raise _full()

    monkeypatch.setattr(_searcher.StudySearcher, "suggest", ask)
    code = main(_search(tmp_path))
    line = _one_error_line(capsys.readouterr().err)
    assert code == 2 and str(tmp_path / "reports" / "full") in line and "no space left on device" in line
