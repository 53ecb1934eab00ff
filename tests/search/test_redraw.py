"""A draw that repeats a trial's config is drawn anew, not run again (tuner.search._redraw): a new user's four-trial
study spent one trial on a config it had already run. Driven through the study's searcher, without Ray."""

from __future__ import annotations

from types import SimpleNamespace

import optuna
import pytest

from tuner.search._redraw import REDRAWS, redraw_note, twin_of


class ScriptedSampler(optuna.samplers.BaseSampler):
    """Proposes the scripted (batch_size, beta1) for each draw in turn, the last one ever after."""

    def __init__(self, script):
        self.script = list(script)
        self.draws = 0

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def before_trial(self, study, trial):
        self.draws += 1

    def sample_independent(self, study, trial, name, distribution):
        batch, beta1 = self.script[min(self.draws, len(self.script)) - 1]
        return {"batch_size": batch, "beta1": beta1}[name]


def searcher_with(tmp_path, script):
    from tests.helpers.searchers import tiny_searcher

    return tiny_searcher(tmp_path / "s", sampler=ScriptedSampler(script))


def params_of(config):
    from tuner.search._protocol import TrialOrder

    order = TrialOrder.from_config(config)
    return order.trial, {k: order.params[k] for k in ("batch_size", "beta1")}


def test_a_draw_that_repeats_a_running_trial_is_drawn_anew_and_its_number_skipped(tmp_path):
    searcher, _, _ = searcher_with(tmp_path, [(16, 0.5), (16, 0.5), (32, 0.5)])
    first, second = params_of(searcher.suggest("t1")), params_of(searcher.suggest("t2"))
    assert first == (0, {"batch_size": 16, "beta1": 0.5})
    assert second == (2, {"batch_size": 32, "beta1": 0.5})  # trial 1 drew trial 0's config: not run
    states = [t.state.name for t in searcher.study.trials]
    assert states == ["RUNNING", "FAIL", "RUNNING"]  # FAIL: the samplers leave it out of their models
    assert searcher.study.trials[1].user_attrs["repeat_of"] == 0  # what an Optuna dashboard shows for it
    assert searcher.redrawn == [1] and searcher.repeated == []
    note = redraw_note(searcher.redrawn, searcher.repeated)
    assert "drawn anew, not run again" in note and "trial 1 failed as" in note


def test_a_draw_that_repeats_a_finished_trial_is_drawn_anew(tmp_path):
    from tuner.search._protocol import FinalReport, to_tune
    from tuner.study import TrialRecord

    searcher, folder, _ = searcher_with(tmp_path, [(16, 0.5), (16, 0.5), (32, 0.5)])
    number, _ = params_of(searcher.suggest("t1"))
    record = TrialRecord(trial=number, state="complete", metrics={"throughput": 100.0, "loss": 0.5})
    searcher.on_trial_complete("t1", result=to_tune(FinalReport(values={"throughput": 100.0, "loss": 0.5},
                                                                feasible=True, record=record)))
    assert params_of(searcher.suggest("t2")) == (2, {"batch_size": 32, "beta1": 0.5})
    assert [t.state.name for t in searcher.study.trials] == ["COMPLETE", "FAIL", "RUNNING"]


def test_a_space_with_no_other_config_runs_the_repeat_after_redraws_and_says_so(tmp_path):
    searcher, _, _ = searcher_with(tmp_path, [(16, 0.5)])
    searcher.suggest("t1")
    number, params = params_of(searcher.suggest("t2"))
    assert params == {"batch_size": 16, "beta1": 0.5} and number == REDRAWS + 1
    assert searcher.redrawn == list(range(1, REDRAWS + 1)) and searcher.repeated[0] == number
    assert f"{REDRAWS} draws in a row found no other" in redraw_note(searcher.redrawn, searcher.repeated)
    assert redraw_note([], []) is None
    # the space is spent: later draws run as drawn, with no more failed draws in the study
    assert params_of(searcher.suggest("t3")) == (number + 1, params)
    assert searcher.redrawn == list(range(1, REDRAWS + 1)) and searcher.repeated[0] == number


def test_distinct_draws_are_not_touched(tmp_path):
    searcher, _, _ = searcher_with(tmp_path, [(16, 0.5), (16, 0.6), (32, 0.5)])
    got = [params_of(searcher.suggest(f"t{i}"))[0] for i in range(3)]
    assert got == [0, 1, 2] and searcher.redrawn == []


@pytest.mark.parametrize("chosen, twin", [({"num_workers": 2}, None), ({"num_workers": 0}, 0), ({}, 0)])
def test_the_probes_loader_counts_the_baseline_s_learned_knobs_with_another_loader_are_a_new_config(chosen, twin):
    """The baseline keeps its own loader (num_workers 0); a sampled trial with the baseline's batch and beta1 gets
    the probes' loader for its batch size. It repeats the baseline only when that loader is the baseline's, whether
    the probes' plan names the defaults or leaves them out ({}: they chose the defaults)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    plan = SimpleNamespace(knobs=("num_workers",), loader_for=lambda batch: dict(chosen))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial({"batch_size": 16, "beta1": 0.5, "num_workers": 0})  # the baseline
    study.enqueue_trial({"batch_size": 16, "beta1": 0.5})  # a draw of its learned knobs
    for _ in range(2):
        trial = study.ask()
        trial.suggest_categorical("batch_size", [16, 32])
        trial.suggest_float("beta1", 0.1, 0.9)
    assert twin_of(study, trial, plan) == twin
    assert twin_of(study, study.trials[0], plan) == (None if twin is None else 1)  # both running: each the other's


def test_a_draw_of_the_baseline_s_threads_is_its_twin_where_the_env_probe_kept_the_defaults():
    """The seventy-sixth session's `--space loader` study (its probes.json and study.db): the baseline is enqueued
    with every probed knob spelled out, `omp_wait_policy default` and `malloc default` among them; the env probe
    kept those defaults, so the probes' plan names neither, and trial 1 drew the baseline's threads. It ran, and
    the confirmation then compared the one config with itself."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    plan = SimpleNamespace(knobs=("num_workers", "prefetch_factor", "persistent_workers", "omp_wait_policy", "malloc"),
                           loader_for=lambda batch: {"num_workers": 0})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial({"num_workers": 0, "threads": 2, "omp_wait_policy": "default", "malloc": "default"})
    study.enqueue_trial({"threads": 2})
    study.enqueue_trial({"threads": 1})
    for _ in range(3):
        trial = study.ask()
        trial.suggest_int("threads", 1, 2)
    assert twin_of(study, study.trials[1], plan) == 0
    assert twin_of(study, trial, plan) is None  # threads 1: a new config


def test_a_study_of_more_trials_than_its_space_has_configs_redraws_nothing():
    """A three-config space (the micro-batches of one effective batch) in a study of more than three trials must
    repeat configs anyway: failed draws would only make holes in its trial numbers. One of two or three trials
    redraws: it can run each config once."""
    import yaml

    from tests.helpers.searchers import CONTEXT
    from tuner.search._redraw import redraws_for
    from tuner.space import parse_space

    text = """
description: three configs
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 64}, trials: 6}
objectives: {cnn: [{metric: throughput, direction: max}, {metric: loss, direction: min}]}
params:
  batch_size: {type: int, low: 16, high: 64}
"""
    space = parse_space(yaml.safe_load(text), source="three.yaml", name="three").resolve(CONTEXT)
    assert [redraws_for(space, CONTEXT, None, trials) for trials in (2, 3, 4, 6)] == [REDRAWS, REDRAWS, 0, 0]
