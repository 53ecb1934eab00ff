"""`tuner search --resume` after the search process is killed with SIGKILL (a real `python -m tuner` process)."""

from __future__ import annotations

import os
import signal

import optuna

from searchproc import finish, kill_and_resume, search, sigkill, wait_for_results
from spaces_for_tests import tiny_space
from studies import load_trials

TINY_SPACE = tiny_space(trials=6)


def test_resume_after_sigkill_reaches_the_total_without_losing_or_redoing_trials(tmp_path):
    kill_and_resume(tmp_path, space_text=TINY_SPACE, trials=6)


def test_ctrl_c_stops_the_search_cleanly_with_a_resume_hint(tmp_path):
    """SIGINT (Ctrl-C): the running trial is dropped (FAIL in Optuna, so it does not count), finished trials stay,
    and the command exits 130 naming the --resume command."""
    space = tmp_path / "tiny.yaml"
    space.write_text(TINY_SPACE)
    reports = tmp_path / "reports"
    study_dir = reports / "tiny"
    proc = search(["--space", str(space), "--trials", "20"], reports)
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
