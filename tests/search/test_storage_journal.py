"""The search's SQLite journal (tuner.search._storage): the search's own writer on a local disk commits through
the write-ahead log, which cut ~13 ms a trial from the driver (issue 55, row 1); anything else that opens the
database leaves its journal alone, and the search's end returns it to the default journal with nothing lost."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import optuna
import pytest

from tuner.search._journal import on_local_disk, settle_storage
from tuner.search._storage import open_storage


def journal(path: Path) -> str:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        connection.close()


def a_study(storage, n: int) -> None:
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize", "minimize"])
    for i in range(n):
        trial = study.ask()
        trial.suggest_int("batch_size", 8, 64)
        trial.set_user_attr("record", {"trial": i, "state": "complete"})
        study.tell(trial, [float(i), 1.0])


@pytest.fixture()
def local(tmp_path) -> Path:
    if not on_local_disk(tmp_path):
        pytest.skip(f"{tmp_path} is not on a file system tuner knows as local: the default journal stays there")
    return tmp_path


def test_the_search_writes_ahead_and_its_end_leaves_one_plain_file_with_every_trial(local):
    url = f"sqlite:///{local / 'study.db'}"
    a_study(open_storage(url, searching=True), 3)
    assert journal(local / "study.db") == "wal"
    # a reader (tuner report) opened meanwhile sees every trial
    assert len(optuna.load_study(study_name="s", storage=open_storage(url)).trials) == 3

    settle_storage(url)

    assert journal(local / "study.db") == "delete"
    assert not (local / "study.db-wal").exists() and not (local / "study.db-shm").exists()
    (local / "copy").mkdir()
    (local / "copy" / "study.db").write_bytes((local / "study.db").read_bytes())  # the file alone
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{local / 'copy' / 'study.db'}").trials
    assert [t.values for t in trials] == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
    assert trials[2].user_attrs["record"] == {"trial": 2, "state": "complete"}


def test_reading_a_study_leaves_its_journal_as_it_was(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    a_study(open_storage(url), 2)
    assert journal(tmp_path / "study.db") == "delete"
    assert len(optuna.load_study(study_name="s", storage=open_storage(url)).trials) == 2
    assert journal(tmp_path / "study.db") == "delete"


def test_a_reader_holding_the_database_at_the_end_keeps_it_sound(local):
    url = f"sqlite:///{local / 'study.db'}"
    a_study(open_storage(url, searching=True), 2)
    reader = sqlite3.connect(local / "study.db")
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM trials").fetchone()[0] == 2  # holds a read lock
        settle_storage(url)  # cannot switch the journal under it: leaves the write-ahead log, raises nothing
    finally:
        reader.close()
    assert len(optuna.load_study(study_name="s", storage=open_storage(url)).trials) == 2
    settle_storage(url)
    assert journal(local / "study.db") == "delete"


def test_a_network_or_unknown_file_system_is_not_called_local():
    assert not on_local_disk(Path("/proc"))  # procfs: not a place SQLite's shared memory is known to work


def test_a_database_opened_again_and_again_keeps_no_dead_engines(tmp_path):
    """`tuner report --watch` opens a study's database on every refresh: the references settle_storage keeps to
    the engines opened on it are pruned as their engines go, so a long watch does not grow them without bound."""
    import gc

    from tuner.search import _journal

    url = f"sqlite:///{tmp_path / 'study.db'}"
    for _ in range(20):
        storage = open_storage(url)
        del storage
        gc.collect()
    refs = _journal._ENGINES[str((tmp_path / "study.db").absolute())]
    assert len(refs) <= 2 and sum(ref() is not None for ref in refs) <= 1
