"""The Workload contract refuses what cannot work when it is built, with a message that says what to give."""

import pytest
import torch
from torch import nn

import tuner

NET = {"net": lambda: nn.Linear(2, 2)}
DATA = lambda: ([], [])  # noqa: E731


def loss(models, batch):
    return models["net"](batch).sum()


@pytest.mark.parametrize("kwargs, message", [
    ({"models": {}, "datasets": DATA, "loss": loss}, "non-empty mapping"),
    ({"models": {"net": nn.Linear(2, 2)}, "datasets": DATA, "loss": loss}, "is a model; give a factory"),
    ({"models": {"net": 3}, "datasets": DATA, "loss": loss}, "zero-argument callable"),
    ({"models": NET, "datasets": [], "loss": loss}, "datasets must be a zero-argument callable"),
    ({"models": NET, "datasets": DATA}, "exactly one of loss"),
    ({"models": NET, "datasets": DATA, "loss": loss, "phases": [tuner.Phase("p", loss, ["net"])]}, "exactly one"),
    ({"models": NET, "datasets": DATA, "phases": [tuner.Phase("p", loss, ["other"])]}, "does not define"),
    ({"models": NET, "datasets": DATA, "phases": [tuner.Phase("p", loss, ["net"]), tuner.Phase("p", loss, ["net"])]},
     "unique"),
    ({"models": NET, "datasets": DATA, "loss": loss, "quality": ("val_loss", "min")}, "has no evaluate"),
    ({"models": NET, "datasets": DATA, "loss": loss, "evaluate": lambda m, b: {}, "quality": ("val_loss", "down")},
     'must be \\(metric, "min" \\| "max"\\)'),
])
def test_invalid_workloads_are_refused_when_built(kwargs, message):
    with pytest.raises(TypeError, match=message):
        tuner.Workload(**kwargs)


def test_single_loss_is_one_phase_over_every_model_and_quality_is_normalized():
    wl = tuner.Workload(models=NET, datasets=DATA, loss=loss, evaluate=lambda m, b: {"val_loss": 1.0},
                        quality=("val_loss", "MIN"))
    (phase,) = wl.training_phases()
    assert phase.models == ("net",) and wl.quality == ("val_loss", "minimize")
    models = {"net": nn.Linear(2, 2)}
    x = torch.ones(1, 2)
    assert torch.equal(phase.loss(models, x, tuner.Shared()), loss(models, x))


def test_phase_models_must_be_a_list_of_names():
    with pytest.raises(TypeError, match="non-empty list of model names"):
        tuner.Phase("d", loss, "net")


def test_trial_context_outside_a_trial_says_where_it_works():
    with pytest.raises(RuntimeError, match="only available while tuner runs a trial"):
        tuner.trial_context()
