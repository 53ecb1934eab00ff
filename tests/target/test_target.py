"""Time to target (issue 34): the first evaluation that meets the target counts, in either direction; a trial that
never meets it is `not reached`, a state of its own that survives its record's round trip."""

import pytest

from tuner.config import Budget, Target
from tuner.study import STATES, TrialRecord
from tuner.target import NOT_REACHED, CurvePoint, first_reached, reference_budget, target_metrics


def curve(*qualities):
    return [CurvePoint(samples=100 * (i + 1), seconds=1.5 * (i + 1), quality=q) for i, q in enumerate(qualities)]


def test_the_first_passing_evaluation_counts_for_a_loss_to_minimize():
    target = Target(metric="val_loss", direction="minimize", value=1.6, eval_every_samples=100)
    # falls, dips below the target at the 3rd evaluation, rises back above it, dips again: the 3rd counts
    planted = curve(2.4, 1.9, 1.58, 1.7, 1.5)
    hit = first_reached(planted, target)
    assert hit == planted[2]
    # read at the crossing between the 2nd (1.9 at 200 samples, 3 s) and the 3rd (1.58 at 300, 4.5 s): 15/16 of
    # the way (issue 51: a stated resolution, not rounded up to the evaluation that met it)
    assert target_metrics(planted, target, 0.25) == {"time_to_target": pytest.approx(4.40625),
                                                     "samples_to_target": 294, "target_eval_seconds": 0.25,
                                                     "estimated_time_to_target": None}


def test_the_first_passing_evaluation_counts_for_an_accuracy_to_maximize():
    target = Target(metric="accuracy", direction="maximize", value=0.9, eval_every_samples=100)
    planted = curve(0.5, None, 0.89, 0.9, 0.95)  # a missing reading never meets it; equal to the target does
    assert first_reached(planted, target) == planted[3]
    assert target_metrics(planted, target, 0.0)["samples_to_target"] == 400


@pytest.mark.parametrize("direction, qualities", [("minimize", (3.0, 2.0, 1.61, float("nan"))),
                                                  ("maximize", (0.1, 0.5, 0.89))])
def test_a_curve_that_never_meets_the_target_has_no_time_to_it(direction, qualities):
    target = Target(metric="q", direction=direction, value=1.6 if direction == "minimize" else 0.9,
                    eval_every_samples=100)
    figures = target_metrics(curve(*qualities), target, 1.0)
    assert figures["time_to_target"] is None and figures["samples_to_target"] is None


def test_not_reached_is_a_state_of_its_own_that_a_record_keeps():
    assert NOT_REACHED in STATES
    rec = TrialRecord(trial=3, state=NOT_REACHED, quality_curve=[[100.0, 1.5, 2.4], [200.0, 3.0, 1.9]],
                      metrics={"throughput": 500.0, "val_loss": 1.9, "time_to_target": None})
    back = TrialRecord.model_validate(rec.to_json())
    assert back.state == "not reached" and back.quality_curve == [[100.0, 1.5, 2.4], [200.0, 3.0, 1.9]]
    assert back.complete  # measured in full: ranked and told to Optuna like a complete trial, never a failure


def _pending(direction="minimize"):
    return Target(metric="q", direction=direction, value=None, eval_every_samples=100, source="baseline")


def test_a_derived_target_is_the_mean_of_the_baselines_last_three_evaluations_not_one_lucky_one():
    from tuner.target import derive_target

    # a lucky dip at the 4th evaluation (1.0): the last reading alone, or the best, would set a target the
    # baseline itself only met by luck; the mean of the last three (1.0, 1.6, 1.7) is 1.433
    planted = curve(3.0, 2.0, 1.5, 1.0, 1.6, 1.7)
    derived = derive_target(planted, _pending())
    assert derived.value == pytest.approx((1.0 + 1.6 + 1.7) / 3) and derived.source == "baseline"
    assert derived.evaluations == [p.as_list() for p in planted[-3:]]
    # the baseline meets its own target: first at the 4th evaluation (6 s), so the cap is 3x that
    assert first_reached(planted, derived) == planted[3] and derived.cap_seconds == pytest.approx(18.0)


def test_a_derived_target_to_maximize_is_met_from_above_and_skips_missing_readings():
    from tuner.target import derive_target

    planted = curve(0.2, 0.6, 0.8, None, 0.7, 0.9)  # the mean of 0.8, 0.7, 0.9 (the missing one left out): 0.8
    derived = derive_target(planted, _pending("maximize"))
    assert derived.value == pytest.approx(0.8) and derived.direction == "maximize"
    assert first_reached(planted, derived) == planted[2] and derived.cap_seconds == pytest.approx(3 * 4.5)
    assert derive_target(curve(None, float("nan")), _pending()) is None  # no reading: nothing to set


def test_a_pending_target_is_never_met_and_says_so():
    pending = _pending()
    assert not pending.met(-1e9) and "not set yet" in pending.describe()


def test_a_derived_target_round_trips_through_study_json_and_a_given_one_keeps_its_record(tmp_path):
    from tuner.study import StudyFolder, StudyMeta
    from tuner.target import derive_target

    derived = derive_target(curve(3.0, 2.0, 1.5, 1.2), _pending())
    derived = derived.model_copy(update={"reference_budget": reference_budget(Budget(seconds=8.0))})
    folder = StudyFolder(tmp_path / "s")
    folder.path.mkdir()
    folder.write_meta(StudyMeta.model_validate({"name": "s", "target": derived.model_dump()}))
    back = Target.model_validate(folder.read_meta().target)
    assert back == derived and back.evaluations and back.source == "baseline"
    assert back.reference_budget == Budget(seconds=8.0 / 3)
    given = Target(metric="q", value=1.6, eval_every_samples=100, source="--target")
    assert set(given.model_dump()) == {"metric", "direction", "value", "eval_every_samples", "source"}


def test_the_estimated_time_to_target_is_samples_to_target_over_the_measured_throughput():
    """Issue 34: samples to target / the trial's throughput (median samples/s of its timed windows), which a busy
    moment at one evaluation does not move as it moves the wall clock; none when not reached or not measured."""
    target = Target(metric="val_loss", direction="minimize", value=1.6, eval_every_samples=100)
    figures = target_metrics(curve(2.4, 1.9, 1.58), target, 0.25, throughput=120.0)
    assert figures["samples_to_target"] == 294 and figures["estimated_time_to_target"] == pytest.approx(294 / 120)
    assert figures["time_to_target"] == pytest.approx(4.40625)  # the wall clock's reading stands beside it
    assert target_metrics(curve(2.4, 1.9), target, 0.25, throughput=120.0)["estimated_time_to_target"] is None
    for speed in (None, 0.0, float("nan")):
        assert target_metrics(curve(1.5), target, 0.0, throughput=speed)["estimated_time_to_target"] is None


def test_a_derived_targets_reference_budget_is_a_third_of_the_trials_so_its_cap_is_about_their_budget():
    """A baseline that needs all of its reference budget to meet its target sets a cap of CAP_FACTOR x that: the
    trials' budget, not 3x it (which no trial ever reached)."""
    from tuner.target import CAP_FACTOR

    assert reference_budget(Budget(seconds=8.0)) == Budget(seconds=8.0 / 3)
    assert reference_budget(Budget(samples=256)) == Budget(samples=85)
    assert reference_budget(Budget(samples=1)) == Budget(samples=1)
    assert CAP_FACTOR * reference_budget(Budget(seconds=8.0)).seconds == pytest.approx(8.0)


def test_the_default_k_keeps_evaluations_a_fifth_of_training_and_at_most_twenty_per_reference_run():
    from tuner.config import Budget
    from tuner.target import default_eval_every

    # cheap evaluation (charlm-like): the reference run (15 s / 3 at 1000 samples/s) gets 20 evaluations
    assert default_eval_every(64, Budget(seconds=15), 1000.0, 0.01) == 256  # 5000 / 20 = 250, whole batches of 64
    # costly evaluation (FID-like, 0.5 s): each evaluation at most a fifth of the training between two
    assert default_eval_every(64, Budget(seconds=15), 1000.0, 0.5) == 2560  # 0.5 s x 1000/s / 0.2
    # a samples budget's reference run is a third of it; never less than one optimizer step
    assert default_eval_every(32, Budget(samples=960), 1e6, 0.0) == 32 and \
        default_eval_every(8, Budget(samples=9600), 1e6, 0.0) == 160
    # no measured pace (a cluster's trials, a resume): 25 optimizer steps of the baseline
    assert default_eval_every(64, Budget(seconds=15), None, None) == 25 * 64

