"""The Pareto-aware successive halving of tuner.search._scheduler, on planted trials: who stops at a rung, who goes on.

Throughput is maximized and loss minimized unless a test says otherwise; values are (throughput, loss).
"""

from __future__ import annotations

import sys

import pytest

from tuner.search._scheduler import ParetoASHA, RungEntry, crowding, fronts, goes_on, ranking, rung_budgets
from tuner.search._protocol import ORDER_KEY, RungReport, WindowReport, from_tune, to_tune
from tuner.study import TrialRecord
from tuner.study import Objective

THR = Objective(metric="throughput", direction="max")
LOSS = Objective(metric="loss", direction="min")
UP_DOWN = [True, False]  # throughput up, loss down


# --- the ladder ------------------------------------------------------------------------------------------------


def test_rungs_grow_by_eta_and_end_at_the_trial_budget() -> None:
    assert rung_budgets(2, 3, 18) == [2.0, 6.0, 18.0]
    assert rung_budgets(2, 3, 45) == [2.0, 6.0, 18.0, 45.0]
    assert rung_budgets(5, 2, 15) == [5.0, 10.0, 15.0]
    assert rung_budgets(20, 3, 15) == [15.0]  # a first rung past the budget: one rung, the whole trial


@pytest.mark.parametrize("bad", [(0, 3, 18), (2, 1, 18), (2, 3, 0)])
def test_a_ladder_that_cannot_climb_is_refused(bad) -> None:
    with pytest.raises(ValueError):
        rung_budgets(*bad)


# --- the ranking at a rung -------------------------------------------------------------------------------------


def test_non_dominated_sorting_respects_each_direction() -> None:
    pts = [(100.0, 1.0), (50.0, 2.0), (200.0, 3.0), (40.0, 4.0)]
    assert fronts(pts, UP_DOWN) == [[0, 2], [1], [3]]
    # the same points with throughput minimized and loss maximized: the order turns over
    assert fronts(pts, [False, True]) == [[3], [1, 2], [0]]


def test_crowding_keeps_the_ends_of_a_front_and_ranks_the_lonely_inner_point_first() -> None:
    # all on one front (more throughput costs loss); point 2 sits in a wide gap, point 1 is crowded
    pts = [(100.0, 1.0), (110.0, 1.1), (300.0, 2.0), (400.0, 4.0), (390.0, 3.9)]
    assert fronts(pts, UP_DOWN) == [[0, 1, 2, 3, 4]]
    dist = crowding(pts, [0, 1, 2, 3, 4], UP_DOWN)
    assert dist[0] == dist[3] == float("inf")
    assert dist[2] > dist[1] and dist[2] > dist[4]
    order = ranking(pts, UP_DOWN)
    assert order[:2] == [0, 3] and order[2] == 2


def test_a_dominated_trial_stops_at_a_full_rung() -> None:
    rung = [(100.0, 1.0), (200.0, 3.0), (50.0, 2.0)]  # the last is dominated by the first
    assert not goes_on(2, rung, UP_DOWN, eta=3)


@pytest.mark.parametrize("first", [True, False])
def test_a_trial_on_either_end_of_the_front_goes_on_even_when_the_quota_is_spent(first) -> None:
    # three trials on one front, eta 3: a quota of 1, and both ends tie on crowding distance (infinite). Yet
    # both ends go on, whichever arrived first: nobody beats them on both objectives; the inner one stops.
    fast, accurate, inner = (400.0, 4.0), (100.0, 1.0), (250.0, 2.5)
    rung = [fast, accurate, inner] if first else [accurate, fast, inner]
    assert [goes_on(i, rung, UP_DOWN, eta=3) for i in range(3)] == [True, True, False]


def test_the_fastest_trial_stops_once_another_is_as_fast_and_better_on_quality() -> None:
    rung = [(100.0, 1.0), (400.0, 4.0), (250.0, 2.5), (400.0, 3.5)]  # trial 3 dominates trial 1 there
    assert not goes_on(1, rung, UP_DOWN, eta=3)
    assert goes_on(3, rung, UP_DOWN, eta=3)


def test_within_the_quota_goes_on_and_beyond_it_stops() -> None:
    # nine trials, eta 3: the top ceil(9/3) = 3 go on. Front: 0, 1, 2 (ends 0 and 2, then 1); the rest dominated.
    rung = [(100.0, 1.0), (200.0, 2.0), (300.0, 3.0)] + [(90.0 - i, 3.5 + i) for i in range(6)]
    assert [goes_on(i, rung, UP_DOWN, eta=3) for i in range(9)] == [True] * 3 + [False] * 6


def test_with_fewer_than_eta_trials_at_a_rung_everyone_goes_on() -> None:
    rung = [(100.0, 1.0), (50.0, 2.0)]  # the second is dominated, but 2 < eta = 3: nothing to cut yet
    assert goes_on(1, rung, UP_DOWN, eta=3)
    assert goes_on(0, rung[:1], UP_DOWN, eta=3)


def test_a_trial_with_a_missing_or_non_finite_value_ranks_last_even_when_fastest() -> None:
    rung = [(100.0, 1.0), (200.0, 3.0), (300.0, float("nan"))]
    assert not goes_on(2, rung, UP_DOWN, eta=3)


# --- the scheduler's own bookkeeping --------------------------------------------------------------------------


def scheduler(**kw) -> ParetoASHA:
    return ParetoASHA([THR, LOSS], [1.0, 3.0, 9.0], 3.0, **kw)


def test_the_scheduler_decides_asynchronously_as_trials_arrive() -> None:
    s = scheduler()
    assert s.decide("0", 0, [100.0, 1.0])  # alone
    assert s.decide("1", 0, [200.0, 3.0])  # two: too few to cut
    assert not s.decide("2", 0, [50.0, 2.0])  # three, dominated by trial 0: stops without waiting for more
    assert s.decide("3", 0, [300.0, 0.5])  # dominates everyone
    assert s.decide("0", 2, [120.0, 0.9])  # the top rung: recorded, nothing decided
    assert s.decisions == [("0", 0, True), ("1", 0, True), ("2", 0, False), ("3", 0, True)]
    assert s.stopped_at("2") == 0 and s.stopped_at("0") is None
    assert [e.trial for e in s.at_rung(2)] == ["0"]


def test_saved_and_rebuilt_schedulers_decide_as_the_original_would(tmp_path) -> None:
    s = scheduler()
    for i, v in enumerate([(100.0, 1.0), (200.0, 3.0), (50.0, 2.0)]):
        s.decide(str(i), 0, v)
    path = tmp_path / "scheduler.json"
    s.save(str(path))
    restored = scheduler()
    restored.restore(str(path))
    rebuilt = scheduler(entries=[RungEntry(t, r, v, on) for t, r, v, on in
                                 [(e.trial, e.rung, e.values, e.went_on) for e in s.entries]])
    assert restored.entries == rebuilt.entries == s.entries
    # the next trial meets the same rung in all three: dominated by trial 0 and beyond the quota of 2 of 4
    assert [x.decide("3", 0, [40.0, 2.5]) for x in (s, restored, rebuilt)] == [False, False, False]


def test_a_trial_reporting_the_same_rung_again_replaces_its_record() -> None:
    """After a resume a trial that was running at the kill closes its rung again: it is one trial there, not two."""
    s = scheduler()
    s.decide("0", 0, [100.0, 1.0])
    s.decide("0", 0, [101.0, 1.0])
    assert len(s.at_rung(0)) == 1 and s.at_rung(0)[0].values == (101.0, 1.0)


# --- through Ray Tune --------------------------------------------------------------------------------------------

PLANTED = {  # trial number -> (throughput, loss) at every rung
    0: (100.0, 1.0),
    1: (200.0, 3.0),
    2: (50.0, 2.0),  # dominated by trial 0 at rung 0: stops there
    3: (300.0, 0.5),
}


def planted_trainable(config: dict) -> None:
    from ray import tune

    number = config[ORDER_KEY]["trial"]
    thr, loss = PLANTED[number]
    for rung, budget in enumerate([1.0, 3.0, 9.0]):  # a window: no rung, no decision
        tune.report(to_tune(WindowReport(budget_used=budget - 0.5, window=rung, samples=1, throughput=thr)))
        tune.report(to_tune(RungReport(rung=rung, budget_used=budget, values={"throughput": thr, "loss": loss},
                                       feasible=True, record=TrialRecord(trial=number, state="stopped"))))


@pytest.mark.ray
def test_ray_tune_stops_the_dominated_trial_at_its_rung_and_runs_the_others_to_the_top(ray_session, tmp_path):
    import ray.cloudpickle
    from ray import tune

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    s = scheduler()
    tuner = tune.Tuner(
        planted_trainable,
        param_space={ORDER_KEY: {"trial": tune.grid_search(list(PLANTED)), "params": {}}},
        tune_config=tune.TuneConfig(scheduler=s, max_concurrent_trials=1, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    )
    grid = tuner.fit()
    last_rung = {r.config[ORDER_KEY]["trial"]: from_tune(r.metrics).rung for r in grid}
    assert last_rung == {0: 2, 1: 2, 2: 0, 3: 2}
    assert len(s.entries) == 3 * 3 + 1  # one entry per rung report; windows between them decide nothing
    assert ("2", 0, False) in s.decisions
    assert all(on for t, _, on in s.decisions if t != "2")
