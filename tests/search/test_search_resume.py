"""`tuner search --resume` after the search process is killed with SIGKILL (a real `python -m tuner` process)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import optuna
import pytest

from tests.helpers.searchproc import finish, kill_and_resume, search, sigkill, wait_for_results
from tests.helpers.spaces_for_tests import tiny_space
from tests.helpers.studies import load_trials, stored_trials

TINY_SPACE = tiny_space(trials=6)


def test_resume_after_sigkill_reaches_the_total_without_losing_or_redoing_trials(tmp_path):
    # kill_and_resume also checks that trials recorded before the kill are unchanged and Optuna agrees
    records = kill_and_resume(tmp_path, space_text=TINY_SPACE, trials=6)
    assert len(records) == 6 and all(r["state"] == "complete" and r["throughput"] > 0 for r in records.values())
    assert 0 in records  # the baseline, run before the kill, was not redone under another number


def test_ctrl_c_stops_the_search_cleanly_with_a_resume_hint(space_search):
    """SIGINT (Ctrl-C): the running trial is dropped (FAIL in Optuna, so it does not count), finished trials stay,
    and the command exits 130 naming the --resume command."""
    proc, reports = space_search.start(TINY_SPACE, "--trials", "20", name="tiny.yaml")
    study_dir = reports / "tiny"
    try:
        wait_for_results(proc, study_dir, 1, timeout=150)
        os.kill(proc.pid, signal.SIGINT)
    except BaseException:
        sigkill(proc)
        raise
    out, err = finish(proc, timeout=60)
    assert proc.returncode == 130, err
    assert "--study tiny" in err and "--resume" in err and "Pareto front" in out
    records = load_trials(study_dir)
    assert 1 <= len(records) < 20
    trials = optuna.load_study(study_name="tiny", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    assert "RUNNING" not in {t.state.name for t in trials}
    assert sorted(t.number for t in trials if t.state.name == "COMPLETE") == [r["trial"] for r in records]


def test_a_kill_during_confirmation_resumes_the_missing_reruns_only(space_search):
    first, reports = space_search.start(tiny_space(trials=3), "--confirm", "2", "--repeats", "2", name="tiny.yaml")
    study_dir = reports / "tiny"
    try:
        deadline = time.monotonic() + 200
        while not list(study_dir.glob("trials/*/confirm/*.json")):
            assert first.poll() is None, f"search ended before it could be killed: {first.communicate()}"
            assert time.monotonic() < deadline, "no re-run within 200 s"
            time.sleep(0.05)
    finally:
        sigkill(first)
    searched = lambda: {n: {k: v for k, v in r.items() if k not in ("confirmed", "suspect")}  # noqa: E731
                        for n, r in stored_trials(study_dir).items()}
    trials_before = searched()
    reruns_before = {p: p.read_text() for p in study_dir.glob("trials/*/confirm/*.json")}
    assert len(trials_before) == 3 and 1 <= len(reruns_before) < 6

    out, err = finish(search(["--study", "tiny", "--resume"], reports), timeout=200)
    assert "pick: trial" in out and "noise floor" in out, err
    assert searched() == trials_before  # no search trial redone
    from tuner.search._confirm import MAX_EXTRA, confirm_set, plan_reruns
    from tuner.analysis import open_study

    study = open_study(reports, "tiny")
    planned, confirmed = plan_reruns(study, 2), confirm_set(study, 2)  # plus any knee the re-runs moved to
    after = sorted(study_dir.glob("trials/*/confirm/*.json"))
    assert sorted({int(p.parent.parent.name) for p in after}) == sorted(confirmed)
    assert confirmed[:len(planned)] == planned and len(confirmed) <= len(planned) + MAX_EXTRA
    # every re-run once: 2 a trial, plus one tie pass of every planned trial when a cost rule tied them, and up to
    # OUTLIER_PASSES more while one of their re-runs is an outlier (tuner.search._confirm.tie_pass), numbered on
    # from the planned ones
    from tuner.search._confirm import OUTLIER_PASSES, TIE_PASSES
    counts = {t: sorted(p.name for p in after if int(p.parent.parent.name) == t) for t in confirmed}
    for t, names in counts.items():
        assert names == [f"{i:02d}.json" for i in range(len(names))], names
    if confirmed == planned:  # no moved pick, whose round re-reads the baseline (test_confirm covers those)
        each = {len(counts[t]) for t in planned}
        assert len(each) == 1 and 2 <= min(each) <= 2 + TIE_PASSES + OUTLIER_PASSES, counts  # a pass is read whole
    assert all(p.read_text() == text for p, text in reruns_before.items())  # the earlier re-runs kept as they were
    assert "re-run" in err and "#0000 complete" not in err  # only re-runs ran on resume


def test_a_resumed_study_keeps_the_resource_options_it_was_given(tmp_path, ray_session, trial_engine):
    """--concurrency (and --cpus-per-trial, --gpus-per-trial) given to the first run holds on --resume unless
    given again; study.json keeps what was asked apart from what the machine gave."""
    import io
    import json

    from rich.console import Console

    from tests.helpers.fakeengine import fake_engine_study
    from tests.search.test_confirm import engine_logged
    from tuner.search import SearchOptions, run_search

    fake_engine_study(tmp_path, trial_engine, engine_logged, trials=2, confirm=0, concurrency=2, cpus_per_trial=1)
    meta = json.loads((tmp_path / "fake" / "study.json").read_text())
    assert meta["resources"]["asked"] == {"concurrency": 2, "cpus_per_trial": 1}
    out = io.StringIO()
    run_search(SearchOptions(study="fake", reports_dir=tmp_path, resume=True, trials=3, confirm=0, probe=False),
               console=Console(file=out, width=300))
    assert "2 at a time, each on 1 CPU" in out.getvalue()
    assert len(load_trials(tmp_path / "fake")) == 3
    out = io.StringIO()
    run_search(SearchOptions(study="fake", reports_dir=tmp_path, resume=True, trials=4, confirm=0, probe=False,
                             concurrency=1), console=Console(file=out, width=300))
    assert "1 at a time" in out.getvalue()  # given again: the new value


@pytest.fixture(scope="module")
def finished_study(ray_session, tmp_path_factory):
    """One finished two-trial study a fake engine ran (read-only: each test resumes a copy of its folder)."""
    from tests.helpers.fakeengine import engine_user, fake_engine_study

    reports = tmp_path_factory.mktemp("finished")
    with pytest.MonkeyPatch.context() as m:
        fake_engine_study(reports, engine_user(m), _engine, trials=2, confirm=0)
    return reports / "fake"


def _engine(cfg, **_):
    from tuner.study import TrialResult

    p = cfg.params
    return TrialResult(state="complete", throughput=float(p.batch_size) * 10, loss=1.0 - p.beta1, train_seconds=0.01)


def _break_meta(key: str, value: object, named: str | None = None):
    def apply(study_dir: Path) -> str:
        meta = json.loads((study_dir / "study.json").read_text())
        target = meta
        *path, last = key.split(".")
        for k in path:
            target = target[k]
        target[last] = value
        (study_dir / "study.json").write_text(json.dumps(meta))
        return f"{study_dir / 'study.json'}: {named or key}: "
    return apply


def _cut_rungs(study_dir: Path) -> str:
    """A rung scheduler's study (asha reads every trial's rung entries on --resume) with one rungs.json cut short."""
    meta = json.loads((study_dir / "study.json").read_text())
    meta["scheduler"] = {"name": "asha", "eta": 2.0, "min_budget": 32.0, "rungs": [32.0, 64.0]}
    (study_dir / "study.json").write_text(json.dumps(meta))
    path = study_dir / "trials" / "0001" / "rungs.json"
    path.write_text('[{"trial": "1", "rung": 0, "val')  # a truncated file (a disk that filled, a bad copy)
    return f"{path}: the trial's rung entries do not read"


@pytest.mark.ray
@pytest.mark.parametrize("damage", [
    _break_meta("baseline.trial", "zero"),
    _break_meta("scheduler", {"rungs": "x"}, "scheduler.rungs"),
    _break_meta("domains.beta1", {"type": "float", "low": "x", "high": 0.9}, "domains.beta1.low"),
    _break_meta("domains.beta1.low", 0.95, "domains.beta1"),
    _cut_rungs,
], ids=["baseline.trial", "scheduler.rungs", "domain expression", "domain low>high", "truncated rungs.json"])
def test_resume_refuses_a_damaged_study_folder_before_any_trial(finished_study, tmp_path, capsys, damage):
    """A wrong type in study.json or a truncated rungs.json: --resume spent a trial and then crashed (or raised
    JSONDecodeError), exit 1. Now one line naming the file and key, exit 2, nothing run or written."""
    import shutil

    from tuner.cli import main

    study_dir = tmp_path / "reports" / "fake"
    shutil.copytree(finished_study, study_dir, ignore=shutil.ignore_patterns("ray"))
    named = damage(study_dir)
    before = sorted((str(p), p.read_bytes()) for p in study_dir.rglob("*") if p.is_file())
    code = main(["search", "--study", "fake", "--resume", "--trials", "3", "--no-probe",
                 "--reports-dir", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"tuner: error: {named}"), err
    assert len(err.strip().splitlines()) == 1
    assert sorted((str(p), p.read_bytes()) for p in study_dir.rglob("*") if p.is_file()) == before
