"""`tuner search --resume` after the search process is killed with SIGKILL (a real `python -m tuner` process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna

from spaces_for_tests import tiny_space
from studies import load_trials

REPO = Path(__file__).resolve().parents[2]
TINY_SPACE = tiny_space(trials=6)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    """Ray's helper processes outlive a SIGKILLed driver; they are in the session we started, so end them."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _search(args: list[str], reports: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tuner", "search", *args, "--reports-dir", str(reports)],
                            cwd=REPO, env=_env(), start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_resume_after_sigkill_reaches_the_total_without_losing_or_redoing_trials(tmp_path):
    space = tmp_path / "tiny.yaml"
    space.write_text(TINY_SPACE)
    reports = tmp_path / "reports"
    study_dir = reports / "tiny"

    first = _search(["--space", str(space)], reports)
    try:
        deadline = time.monotonic() + 150
        while len(list(study_dir.glob("trials/*/result.json"))) < 2:
            assert first.poll() is None, f"search ended before it could be killed: {first.communicate()}"
            assert time.monotonic() < deadline, "no 2 trials within 150 s"
            time.sleep(0.1)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        _kill_group(first)
    before = {r["trial"]: r for r in load_trials(study_dir)}
    assert 2 <= len(before) < 6

    second = _search(["--study", "tiny", "--resume"], reports)
    try:
        out, err = second.communicate(timeout=200)
    finally:
        _kill_group(second)
    assert second.returncode == 0, err
    assert f"resuming with {len(before)} done" in err and "Pareto front" in out

    records = {r["trial"]: r for r in load_trials(study_dir)}
    assert len(records) == 6 and all(r["state"] == "complete" for r in records.values())
    searched = lambda rec: {k: v for k, v in rec.items() if k != "confirmed"}  # noqa: E731 - re-runs come after
    assert all(searched(records[n]) == searched(rec) for n, rec in before.items()), \
        "a trial recorded before the kill changed"
    trials = optuna.load_study(study_name="tiny", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    states = {t.number: t.state.name for t in trials}
    assert all(states[n] == "COMPLETE" for n in records)
    assert "RUNNING" not in states.values()
    # The trial the kill interrupted (if any) is FAIL, which the samplers ignore; it was not counted.
    assert sorted(n for n, s in states.items() if s == "COMPLETE") == sorted(records)


def test_ctrl_c_stops_the_search_cleanly_with_a_resume_hint(tmp_path):
    """SIGINT (Ctrl-C): the running trial is dropped (FAIL in Optuna, so it does not count), finished trials stay,
    and the command exits 130 naming the --resume command."""
    space = tmp_path / "tiny.yaml"
    space.write_text(TINY_SPACE)
    reports = tmp_path / "reports"
    study_dir = reports / "tiny"
    proc = _search(["--space", str(space), "--trials", "20"], reports)
    try:
        deadline = time.monotonic() + 150
        while not list(study_dir.glob("trials/*/result.json")):
            assert proc.poll() is None and time.monotonic() < deadline, "no trial finished within 150 s"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        _kill_group(proc)
    assert proc.returncode == 130, err
    assert "--study tiny" in err and "--resume" in err and "Pareto front" in out
    records = load_trials(study_dir)
    assert 1 <= len(records) < 20
    trials = optuna.load_study(study_name="tiny", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    assert "RUNNING" not in {t.state.name for t in trials}
    assert sorted(t.number for t in trials if t.state.name == "COMPLETE") == [r["trial"] for r in records]


def test_a_kill_during_confirmation_resumes_the_missing_reruns_only(tmp_path):
    space = tmp_path / "tiny.yaml"
    space.write_text(tiny_space(trials=3))
    reports = tmp_path / "reports"
    study_dir = reports / "tiny"
    first = _search(["--space", str(space), "--confirm", "2", "--repeats", "3"], reports)
    try:
        deadline = time.monotonic() + 200
        while not list(study_dir.glob("trials/*/confirm/*.json")):
            assert first.poll() is None, f"search ended before it could be killed: {first.communicate()}"
            assert time.monotonic() < deadline, "no re-run within 200 s"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        _kill_group(first)
    searched = lambda: {r["trial"]: {k: v for k, v in r.items() if k != "confirmed"}  # noqa: E731
                        for r in load_trials(study_dir)}
    trials_before = searched()
    reruns_before = {p: p.read_text() for p in study_dir.glob("trials/*/confirm/*.json")}
    assert len(trials_before) == 3 and 1 <= len(reruns_before) < 9

    second = _search(["--study", "tiny", "--resume"], reports)
    try:
        out, err = second.communicate(timeout=200)
    finally:
        _kill_group(second)
    assert second.returncode == 0, err
    assert "pick: trial" in out and "noise floor" in out
    assert searched() == trials_before  # no search trial redone
    after = sorted(study_dir.glob("trials/*/confirm/*.json"))
    from tuner.search.confirm import plan_reruns
    from tuner.study import open_study

    planned = plan_reruns(open_study(reports, "tiny"), 2)
    assert sorted({int(p.parent.parent.name) for p in after}) == sorted(planned)
    assert len(after) == 3 * len(planned)  # every planned re-run, once
    assert all(p.read_text() == text for p, text in reruns_before.items())  # the earlier re-runs kept as they were
    assert "re-run" in err and "#0000 complete" not in err  # only re-runs ran on resume
