"""Search space files: the bundled ones, the conditionals, and errors that name the file and the key."""

from __future__ import annotations

import optuna
import pytest

from tuner.cli import main
from tuner.errors import ConfigError
from tuner.search.spaces import list_spaces, load_space, parse_space, space_names
from tuner.study import Objective

GOOD = """
description: a tiny space
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 128}, trials: 3}
objectives:
  gan: [{metric: throughput, direction: max}, {metric: fid, direction: min}]
  cnn: [{metric: throughput, direction: max}, {metric: loss, direction: min}]
params:
  batch_size: {type: categorical, choices: [16, 32]}
  num_workers: {type: int, low: 0, high: 2}
  prefetch_factor: {type: int, low: 1, high: 4, when: {num_workers: ">0"}}
  beta1: {type: float, low: 0.1, high: 0.9}
  lr: 0.001
"""


def write(tmp_path, text, name="space.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bundled_spaces_load_and_amp_loader_searches_the_issue_knobs():
    assert {"amp_loader", "optimizer", "loader"} <= set(space_names())
    assert all(s.description for s in list_spaces())
    amp = load_space("amp_loader")
    assert amp.searched == ["batch_size", "accumulation_steps", "num_workers", "prefetch_factor",
                            "persistent_workers", "pin_memory", "precision", "beta1", "beta2"]
    fid = Objective(metric="fid", direction="min")
    assert [(o.metric, o.direction) for o in amp.objectives_for("gan", quality=fid)] == \
        [("throughput", "maximize"), ("fid", "minimize")]
    with pytest.raises(ConfigError, match="'quality' stands for the workload's quality objective"):
        amp.objectives_for("mine.py:make", quality=None)
    loss = Objective(metric="loss", direction="min")
    assert [o.metric for o in load_space("optimizer").objectives_for("cnn", quality=loss)] == ["loss", "throughput"]


@pytest.mark.parametrize("gpus", [0, 1])
def test_sampled_configs_are_always_valid_and_conditionals_hold(gpus):
    """Every draw becomes a validated TrialConfig: prefetch/persistent only with workers, pinning only with a GPU."""
    space = load_space("amp_loader")
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=1))
    seen_workers = set()
    for _ in range(150):
        trial = study.ask()
        params = space.sample(trial, {"gpus": gpus})
        cfg = space.trial_config(params, {"workload": "gan", "dataset": "digits", "budget": {"seconds": 1}})
        seen_workers.add(cfg.params.num_workers)
        if cfg.params.num_workers == 0:
            assert "prefetch_factor" not in params and "persistent_workers" not in params
        assert ("pin_memory" in params) == (gpus > 0)
        study.tell(trial, [1.0, 1.0])
    assert seen_workers == {0, 1, 2, 3}


def test_a_users_yaml_path_works_like_a_name(tmp_path):
    space = load_space(str(write(tmp_path, GOOD, "mine.yaml")))
    assert space.name == "mine" and space.searched == ["batch_size", "num_workers", "prefetch_factor", "beta1"]
    assert space.fixed_values() == {"lr": 0.001}
    assert space.defaults.workload == "cnn" and space.defaults.budget.samples == 128 and space.defaults.trials == 3


@pytest.mark.parametrize("change, key", [
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_sise: {type: int, low: 1, high: 2}"), "params.batch_sise"),
    (("beta1: {type: float, low: 0.1, high: 0.9}", "beta1: {type: float, low: 0.9, high: 0.1}"), "params.beta1"),
    (("beta1: {type: float, low: 0.1, high: 0.9}", "beta1: {type: gaussian, low: 0.1, high: 0.9}"), "params.beta1.type"),
    (("beta1: {type: float, low: 0.1, high: 0.9}", "beta1: {type: float, low: 0.1, high: 1.5}"), "params.beta1"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {type: categorical}"), "params.batch_size"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {type: int, low: 0, high: 8}"), "params.batch_size"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {low: 1, high: 8}"), "params.batch_size"),
    (("when: {num_workers: \">0\"}", "when: {beta1: \">0\"}"), "params.prefetch_factor.when.beta1"),
    (("{metric: loss, direction: min}", "{metric: val_elbo}"), "objectives.cnn.1: give a direction"),
    (("{metric: loss, direction: min}", "{metric: samples, direction: max}"), "objectives.cnn.1.metric"),
    (("direction: min}]\nparams", "direction: sideways}]\nparams"), "objectives.cnn.1.direction"),
    (("trials: 3", "trials: 0"), "defaults.trials"),
])
def test_space_errors_name_the_file_and_the_key(tmp_path, change, key):
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_space(str(path))
    assert str(path) in str(err.value) and key in str(err.value), str(err.value)


def test_malformed_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "params:\n  batch_size: {type: int, low: 1\n")
    with pytest.raises(ConfigError, match=r"space.yaml: not valid YAML at line \d"):
        load_space(str(path))


def test_parse_space_refuses_a_space_with_nothing_to_search():
    with pytest.raises(ConfigError, match="nothing to search"):
        parse_space({"objectives": [{"metric": "throughput", "direction": "max"}], "params": {"lr": 0.01}},
                    source="x.yaml", name="x")


def test_cli_spaces_lists_and_shows(capsys):
    assert main(["spaces"]) == 0
    out = capsys.readouterr().out
    for name in ("amp_loader", "optimizer", "loader"):
        assert name in out
    assert main(["spaces", "show", "amp_loader"]) == 0
    out = capsys.readouterr().out
    assert "prefetch_factor" in out and "when num_workers > 0" in out
    assert "objectives: throughput (max), quality (the workload's: fid for gan, loss for cnn)" in out


def test_cli_spaces_show_unknown_exits_2(capsys):
    assert main(["spaces", "show", "no_such_space"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown space 'no_such_space'" in err[0] and "amp_loader" in err[0]
