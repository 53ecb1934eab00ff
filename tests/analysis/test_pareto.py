"""Pareto ranks and the --pick rules: what `tuner export` chooses and why."""

import math

import pytest

from tuner.errors import StudyError
from tuner.study import Objective, TrialRecord
from tuner.analysis import choose, knee, pareto_ranks

OBJ = [Objective(metric="throughput", direction="max"), Objective(metric="fid", direction="min")]


def rec(n, thr, fid, state="complete"):
    return TrialRecord(trial=n, state=state, metrics={"throughput": thr, "fid": fid})


def test_ranks_front_then_layers_and_skips_unscored_trials():
    records = [
        rec(0, 400, 30), rec(1, 900, 40), rec(2, 700, 22), rec(3, 300, 18), rec(4, 35, 25),
        rec(5, None, None, "oom"), rec(6, 850, None, "diverged"), rec(7, 500, math.nan), rec(8, 500, math.inf),
    ]
    ranks = pareto_ranks(records, OBJ)
    assert {t for t, r in ranks.items() if r == 0} == {1, 2, 3}
    assert ranks[0] == 1 and ranks[4] == 1
    assert not {5, 6, 7, 8} & set(ranks)  # failed or non-finite: not ranked


def test_equal_points_share_the_front():
    ranks = pareto_ranks([rec(0, 500, 20), rec(1, 500, 20), rec(2, 400, 25)], OBJ)
    assert ranks == {0: 0, 1: 0, 2: 1}


def test_knee_is_the_balanced_point_and_ties_go_to_throughput():
    front = [rec(1, 900, 40), rec(2, 700, 22), rec(3, 300, 18)]
    assert knee(front, OBJ).trial == 2
    # symmetric front: the two middle points are equally far from the ideal; the faster one wins
    sym = [rec(0, 100, 10), rec(1, 200, 20), rec(2, 300, 30), rec(3, 400, 40)]
    assert knee(sym, OBJ).trial == 2
    assert knee([rec(5, 10, 10)], OBJ).trial == 5


def test_choose_rules_and_min_quality():
    records = [rec(0, 400, 30), rec(1, 900, 40), rec(2, 700, 22), rec(3, 300, 18), rec(4, 1000, None, "oom")]
    assert choose(records, OBJ, "knee").trial == 2
    assert choose(records, OBJ, "throughput").trial == 1
    assert choose(records, OBJ, "quality").trial == 3
    assert choose(records, OBJ, "throughput", min_quality=30).trial == 2  # fid <= 30
    assert choose(records, OBJ, "knee", min_quality=20).trial == 3


def test_min_quality_for_a_metric_to_maximize():
    obj = [Objective(metric="throughput", direction="max"), Objective(metric="accuracy", direction="max")]
    records = [TrialRecord(trial=0, state="complete", metrics={"throughput": 900, "accuracy": 0.80}),
               TrialRecord(trial=1, state="complete", metrics={"throughput": 500, "accuracy": 0.95})]
    assert choose(records, obj, "throughput", min_quality=0.9).trial == 1
    assert choose(records, obj, "quality").trial == 1


def test_min_quality_that_excludes_everything_names_the_best_available():
    with pytest.raises(StudyError, match=r"fid <= 5.*best is 18 \(trial 3\)"):
        choose([rec(2, 700, 22), rec(3, 300, 18)], OBJ, "knee", min_quality=5, study="s")


def test_no_complete_trial_is_a_study_error():
    with pytest.raises(StudyError, match="no complete trial.*oom"):
        choose([rec(0, None, None, "oom")], OBJ, study="s")


def test_speed_only_study_has_no_quality_pick():
    obj = [Objective(metric="throughput", direction="max")]
    records = [TrialRecord(trial=0, state="complete", metrics={"throughput": 5.0}),
               TrialRecord(trial=1, state="complete", metrics={"throughput": 7.0})]
    assert choose(records, obj, "knee").trial == 1
    with pytest.raises(StudyError, match="no quality objective"):
        choose(records, obj, "quality")


def test_the_knee_weighs_a_trade_off_against_the_whole_study_not_the_front_alone():
    # The default study on 2 cores: a front of two, 1% apart in throughput and 20x apart in FID.
    records = [rec(3, 1443, 589.5), rec(5, 1432, 26.3), rec(0, 1163, 72.4), rec(8, 940, 41.9), rec(4, 1125, 137.1)]
    front = [r for r in records if r.trial in (3, 5)]
    assert knee(front, OBJ).trial == 3  # over the front alone both are at distance 1: a tie, to throughput
    assert knee(front, OBJ, scale=records).trial == 5
    assert choose(records, OBJ, "knee").trial == 5  # what `tuner export` picks
