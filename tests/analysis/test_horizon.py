"""The horizon check's rule and figures (tuner.analysis.horizon): the word from planted ratios, a run's time to
the horizon's target read between evaluations (or counted at its last one when it misses), the target the
baseline's runs set at the horizon."""

import pytest

from tuner.analysis import (HOLDS, REVERSES, SHRINKS, Interval, horizon_ratio, horizon_target, judge, study_ratio,
                            to_target)
from tuner.config import Target

STUDY = Interval(1.5, 1.3, 1.8)  # the study read the pick 1.5x sooner, 1.3-1.8x


@pytest.mark.parametrize("horizon, study, word", [
    (Interval(1.45, 1.2, 1.7), STUDY, HOLDS),  # inside the study's interval
    (Interval(2.4, 2.0, 2.9), STUDY, HOLDS),  # above it: the speed-up grew
    (Interval(1.1, 0.9, 1.35), STUDY, HOLDS),  # reaches the study's interval, though it includes 1
    (Interval(1.15, 1.05, 1.25), STUDY, SHRINKS),  # still sooner, wholly below the study's interval
    (Interval(1.2, None, None), STUDY, SHRINKS),  # one seed: its centre under the study's bottom
    (Interval(1.0, 0.8, 1.2), STUDY, SHRINKS),  # exactly even: not reversed, below the study
    (Interval(0.9, 0.7, 1.2), STUDY, REVERSES),  # the pick later at the horizon
    (Interval(0.5, 0.4, 0.6), STUDY, REVERSES),
    (Interval(1.2, 1.1, 1.3), Interval(1.5, None, None), SHRINKS),  # a study of single readings: its centre
    (Interval(1.2, 1.1, 1.6), Interval(1.5, None, None), HOLDS),
    (Interval(1.2, 1.1, 1.3), None, HOLDS),  # no study ratio to compare: above 1 holds
])
def test_the_word_from_planted_ratios(horizon, study, word):
    assert judge(horizon, study) == word


LOSS = Target(metric="loss", direction="minimize", value=0.5, eval_every_samples=1000)


def test_a_run_is_read_at_the_crossing_between_two_evaluations():
    curve = [[1000, 2.0, 0.9], [2000, 4.0, 0.7], [3000, 6.0, 0.3]]  # crosses 0.5 halfway from 2000 to 3000
    assert to_target(curve, LOSS, "time_to_target") == (pytest.approx(5.0), True)
    assert to_target(curve, LOSS, "samples_to_target") == (pytest.approx(2500), True)


def test_a_run_that_misses_counts_at_its_last_evaluation():
    curve = [[1000, 2.0, 0.9], [2000, 4.0, 0.8]]
    assert to_target(curve, LOSS, "time_to_target") == (4.0, False)
    assert to_target([], LOSS, "time_to_target") == (None, False)


def test_the_horizon_target_is_the_mean_the_baseline_s_runs_settle_at():
    """Each run's mean of its last 3 evaluations (as a derived target reads one), averaged over the runs."""
    a = [[1, 1.0, 2.0], [2, 2.0, 0.6], [3, 3.0, 0.5], [4, 4.0, 0.4]]  # settles at 0.5
    b = [[1, 1.0, 2.0], [2, 2.0, 0.8], [3, 3.0, None], [4, 4.0, 0.7], [5, 5.0, 0.6]]  # 0.7
    assert horizon_target([a, b]) == pytest.approx(0.6)
    assert horizon_target([[], [[1, 1.0, None]]]) is None


def test_the_ratio_is_the_baseline_over_the_pick_with_an_interval_at_least_one_step_wide():
    r = horizon_ratio([10.0, 10.0, 10.0], [20.0, 20.0, 20.0], step=2.0)  # no spread: the step alone
    assert r.centre == pytest.approx(2.0)
    assert r.low == pytest.approx(19 / 11) and r.high == pytest.approx(21 / 9)
    spread = horizon_ratio([9.0, 10.0, 11.5], [18.0, 22.0, 20.0])
    assert spread.low < spread.centre < spread.high and spread.low > 1


def test_the_study_ratio_counts_a_missed_rerun_as_the_export_does():
    from tuner.study import Confirmed, ConfirmedFigure, TrialRecord

    def rec(trial, values, missed=0):
        fig = ConfirmedFigure(centre=1.0, values=values, runs=len(values) + missed,
                              censored=30.0 if missed else None)
        return TrialRecord(trial=trial, state="complete", config=None, metrics={"time_to_target": values[0]},
                           confirmed=Confirmed(runs=len(values) + missed, method="m",
                                               figures={"time_to_target": fig}))

    r = study_ratio(rec(2, [5.0, 5.0], missed=1), rec(0, [15.0, 15.0, 15.0]), "time_to_target")
    assert r.centre == pytest.approx(15.0 / (5 * 5 * 30) ** (1 / 3))


@pytest.mark.parametrize("horizon, word, unsure", [
    (Interval(0.82, 0.52, 1.30), REVERSES, True),  # below 1, but 3 seeds a side cannot tell it from 1
    (Interval(0.70, 0.55, 0.90), REVERSES, False),  # below 1 beyond the noise
    (Interval(1.10, 0.90, 1.35), HOLDS, True)])
def test_the_line_says_more_seeds_would_tell_where_the_interval_includes_1(horizon, word, unsure):
    """A check that read "reverses" at 0.82x (0.52-1.30x) said nothing of its interval holding 1, as if the pick
    were surely later at the horizon; a holding one did."""
    from tuner.analysis import horizon_text

    text = horizon_text(judge(horizon, STUDY), horizon, STUDY, "time_to_target", "600 s", "val_loss <= 2.1", 3, {})
    assert text.startswith(f"the speed-up {word} at 600 s")
    assert ("its interval includes 1: more seeds would tell" in text) is unsure
