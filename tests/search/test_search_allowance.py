"""--study-seconds: a study's wall-time allowance. Trials stop being started when what is left would not hold one
more and the confirmation's reserve; the confirmation still runs; running trials are not killed; bad values are
refused with one line, exit 2, nothing on disk."""

from __future__ import annotations

import json
import math
import time

import optuna
import pytest

from tests.helpers.fakeengine import fake_engine_study
from tests.helpers.spaces_for_tests import fake_engine_space
from tuner.config import Budget
from tuner.errors import BudgetError, ConfigError
from tuner.search import SearchOptions, run_search
from tuner.search._allowance import MAX_TRIALS, Allowance, check_seconds, confirm_runs, margin, preflight_trial_s
from tuner.study import TrialResult

SPACE = fake_engine_space("{seconds: 1}", trials=4)


def engine_half_second(cfg, **_):
    """Fake: half a second of 'training'; throughput from the batch size, loss from beta1."""
    time.sleep(0.5)
    p = cfg.params
    return TrialResult(state="complete", throughput=float(p.batch_size) * 10, loss=1.0 - p.beta1, train_seconds=0.5)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trials_stop_being_started_when_the_time_left_is_the_confirmations():
    clock = Clock()
    a = Allowance(60.0, started=100.0, confirm_runs=4, trial_s=6.0, clock=clock)
    assert a.may_start()  # 60 left, reserve 4 x 6 = 24, one trial 6
    a.finished(2.0, whole=True)  # the estimate now comes from trials: 2.2 s, reserve 8.8 s
    a.finished(0.5, whole=False)  # a trial stopped at a rung says nothing about a whole trial's time
    a.finished(30.0, whole=True, capped=True)  # nor does one cut at its wall-time cap
    assert a.trial_estimate() == pytest.approx(2.2) and a.confirm_reserve() == pytest.approx(8.8)
    clock.now = 100.0 + 60.0 - 8.8 - 2.0  # 10.8 s left: less than one trial after the reserve
    assert not a.may_start() and a.ended
    clock.now = 100.0  # once ended, the study never starts another (time only runs one way)
    assert not a.may_start()
    assert a.to_json(spent=61.0)["ended_search"] is True
    b = Allowance(60.0, started=0.0, confirm_runs=0, trial_s=6.0)
    for seconds in (2.0, 2.0, 9.0):  # one slow config does not make every trial look slow
        b.finished(seconds, whole=True)
    assert b.trial_estimate() == pytest.approx(2.2)


def test_the_preflight_estimate_and_the_confirmation_reserve():
    assert preflight_trial_s(Budget(seconds=15), 0.01, 64, 2.0) == pytest.approx(15 + 2 + 5)
    assert preflight_trial_s(Budget(samples=6400), 0.01, 64, None) == pytest.approx(1.0 + 5)
    assert confirm_runs(1, 2) == 4 and confirm_runs(0, 2) == 0 and confirm_runs(2, 3) == 9
    assert margin(100) == 20 and margin(600) == 60


def test_an_allowance_too_short_for_one_trial_and_the_confirmation_is_refused_naming_what_fits():
    clock = Clock()
    a = Allowance(20.0, started=100.0, confirm_runs=4, trial_s=6.0, clock=clock)
    with pytest.raises(BudgetError, match=r"--study-seconds 20 leaves no room for one trial: 20 s left .*re-runs "
                                          r"reserve 24 s.* give --study-seconds 48 or more, a shorter budget"):
        a.check_fits()
    Allowance(40.0, started=100.0, confirm_runs=4, trial_s=6.0, clock=clock).check_fits()


def test_an_allowance_the_preflight_and_the_start_leave_no_trial_is_refused_at_the_planning_step():
    """Issue 34's benchmark: 78 s, 9.8 s trials, 6 re-runs reserved (58.8 s). 78 held one trial and the reserve
    (68.6 s) counted from zero, so the check passed; with the pre-flight spent and Ray still to start, the searcher
    then started no trial, not even the baseline, and the study exited 0 with nothing to export."""
    clock = Clock()
    clock.now = 105.0  # the pre-flight took 5 s
    a = Allowance(78.0, started=100.0, confirm_runs=6, trial_s=9.8, clock=clock)
    with pytest.raises(BudgetError, match=r"--study-seconds 78 leaves no room for one trial: 73 s left after the "
                                          r"pre-flight; the confirmation's 6 re-runs reserve 59 s, one trial takes "
                                          r"about 10 s and starting Ray about 10 s; give --study-seconds 101 or more"):
        a.check_fits()


def test_an_allowance_without_room_for_one_trial_is_one_line_exit_2_before_ray_nothing_on_disk(space_search):
    """1 s trials (about 6 s with set-up), the default confirmation's 4 re-runs: 38 s held one trial and the
    reserve counted from zero, not with Ray's start too. Refused at the planning step: no Ray, no folder."""
    rc, _, err, _, reports = space_search.run(SPACE, "--no-probe", "--study-seconds", "38", name="fake.yaml")
    err = err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "--study-seconds 38 leaves no room for one trial" in err[0] and "re-runs reserve" in err[0]
    assert "a shorter budget" in err[0] and "fewer confirmation re-runs" in err[0]
    assert not (reports / "fake").exists()


@pytest.mark.parametrize("bad", [0.0, -5.0, math.inf, math.nan, 1e308])
def test_values_no_clock_can_keep_are_refused(bad):
    with pytest.raises(ConfigError, match="--study-seconds must be a finite number of seconds > 0 and at most 1e"):
        check_seconds(bad)


@pytest.mark.parametrize("option", ["--budget-seconds", "--study-seconds"])
def test_a_budget_no_clock_holds_is_one_line_exit_2_nothing_on_disk(space_search, option):
    """--budget-seconds 1e308 with --study-seconds overflowed (OverflowError, exit 1) sizing the allowance."""
    values = {"--budget-seconds": "60", "--study-seconds": "600", option: "1e308"}
    rc, _, err, _, reports = space_search.run(SPACE, "--no-probe", *(x for kv in values.items() for x in kv),
                                              name="fake.yaml")
    err = err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f"{option} must be a finite number" in err[0] and "at most 1e+08" in err[0]
    assert not (reports / "fake").exists()


@pytest.mark.parametrize("value", ["0", "-1", "inf", "3"])
def test_bad_values_through_the_cli_one_line_exit_2_nothing_on_disk(ray_session, space_search, value):
    rc, _, err, _, reports = space_search.run(SPACE, "--no-probe", f"--study-seconds={value}", name="fake.yaml")
    err = err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--study-seconds" in err[0]
    assert not (reports / "fake").exists()


@pytest.mark.ray
def test_a_study_with_an_allowance_stops_starting_trials_and_still_confirms(ray_session, tmp_path, trial_engine):
    """Half-second trials, 32 s: no --trials, so as many as fit; the study ends the search itself (not an
    interruption), confirms the knee and the baseline, leaves nothing RUNNING in Optuna, records the allowance,
    and its wall time stays within S + margin. (At the pre-flight's estimate, about 6 s a trial, 2 re-runs and
    Ray's start, 25 s leaves no room for one trial and is refused.) How many trials fit depends on the machine's
    load (one, under CI's second worker, 2026-12-04): the test asks that the allowance, not the space's count of
    4, ended the search, never for a count."""
    seconds = 32.0
    summary = fake_engine_study(tmp_path, trial_engine, engine_half_second, SPACE, confirm=1, repeats=1, seed=1,
                                study_seconds=seconds)
    study = summary.study
    assert not summary.interrupted
    assert 1 <= len(study.records) < MAX_TRIALS
    # the space's count (4) was not a cap: the allowance ended the search (a study that ran its 4 trials and
    # stopped there would not say ended_search), and the summary counts what fitted, not 4
    assert summary.as_many_as_fit and summary.total == len(study.records)
    assert any(r.confirmed is not None for r in study.records)  # the confirmation ran
    assert summary.seconds <= seconds + margin(seconds)
    meta = json.loads((tmp_path / "fake" / "study.json").read_text())
    assert meta["allowance"]["seconds"] == seconds and meta["allowance"]["ended_search"] is True
    assert meta["allowance"]["spent_s"] <= seconds + margin(seconds)
    assert meta["trials"] == 4  # study.json keeps the space's count, not the allowance's cap
    ostudy = optuna.load_study(study_name="fake", storage=f"sqlite:///{tmp_path / 'fake' / 'study.db'}")
    assert not [t for t in ostudy.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING]

    # --resume with it: a fresh allowance for this invocation, which runs more trials
    before = len(study.records)
    again = run_search(SearchOptions(study="fake", reports_dir=tmp_path, resume=True, probe=False,
                                     study_seconds=seconds))
    assert not again.interrupted and len(again.study.records) > before
    meta = json.loads((tmp_path / "fake" / "study.json").read_text())
    assert meta["allowance"]["spent_s"] <= seconds + margin(seconds) and len(meta["resumed"]) == 1


@pytest.mark.ray
def test_trials_is_a_maximum_with_an_allowance(ray_session, tmp_path, trial_engine):
    """A generous allowance and --trials 2: the study stops at 2 trials, well before its time."""
    summary = fake_engine_study(tmp_path, trial_engine, engine_half_second, SPACE, confirm=0, trials=2,
                                study_seconds=600.0)
    assert len(summary.study.records) == 2 and not summary.interrupted
    meta = json.loads((tmp_path / "fake" / "study.json").read_text())
    assert meta["trials"] == 2 and meta["allowance"]["ended_search"] is False


@pytest.mark.ray
@pytest.mark.parametrize("where", ["probes", "search"])
def test_an_interrupted_study_without_trials_says_how_many_ran_not_the_cap(ray_session, tmp_path, trial_engine,
                                                                        space_search, monkeypatch, where):
    """--study-seconds without --trials asks for as many trials as fit: an interruption (planted: Ctrl-C while the
    probes run, or Tune's loop ending before any trial as Ctrl-C ends it) says how many ran, never 'of 1000'."""
    import tuner.search._runner as runner

    import sys

    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # as fake_engine_study ships its engine
    trial_engine(engine_half_second)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        if where == "probes":
            m.setattr(runner, "plan_loaders", interrupted)
        else:
            m.setattr(runner, "_fit", lambda *a, **k: None)
        rc, out, err, _, _ = space_search.run(SPACE, "--no-probe", "--confirm", "0", "--study-seconds", "60",
                                              name="fake.yaml", reports=tmp_path)
    assert rc == 130, err
    assert f"of {MAX_TRIALS}" not in out + err and f"/{MAX_TRIALS}" not in out + err
    assert "search stopped after 0 trials, interrupted" in err


@pytest.mark.ray
def test_a_study_whose_allowance_starts_no_trial_does_not_exit_0(ray_session, tmp_path, trial_engine,
                                                                  space_search, monkeypatch):
    """The pre-flight's check passed, but what came after it (planted: the probes or the parity check took the
    time, so the first trial no longer fits) left no room: the study ended with no trial and exit 0 (issue 57). It
    is one line, exit 2, and the study is kept for --resume."""
    import sys

    import ray.cloudpickle

    from tuner.search._allowance import Allowance

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trial_engine(engine_half_second)

    def spent(self):
        self.ended = True
        return False

    monkeypatch.setattr(Allowance, "may_start", spent)
    searched = space_search.run(SPACE, "--study", "fake", "--no-probe", "--confirm", "0", "--study-seconds", "600",
                                name="fake.yaml", reports=tmp_path)
    rc, err = searched.code, [ln for ln in searched.err.splitlines() if ln.startswith("tuner: ")]
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("tuner: error: no trial started: --study-seconds 600") and "--resume" in err[0]
    assert (tmp_path / "fake" / "study.json").is_file()
