"""One study, one database, one search at a time, and a baseline that is never lost: a copied or renamed study
folder resumes into its own database, a lost database is refused, a locked study is refused, a kill during the
baseline leaves it to --resume, and SIGTERM stops a search as Ctrl-C does."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from tests.helpers.searchproc import finish, search, sigkill, wait_for_results
from tests.helpers.spaces_for_tests import tiny_space
from tests.helpers.studies import load_trials, read_meta, disk_state
from tuner.cli import main
from tuner.search import SearchOptions, run_search
from tuner.study import LOCK_FILE

TINY_SPACE = tiny_space(trials=2)


def hashes(folder: Path) -> dict[str, tuple[str, int]]:
    return disk_state(folder)


def no_ray(monkeypatch) -> None:
    def refuse(*a, **k):
        raise AssertionError("Ray was started")

    monkeypatch.setattr("tuner.search._ray_env.start_local_ray", refuse)
    monkeypatch.setattr("tuner.search._ray_env.join_ray", refuse)


@pytest.fixture(scope="module")
def template(ray_session, tmp_path_factory) -> Path:
    """A finished two-trial study 'orig' on the CPU (its reports dir), run once for the module."""
    tmp = tmp_path_factory.mktemp("template")
    space = tmp / "tiny.yaml"
    space.write_text(TINY_SPACE)
    run_search(SearchOptions(space=str(space), study="orig", reports_dir=tmp / "reports", gpus_per_trial=0,
                             confirm=0))
    return tmp / "reports"


def finished_study(template: Path, tmp_path: Path) -> Path:
    """A copy of the finished study 'orig' under tmp_path: its reports dir."""
    shutil.copytree(template, tmp_path / "reports")
    return tmp_path / "reports"


@pytest.mark.ray
def test_a_copied_and_renamed_study_resumes_into_its_own_database_only(template, tmp_path):
    reports = finished_study(template, tmp_path)
    orig, copy = reports / "orig", reports / "copy"
    assert read_meta(orig)["storage"] == "sqlite:///study.db" and read_meta(orig)["id"]
    shutil.copytree(orig, copy)
    # as a study.json written before paths were relative would have it: the original's absolute database path
    meta = json.loads((copy / "study.json").read_text())
    meta["storage"] = f"sqlite:///{orig / 'study.db'}"
    (copy / "study.json").write_text(json.dumps(meta))
    before_orig = hashes(orig)
    before_copy = {r["trial"]: r for r in load_trials(copy)}
    time.sleep(0.01)

    more = run_search(SearchOptions(study="copy", resume=True, trials=4, reports_dir=reports, confirm=0))

    assert more.ran == 2
    assert hashes(orig) == before_orig  # the original's database and records untouched, byte for byte
    after = {r["trial"]: r for r in load_trials(copy)}
    assert sorted(after) == [0, 1, 2, 3] and all(after[n] == rec for n, rec in before_copy.items())
    trials = optuna.load_study(study_name="orig", storage=f"sqlite:///{copy / 'study.db'}").trials
    assert sorted(t.number for t in trials if t.state.name == "COMPLETE") == [0, 1, 2, 3]
    assert read_meta(copy)["storage"] == "sqlite:///study.db"


@pytest.mark.ray
def test_a_finished_study_s_database_file_alone_holds_every_trial(template, tmp_path):
    # The search writes SQLite's write-ahead log (issue 55); at its end study.db is a plain rollback-journal file
    # again, so copying that file alone, as a user might, copies the whole study.
    import sqlite3

    orig = template / "orig"
    assert not (orig / "study.db-wal").exists() and not (orig / "study.db-shm").exists()
    connection = sqlite3.connect(orig / "study.db")
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        connection.close()
    shutil.copy(orig / "study.db", tmp_path / "alone.db")
    trials = optuna.load_study(study_name="orig", storage=f"sqlite:///{tmp_path / 'alone.db'}").trials
    assert sorted(t.number for t in trials if t.state.name == "COMPLETE") == [0, 1]


@pytest.mark.ray
def test_a_database_of_another_study_is_refused_and_nothing_changes(template, tmp_path, capsys, monkeypatch):
    reports = finished_study(template, tmp_path)
    other = reports / "other"
    shutil.copytree(reports / "orig", other)
    meta = json.loads((other / "study.json").read_text())
    meta["id"] = "0" * 32  # another study's study.json beside this database, under the same Optuna name
    (other / "study.json").write_text(json.dumps(meta))
    before = hashes(reports)
    no_ray(monkeypatch)
    capsys.readouterr()
    rc = main(["search", "--study", "other", "--resume", "--trials", "3", "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "another study" in err[0], err
    assert hashes(reports) == before


@pytest.mark.parametrize("damage", ["deleted", "empty"])
@pytest.mark.ray
def test_a_lost_database_is_refused_on_resume_with_one_line(template, tmp_path, capsys, monkeypatch, damage):
    reports = finished_study(template, tmp_path)
    db = reports / "orig" / "study.db"
    if damage == "empty":
        db.write_bytes(b"")
    else:
        db.unlink()
    before = hashes(reports)
    no_ray(monkeypatch)
    rc = main(["search", "--study", "orig", "--resume", "--trials", "9", "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert str(db) in err[0] and ("missing" if damage == "deleted" else "empty (0 bytes)") in err[0]
    assert hashes(reports) == before and db.exists() == (damage == "empty")


def hold_lock(path: Path) -> subprocess.Popen:
    """Another process holding the study's lock, as a running `tuner search` does."""
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_study_another_search_holds_is_refused_and_never_written(tmp_path, space_search, monkeypatch):
    study_dir = tmp_path / "reports" / "same"
    study_dir.mkdir(parents=True)
    holder = hold_lock(study_dir / LOCK_FILE)  # the first of two searches started together
    try:
        no_ray(monkeypatch)
        rc, _, err, _, _ = space_search.run(TINY_SPACE, "--study", "same", "--gpus-per-trial", "0", name="tiny.yaml")
        err = err.strip().splitlines()
    finally:
        holder.kill()
        holder.wait()
    assert rc == 2 and len(err) == 1 and "in use by another `tuner search`" in err[0], err
    assert [p.name for p in study_dir.iterdir()] == [LOCK_FILE]


@pytest.mark.ray
def test_a_study_being_resumed_elsewhere_is_refused(template, tmp_path, capsys, monkeypatch):
    reports = finished_study(template, tmp_path)
    before = hashes(reports)
    holder = hold_lock(reports / "orig" / LOCK_FILE)
    try:
        no_ray(monkeypatch)
        rc = main(["search", "--study", "orig", "--resume", "--trials", "9", "--reports-dir", str(reports)])
        err = capsys.readouterr().err.strip().splitlines()
    finally:
        holder.kill()
        holder.wait()
    assert rc == 2 and len(err) == 1 and "in use" in err[0], err
    assert {k: v for k, v in hashes(reports).items() if not k.endswith(LOCK_FILE)} == \
        {k: v for k, v in before.items() if not k.endswith(LOCK_FILE)}


def test_bad_input_found_after_the_claim_leaves_no_folder(tmp_path, space_search, monkeypatch):
    no_ray(monkeypatch)
    rc, _, err, _, _ = space_search.run(TINY_SPACE, "--study", "bad", "--workload", "nowhere.py:make",
                                        "--gpus-per-trial", "0", name="tiny.yaml")
    assert rc == 2, err
    assert not (tmp_path / "reports" / "bad").exists()


# --- real processes: kill -9 during the baseline, SIGTERM during a trial --------------------------------------


def test_a_kill_during_the_baseline_leaves_it_to_resume(space_search):
    first, reports = space_search.start(tiny_space(trials=3), "--gpus-per-trial", "0", "--confirm", "0",
                                        name="tiny.yaml")
    study_dir = reports / "tiny"
    try:
        deadline = time.monotonic() + 400
        while not list(study_dir.glob("ray/run-*/trial-0000")):  # trial 0, the baseline, has started
            assert first.poll() is None, f"search ended before trial 0 started: {first.communicate()}"
            assert time.monotonic() < deadline, "trial 0 did not start within 400 s"
            time.sleep(0.02)
    finally:
        sigkill(first)
    if (study_dir / "trials" / "0000" / "result.json").exists():
        pytest.skip("the baseline finished before the kill landed")
    baseline = read_meta(study_dir)["baseline"]["params"]

    out, err = finish(search(["--study", "tiny", "--resume"], reports), timeout=500)
    assert "Pareto front" in out, err
    meta = read_meta(study_dir)
    records = {r["trial"]: r for r in load_trials(study_dir)}
    number = meta["baseline"]["trial"]
    assert meta["baseline"]["params"] == baseline and number in records
    assert all(records[number]["params"][k] == v for k, v in baseline.items() if k in records[number]["params"])
    assert min(records) == number  # run before any sampled trial
    from tuner.analysis import open_study

    assert open_study(reports, "tiny").baseline_trial == number


def test_sigterm_during_a_trial_stops_cleanly_with_the_resume_command(space_search):
    proc, reports = space_search.start(tiny_space(trials=20), "--gpus-per-trial", "0", "--confirm", "0",
                                       name="tiny.yaml")
    study_dir = reports / "tiny"
    try:
        wait_for_results(proc, study_dir, 1, timeout=400)
        os.kill(proc.pid, signal.SIGTERM)
    except BaseException:
        sigkill(proc)
        raise
    out, err = finish(proc, timeout=300)
    assert proc.returncode == 143, err
    assert "SIGABRT" not in err and "Fatal Python error" not in err and "Traceback" not in err, err
    hint = [ln for ln in err.splitlines() if "--resume" in ln]
    assert len(hint) == 1 and "tuner search --study tiny" in hint[0], err
    kept = {r["trial"]: r for r in load_trials(study_dir)}
    trials = optuna.load_study(study_name="tiny", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    assert "RUNNING" not in {t.state.name for t in trials}

    out, err = finish(search(["--study", "tiny", "--resume", "--trials", str(len(kept) + 1)], reports), timeout=500)
    after = {r["trial"]: r for r in load_trials(study_dir)}
    assert len(after) == len(kept) + 1 and all(after[n] == r for n, r in kept.items()), err


def test_sigterm_to_the_whole_group_as_timeout_sends_it_stops_the_study_and_ends_every_process_it_started(
        space_search):
    """`timeout 400 tuner search ...` sends SIGTERM to its whole process group, not to the driver alone. It reached
    the study's Ray too: the GCS died under the stopping driver, which waited 60 s for it and exited 1, and a Ray
    worker was left running. Now the driver alone gets it (Ray's processes are in a group of their own), stops as
    Ctrl-C does, ends its Ray, and exits 143; the study reports and resumes."""
    import psutil

    from tests.helpers.searchproc import in_session, kill_group, report_json, trial_numbers

    proc, reports = space_search.start(tiny_space(trials=20), "--gpus-per-trial", "0", "--confirm", "0",
                                       name="tiny.yaml")
    study_dir = reports / "tiny"
    try:
        deadline = time.monotonic() + 400
        while not list(study_dir.glob("ray/run-*/trial-0000")):  # the first trial has started
            assert proc.poll() is None, f"search ended before its first trial started: {proc.communicate()}"
            assert time.monotonic() < deadline, "the first trial did not start within 400 s"
            time.sleep(0.05)
        started = psutil.Process(proc.pid).children(recursive=True)  # Ray's, the trial's
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=300)  # a hang guard: it stops in seconds
        ended = time.monotonic() + 30  # a killed process's exit is reaped by init, not at once
        left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        while left and time.monotonic() < ended:
            time.sleep(0.2)
            left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        session = [pid for pid in in_session(proc.pid) if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    finally:
        kill_group(proc)
    assert started
    assert proc.returncode == 143, err
    assert "Failed to connect to GCS" not in err and "Traceback" not in err, err
    assert not left and not session, ([p.pid for p in left], session)
    hint = [ln for ln in err.splitlines() if "--resume" in ln]
    assert len(hint) == 1 and "tuner search --study tiny" in hint[0], err
    trials = optuna.load_study(study_name="tiny", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    assert "RUNNING" not in {t.state.name for t in trials}  # a trial the signal stopped is FAIL, rerun on --resume
    code, out, err = report_json("tiny", reports)
    assert code == 0, err
    assert len(trial_numbers(out)) < 20


@pytest.mark.ray
def test_ctrl_c_during_the_probes_says_how_to_resume_and_the_resume_runs_the_baseline_first(ray_session, capsys,
                                                                                         monkeypatch, space_search):
    """Ctrl-C while the probes run (planted: the probes raise KeyboardInterrupt, as SIGINT does there) exits 130
    with the one line that resumes the study; that resume runs the baseline before any sampled trial."""
    import tuner.search._runner as runner

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(runner, "plan_loaders", interrupted)
        rc, _, err, _, reports = space_search.run(tiny_space(trials=2), "--gpus-per-trial", "0", "--confirm", "0",
                                                  name="tiny.yaml")
    assert rc == 130, err
    hint = [ln for ln in err.splitlines() if "--resume" in ln]
    assert len(hint) == 1 and "tuner search --study tiny" in hint[0], err
    assert not list((reports / "tiny").glob("trials/*/result.json"))  # no trial ran

    assert main(["search", "--study", "tiny", "--resume", "--reports-dir", str(reports)]) == 0, \
        capsys.readouterr().err
    meta = read_meta(reports / "tiny")
    records = {r["trial"]: r for r in load_trials(reports / "tiny")}
    number = meta["baseline"]["trial"]
    assert number in records and min(records) == number
    assert all(records[number]["params"][k] == v for k, v in meta["baseline"]["params"].items()
               if k in records[number]["params"])
