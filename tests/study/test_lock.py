"""The study lock of a search: a study folder deleted while the search holds it is never created again, and what
came back in its place during the search is cleared, so the name starts a new study."""

from __future__ import annotations

import shutil

import pytest

from tuner.study import StudyFolder, StudyGone, StudyMeta, TrialRecord, lock_study


def test_a_deleted_study_folder_is_not_written_again_while_its_search_holds_it(tmp_path):
    folder = tmp_path / "reports" / "s"
    lock = lock_study(folder, "s", new=True)
    try:
        study = StudyFolder(folder)
        study.write_meta(StudyMeta(name="s"))
        study.write_result(TrialRecord(trial=0, state="complete"))
        shutil.rmtree(folder)
        assert lock.lost()
        for write in (lambda: study.write_meta(StudyMeta(name="s")),
                      lambda: study.write_result(TrialRecord(trial=1, state="complete")),
                      lambda: study.write_file(study.trial_dir(2) / "rungs.json", "[]")):
            with pytest.raises(StudyGone, match=f"the study folder {folder} was deleted while the search ran"):
                write()
        assert not folder.exists()
    finally:
        lock.release()
    StudyFolder(folder).write_meta(StudyMeta(name="s"))  # a folder no search holds is written as before
    assert (folder / "study.json").is_file()


def test_what_came_back_where_a_lost_study_was_is_cleared_and_the_name_is_free(tmp_path):
    folder = tmp_path / "reports" / "s"
    lock = lock_study(folder, "s", new=True)
    StudyFolder(folder).write_meta(StudyMeta(name="s"))
    shutil.rmtree(folder)
    # where the study was, what a trial process, Ray's experiment sync and Optuna's database open make again
    (folder / "trials" / "0002").mkdir(parents=True)
    (folder / "trials" / "0002" / "samples.png").write_bytes(b"png")
    (folder / "ray" / "run-1").mkdir(parents=True)
    (folder / "ray" / "run-1" / "experiment_state.json").write_text("{}")
    (folder / "study.db").write_bytes(b"")
    assert lock.lost()
    assert lock.clear_lost() == []
    assert not folder.exists()
    lock_study(folder, "s", new=True).release()  # the name starts a new study


def test_a_lost_studys_path_keeps_what_tuner_did_not_write(tmp_path):
    folder = tmp_path / "reports" / "s"
    lock = lock_study(folder, "s", new=True)
    StudyFolder(folder).write_meta(StudyMeta(name="s"))
    shutil.rmtree(folder)
    (folder / "ray").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    assert lock.clear_lost() == [folder / "notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine" and not (folder / "ray").exists()


def test_a_study_made_again_at_the_path_is_not_touched(tmp_path):
    folder = tmp_path / "reports" / "s"
    lock = lock_study(folder, "s", new=True)
    StudyFolder(folder).write_meta(StudyMeta(name="s"))
    shutil.rmtree(folder)
    other = lock_study(folder, "s", new=True)  # another search started the name again
    try:
        (folder / "ray").mkdir()
        assert lock.lost() and lock.clear_lost() == []
        assert (folder / "ray").is_dir() and (folder / ".search.lock").is_file()
    finally:
        other.release()
