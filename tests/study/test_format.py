"""How a confirmed trial's figure reads in the front table and the report."""

from __future__ import annotations

from tuner.study import TrialRecord
from tuner.study.format import fmt_figure
from tuner.study.record import Confirmed, ConfirmedFigure


def _confirmed(values, low, high, centre):
    figure = ConfirmedFigure(values=values, centre=centre, low=low, high=high)
    return TrialRecord(trial=3, state="complete", metrics={"val_loss": values[0]},
                       confirmed=Confirmed(runs=len(values), states=["complete"] * len(values),
                                           figures={"val_loss": figure}))


def test_a_confirmed_figure_reads_its_centre_and_interval():
    assert fmt_figure(_confirmed([0.81, 0.86], 0.62, 1.12, 0.834), "val_loss") == "0.834 (0.62-1.12)"


def test_re_runs_too_far_apart_for_an_interval_say_so_with_their_values():
    """A ResNet-18's two re-runs read 0.83 and 7.79: the t-interval with one degree of freedom ran from 1.7e-06 to
    3.9e+06, which ranks nothing. The figure says the re-runs disagree and shows them."""
    text = fmt_figure(_confirmed([0.83, 7.79], 1.664e-06, 3878705.0, 2.541), "val_loss")
    assert text == "2.541 (re-runs disagree: 0.83, 7.79; no interval)"


def test_re_runs_that_agree_under_a_wide_pooled_noise_are_not_said_to_disagree():
    """The interval is the study's pooled noise applied to this trial: where another trial's re-runs make it
    too wide, this one's own re-runs (790.3 and 818.9) did not disagree, and the figure says what is wide."""
    text = fmt_figure(_confirmed([790.3, 818.9], 5.0, 9000.0, 804.5), "val_loss")
    assert text == "804.5 (the study's noise too wide for an interval; re-runs: 790.3, 818.9; no interval)"


def test_an_environment_knob_the_probes_kept_reads_as_what_the_trial_ran_under():
    """A trial that left the wait policy and malloc as yours (the probes kept them: not among its sampled params)
    read `-` beside the baseline's `default`, as if it had not run under anything; its config says `default`."""
    from tuner.study.format import fmt_param

    kept = TrialRecord(trial=2, state="complete", params={"batch_size": 32},
                       config={"params": {"batch_size": 32, "omp_wait_policy": "default", "malloc": "default",
                                          "prefetch_factor": 2, "num_workers": 0}})
    assert fmt_param(kept, "omp_wait_policy") == "default" and fmt_param(kept, "malloc") == "default"
    assert fmt_param(kept, "prefetch_factor") == "-"  # not an environment knob: at 0 workers it does not apply
    sampled = TrialRecord(trial=3, state="complete", params={"omp_wait_policy": "PASSIVE"},
                          config={"params": {"omp_wait_policy": "PASSIVE"}})
    assert fmt_param(sampled, "omp_wait_policy") == "PASSIVE"
