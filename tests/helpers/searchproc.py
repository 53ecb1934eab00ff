"""`tuner search` and `tuner report` as real `python -m tuner` processes, as a user runs them: for the tests that
kill the driver (SIGKILL, Ctrl-C), point it at a server or join a cluster. Each process gets a session of its own,
so `kill_group` ends it and the Ray helpers it started, and nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def tuner_env() -> dict[str, str]:
    """The test's environment, with this checkout's tuner first on the path and Ray quiet."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    return env


def in_session(sid: int) -> list[int]:
    """The processes of session `sid` (the one a test started its process in), this one apart."""
    pids = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if name.isdigit() and int(name) != os.getpid():
            try:
                if os.getsid(int(name)) == sid:
                    pids.append(int(name))
            except OSError:  # ended meanwhile
                continue
    return pids


def kill_group(proc: subprocess.Popen) -> None:
    """Ray's helper processes outlive a SIGKILLed driver; they are in the session we started (a study's local Ray
    in a process group of its own: tuner.search._ray_env), so end them."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in in_session(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def search(args: list[str], reports: Path, cwd: Path = REPO) -> subprocess.Popen:
    """`tuner search ARGS --reports-dir REPORTS` in its own session, run in `cwd`, output captured."""
    return subprocess.Popen([sys.executable, "-m", "tuner", "search", *args, "--reports-dir", str(reports)],
                            cwd=cwd, env=tuner_env(), start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_results(proc: subprocess.Popen, study_dir: Path, count: int, timeout: float) -> None:
    """Until the study folder holds `count` trial results; fails if the search ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while len(list(study_dir.glob("trials/*/result.json"))) < count:
        assert proc.poll() is None, f"search ended before {count} trials were recorded: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {count} trials within {timeout:.0f} s"
        time.sleep(0.1)


def sigkill(proc: subprocess.Popen) -> None:
    """kill -9 of the driver alone (as the OOM killer or a lost terminal would), then its leftovers."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_group(proc)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Its output once it ends (killed with its group if it overruns)."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)


def report_json(study: str, reports: Path) -> tuple[int, str, str]:
    """`tuner report STUDY --format json` once: (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "tuner", "report", study, "--reports-dir", str(reports),
                           "--format", "json"], cwd=REPO, env=tuner_env(), capture_output=True, text=True,
                          timeout=120)
    return done.returncode, done.stdout, done.stderr


def trial_numbers(report_stdout: str) -> list[int]:
    """The trial numbers in one `tuner report --format json` document (json.loads fails on anything else)."""
    return sorted(int(t["trial"]) for t in json.loads(report_stdout)["trials"])


def kill_and_resume(tmp_path: Path, *, space_text: str, trials: int, storage: str | None = None,
                    during: Any = None) -> dict[int, dict[str, Any]]:
    """The kill -9 scenario: a study of `trials` trials, its driver SIGKILLed after 2 results, then `--resume`.
    Asserts that it reaches the total with every trial complete, no trial recorded before the kill changed, and
    the Optuna study (in `storage`, or the study's SQLite) agreeing: no RUNNING trial, the COMPLETE ones exactly
    the recorded ones. `during(study_dir)` is entered around both runs (e.g. readers). Returns the records."""
    import contextlib

    import optuna

    from tests.helpers.studies import load_trials, stored_trials

    space = tmp_path / "tiny.yaml"
    space.write_text(space_text)
    reports = tmp_path / "reports"
    study_dir = reports / "tiny"
    extra = ["--storage", storage] if storage else []
    with (during(study_dir) if during is not None else contextlib.nullcontext()):
        # --confirm 0 (the resume keeps it): what is checked is the search's trials; a resume into the
        # confirmation is tests/search/test_search_resume.py's kill during confirmation
        first = search(["--space", str(space), "--trials", str(trials), "--confirm", "0", *extra], reports)
        try:
            wait_for_results(first, study_dir, 2, timeout=150)
        finally:
            sigkill(first)
        before = stored_trials(study_dir)
        assert 2 <= len(before) < trials

        second = search(["--study", "tiny", "--resume"], reports)
        out, err = finish(second, timeout=200)
    assert second.returncode == 0, err
    assert f"resuming with {len(before)} done" in err and "Pareto front" in out

    assert len(load_trials(study_dir)) == trials and all(r["state"] == "complete" for r in load_trials(study_dir))
    records = stored_trials(study_dir)
    # What the trial measured: not the re-runs (they come after) nor `suspect`, judged at each read against the
    # study's noise floor, which the trials after the kill move.
    searched = lambda rec: {k: v for k, v in rec.items() if k not in ("confirmed", "suspect")}  # noqa: E731
    changed = {n: sorted(k for k in set(searched(rec)) | set(searched(records[n]))
                         if searched(rec).get(k) != searched(records[n]).get(k))
               for n, rec in before.items() if searched(records[n]) != searched(rec)}
    assert not changed, f"a trial recorded before the kill changed (trial: keys) {changed}"
    url = storage or f"sqlite:///{study_dir / 'study.db'}"
    from tuner.search._storage import engine_url

    optuna_trials = optuna.load_study(study_name="tiny", storage=engine_url(url)).trials
    states = {t.number: t.state.name for t in optuna_trials}
    assert all(states[n] == "COMPLETE" for n in records)
    assert "RUNNING" not in states.values()
    # The trial the kill interrupted (if any) is FAIL, which the samplers ignore; it was not counted.
    assert sorted(n for n, s in states.items() if s == "COMPLETE") == sorted(records)
    return records


def running(pid: int) -> bool:
    """Whether process `pid` is alive (a zombie or a dead one is not: /proc/PID/stat's state)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] not in "ZX"
    except OSError:
        return False
