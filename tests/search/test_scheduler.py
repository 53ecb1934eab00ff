"""The Ray Tune adapter of tuner's schedulers (tuner.search._scheduler): each Tune result becomes a Progress, each
Decision Tune's answer. Driven directly with planted reports (no Ray session), then once through Ray Tune."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from tuner.schedule import (CONTINUE, PAUSE, STOP, Decision, ParetoASHA, Progress, Race, Scheduler, register,
                            unregister)
from tuner.search._protocol import (FinalReport, RungReport, TrialLimits, TrialOrder, WindowReport, final_record,
                                    from_tune, to_tune)
from tuner.search._scheduler import TuneScheduler
from tuner.study import Objective, TrialRecord
from tuner.target import NOT_REACHED

THR = Objective(metric="throughput", direction="max")
LOSS = Objective(metric="loss", direction="min")


@dataclass
class FakeTrial:
    """What the adapter reads of a Tune trial: its config (the order), its id and its last result."""

    number: int
    trial_id: str = "t"
    config: dict[str, Any] = field(default_factory=dict)
    last_result: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.config = self.config or TrialOrder(trial=self.number, params={"batch_size": 8},
                                                limits=TrialLimits(wall_limit_s=30.0, rungs=(1.0, 3.0))).to_config()


def window(t: float) -> dict[str, Any]:
    return to_tune(WindowReport(budget_used=t, window=int(t), samples=int(100 * t), throughput=100.0,
                                train_seconds=t))


class Planted(Scheduler):
    """A test scheduler: answers from a planted script and keeps every Progress it was asked about."""

    help = "a planted script (tests only)"

    def __init__(self, answers: list[Decision] = ()) -> None:
        self.answers, self.seen = list(answers), []

    def decide(self, progress: Progress) -> Decision:
        self.seen.append(progress)
        return self.answers.pop(0)

    def ladder(self, trial: str) -> tuple[float, ...] | None:
        return (2.0, 4.0, 8.0) if trial == "1" else None  # trial 1 gets its own rungs


@pytest.fixture
def planted_registered():
    register("planted", Planted)  # one line: `--scheduler planted` now plans, builds and runs it
    yield
    unregister("planted")


def test_a_scheduler_registered_in_one_line_is_driven_through_the_adapter_by_planted_reports(planted_registered):
    from ray.tune.schedulers import TrialScheduler

    from tuner.config import Budget
    from tuner.schedule import build_scheduler, plan_scheduler

    plan = plan_scheduler("planted", Budget(seconds=9))
    inner = build_scheduler(plan, [THR, LOSS], None)
    assert isinstance(inner, Planted) and plan.describe() == "planted"
    inner.answers = [CONTINUE, PAUSE, STOP]
    adapter = TuneScheduler(inner, [THR, LOSS])
    trial = FakeTrial(0)
    rung = to_tune(RungReport(rung=0, budget_used=1.0, values={"throughput": 120.0, "loss": 0.5}, feasible=True,
                              result=TrialRecord(trial=0, state="stopped")))
    answers = [adapter.on_trial_result(None, trial, r) for r in (window(0.5), rung, window(1.5))]
    assert answers == [TrialScheduler.CONTINUE, TrialScheduler.PAUSE, TrialScheduler.STOP]
    assert inner.seen == [Progress(trial="0", budget_used=0.5, train_seconds=0.5),
                          Progress(trial="0", budget_used=1.0, rung=0, values=(120.0, 0.5)),
                          Progress(trial="0", budget_used=1.5, train_seconds=1.5)]


def test_a_scheduler_gives_a_trial_its_own_ladder_before_it_starts() -> None:
    adapter = TuneScheduler(Planted([]), [THR])
    one, two = FakeTrial(1), FakeTrial(2)
    for t in (one, two):
        adapter.on_trial_add(None, t)
    assert TrialOrder.from_config(one.config).limits.rungs == (2.0, 4.0, 8.0)
    assert TrialOrder.from_config(two.config).limits.rungs == (1.0, 3.0)  # the plan's, as the searcher set them
    assert TrialOrder.from_config(one.config).limits.wall_limit_s == 30.0  # the rest of the order is kept


def test_a_trial_the_race_stops_ends_not_reached_with_the_race_as_its_reason() -> None:
    from ray.tune.schedulers import TrialScheduler

    adapter = TuneScheduler(Race(margin=1.5), [THR, LOSS])
    winner = FakeTrial(0, trial_id="a")
    final = to_tune(FinalReport(values={"throughput": 100.0, "loss": 0.5}, feasible=True,
                                record=TrialRecord(trial=0, state="complete", metrics={"time_to_target": 4.0})))
    assert adapter.on_trial_result(None, winner, final) == TrialScheduler.CONTINUE
    slow = FakeTrial(1, trial_id="b")
    answers = [adapter.on_trial_result(None, slow, window(t)) for t in (2.0, 4.0, 6.0)]
    assert answers == [TrialScheduler.CONTINUE, TrialScheduler.CONTINUE, TrialScheduler.CONTINUE]  # 6 = 1.5 x 4
    last = window(6.5)
    assert adapter.on_trial_result(None, slow, last) == TrialScheduler.STOP
    slow.last_result = dict(last)  # what Ray keeps, then hands the scheduler first when it stops the trial
    adapter.on_trial_complete(None, slow, slow.last_result)
    record = final_record(slow.last_result)
    assert record is not None and record.state == NOT_REACHED and record.trial == 1
    assert record.error and "race" in record.error and "4 s" in record.error
    assert record.params == {"batch_size": 8} and record.get("train_seconds") == 6.5
    report = from_tune(slow.last_result)
    assert isinstance(report, FinalReport) and not report.feasible and report.stopped  # told to Optuna PRUNED


def test_the_race_leaves_a_trial_that_met_the_target_to_read_its_last_windows() -> None:
    """A trial that meets the target before its fewest windows trains on to them (tuner.train.trial): its window
    reports past the race's line say when it met the target, and the race does not call it not reached."""
    from ray.tune.schedulers import TrialScheduler

    adapter = TuneScheduler(Race(margin=1.5), [THR, LOSS])
    final = to_tune(FinalReport(values={"throughput": 100.0, "loss": 0.5}, feasible=True,
                                record=TrialRecord(trial=0, state="complete", metrics={"time_to_target": 4.0})))
    adapter.on_trial_result(None, FakeTrial(0, trial_id="a"), final)
    late = to_tune(WindowReport(budget_used=7.0, window=3, samples=700, throughput=100.0, train_seconds=7.0,
                                time_to_target=5.5))  # met at 5.5 s (inside 1.5 x 4 s), its third window at 7 s
    assert from_tune(late).time_to_target == 5.5
    assert adapter.on_trial_result(None, FakeTrial(1, trial_id="b"), late) == TrialScheduler.CONTINUE
    assert adapter.on_trial_result(None, FakeTrial(2, trial_id="c"), window(7.0)) == TrialScheduler.STOP


# --- through Ray Tune --------------------------------------------------------------------------------------------

PLANTED = {  # trial number -> (throughput, loss) at every rung
    0: (100.0, 1.0),
    1: (200.0, 3.0),
    2: (50.0, 2.0),  # dominated by trial 0 at rung 0: stops there
    3: (300.0, 0.5),
}


def planted_trainable(config: dict) -> None:
    from ray import tune

    number = TrialOrder.from_config(config).trial
    thr, loss = PLANTED[number]
    for rung, budget in enumerate([1.0, 3.0, 9.0]):  # a window: no rung, no decision
        tune.report(to_tune(WindowReport(budget_used=budget - 0.5, window=rung, samples=1, throughput=thr)))
        tune.report(to_tune(RungReport(rung=rung, budget_used=budget, values={"throughput": thr, "loss": loss},
                                       feasible=True, result=TrialRecord(trial=number, state="stopped"))))


@pytest.mark.ray
def test_ray_tune_stops_the_dominated_trial_at_its_rung_and_runs_the_others_to_the_top(ray_session, tmp_path):
    import ray.cloudpickle
    from ray import tune

    from tuner.search._protocol import ORDER_KEY

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    s = ParetoASHA([THR, LOSS], [1.0, 3.0, 9.0], 3.0)
    tuner = tune.Tuner(
        planted_trainable,
        param_space={ORDER_KEY: {"trial": tune.grid_search(list(PLANTED)), "params": {}}},
        tune_config=tune.TuneConfig(scheduler=TuneScheduler(s, [THR, LOSS]), max_concurrent_trials=1,
                                    reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    )
    grid = tuner.fit()
    last_rung = {r.config[ORDER_KEY]["trial"]: from_tune(r.metrics).rung for r in grid}
    assert last_rung == {0: 2, 1: 2, 2: 0, 3: 2}
    assert len(s.entries) == 3 * 3 + 1  # one entry per rung report; windows between them decide nothing
    assert ("2", 0, False) in s.decisions
    assert all(on for t, _, on in s.decisions if t != "2")
