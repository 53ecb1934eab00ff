"""The race of `--scheduler race` (issue 34) on planted curves: a trial's training seconds at each window, and the
training seconds at which it would reach the target (None: never). Finished trials set the best time to target."""

from __future__ import annotations

import json

import pytest

from tuner.config import Budget
from tuner.errors import ConfigError
from tuner.schedule import CONTINUE, PlanRequest, Progress, Race, build_scheduler, plan_scheduler, saved_scheduler
from tuner.study import StudyFolder, TrialRecord
from tuner.target import NOT_REACHED

WINDOWS = [1.0 * i for i in range(1, 41)]  # a window closes every training second, up to a 40 s budget


def run(race: Race, trial: str, reaches_at: float | None) -> tuple[float | None, str | None]:
    """Drive one trial's planted curve through the race: windows until it reaches the target (it stops itself
    there), the budget ends, or the race stops it. Returns (time to target or None, the race's reason or None)."""
    for t in WINDOWS:
        if reaches_at is not None and t >= reaches_at:
            race.decide(Progress(trial=trial, train_seconds=reaches_at, final=True, time_to_target=reaches_at))
            return reaches_at, None
        d = race.decide(Progress(trial=trial, budget_used=t, train_seconds=t))
        if d.stops:
            assert d.ends_as == NOT_REACHED
            return None, d.reason
    race.decide(Progress(trial=trial, train_seconds=WINDOWS[-1], final=True))
    return None, None


def test_a_slow_trial_stops_past_the_best_time_to_target_times_the_margin() -> None:
    race = Race(margin=1.5)
    assert run(race, "0", 10.0) == (10.0, None)  # the first trial sets the best: 10 s
    stopped = []
    for t in WINDOWS:
        d = race.decide(Progress(trial="1", budget_used=t, train_seconds=t))
        if d.stops:
            stopped.append(t)
            break
    assert stopped == [16.0]  # the first window past 1.5 x 10 s, not one before
    assert "race" in (d.reason or "") and "10 s" in (d.reason or "") and "1.5 x" in (d.reason or "")


def test_a_trial_still_inside_the_margin_is_never_stopped() -> None:
    race = Race(margin=1.5, best=10.0)
    for t in [0.5, 5.0, 10.0, 14.9, 15.0]:  # 15.0 = exactly best x margin: still inside
        assert race.decide(Progress(trial="1", train_seconds=t)) == CONTINUE
    assert race.decide(Progress(trial="1", train_seconds=15.01)).stops


@pytest.mark.parametrize("curves", [
    [10.0, 7.0, 10.0, 4.0],  # each later winner reaches it before the best so far; a tie-ish one (10 < 1.5 x 7)
    [20.0, 19.0, 28.0, 5.0, 6.0],  # a trial inside the margin (28 < 1.5 x 19) reaches it late, and is not stopped
])
def test_a_trial_that_would_have_won_is_never_stopped(curves) -> None:
    """Every trial that reaches the target within best-so-far x margin keeps its time; so does the eventual
    winner (it reaches it before the best so far, so before the line)."""
    race = Race(margin=1.5)
    best = None
    for i, reach in enumerate(curves):
        ttt, reason = run(race, str(i), reach)
        assert best is None or reach <= best * 1.5  # every planted trial reaches it inside the line
        assert ttt == reach and reason is None, (i, reach, best)
        best = reach if best is None else min(best, reach)
    assert race.best == min(curves)


def test_without_a_finished_trial_nothing_is_stopped_and_a_not_reached_trial_sets_no_best() -> None:
    race = Race()
    assert run(race, "0", None) == (None, None)  # ran its whole budget: no time to target, no line yet
    assert race.best is None and race.decide(Progress(trial="1", train_seconds=1e6)) == CONTINUE


def test_the_race_needs_a_target_and_keeps_its_margin_in_the_plan() -> None:
    with pytest.raises(ConfigError, match="--scheduler race races trials to a target: give --target"):
        plan_scheduler("race", Budget(seconds=20))
    with pytest.raises(ConfigError, match="--min-budget and --eta"):
        plan_scheduler("race", Budget(seconds=20), {"min_budget": 2.0}, target=True)
    for low in (0.5, 1.0):  # at 1 a trial as fast as the best, read at a busier moment, would be stopped
        with pytest.raises(ConfigError, match=r"--race-margin must be > 1 \(got "):
            Race.plan("race", PlanRequest(budget=Budget(seconds=20), given={"margin": low}, target=True))
    with pytest.raises(ConfigError, match="--race-margin sets the margin of --scheduler race"):
        plan_scheduler("fifo", Budget(seconds=20), {"margin": 2.0}, target=True)
    assert plan_scheduler("race", Budget(seconds=20), {"margin": 2.0}, target=True).margin == 2.0
    plan = plan_scheduler("race", Budget(seconds=20), target=True)
    assert plan.to_json()["margin"] == 1.5 and saved_scheduler(plan.to_json()) == plan
    assert "1.5 x the best time to target" in plan.describe()


def test_a_resumed_race_starts_from_the_best_time_to_target_the_folder_recorded(tmp_path) -> None:
    folder = StudyFolder(tmp_path / "s")
    folder.path.mkdir(parents=True)
    for n, ttt in enumerate([12.0, None, 8.0]):
        metrics = {"time_to_target": ttt} if ttt is not None else {}
        record = TrialRecord(trial=n, state="complete" if ttt else NOT_REACHED, metrics=metrics)
        folder.write_file(folder.trial_dir(n) / "result.json", json.dumps(record.to_json()))
    race = build_scheduler(plan_scheduler("race", Budget(seconds=20), target=True), [], folder)
    assert isinstance(race, Race) and race.best == 8.0 and race.limit == 12.0
