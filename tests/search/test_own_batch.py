"""A workload that says the batch it trains at (Workload.batch_size): the study's baseline trains there, a space that
searches batch_size splits that batch, and `tuner train` without a batch_size trains at it. Before, the baseline
always trained at tuner's 64, so a user training at 20 read every speed-up against a batch they never run."""

from __future__ import annotations

import sys

import optuna
import pytest

from tests.helpers.userworkloads import HEADER
from tuner.errors import ConfigError
from tuner.search._check import check_plan
from tuner.search._options import SearchOptions
from tuner.search._plan import plan_search

CPU = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}
SPLIT = """
description: the split of the workload's batch, and beta1
defaults: {budget: {samples: 120}, trials: 4}
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: int, low: 4, high: 256, log: true}
  accumulation_steps: {type: int, low: 1, high: 4}
  beta1: {type: float, low: 0.5, high: 0.95}
  num_workers: 0
"""


def workload(tmp_path, batch: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text(HEADER + f'''

def make():
    return tuner.Workload(
        models={{"net": lambda: nn.Linear(4, 2)}}, datasets=data,
        loss=lambda models, batch: F.cross_entropy(models["net"](batch[0]), batch[1]),
        evaluate=evaluate, quality=("val_loss", "min"), batch_size={batch})
''')
    return f"{path}:make"


def checked(tmp_path, batch: str, space: str = SPLIT):
    (tmp_path / "s.yaml").write_text(space)
    plan = plan_search(SearchOptions(space=str(tmp_path / "s.yaml"), workload=workload(tmp_path, batch),
                                     reports_dir=tmp_path / "r"))
    from tuner.device import resolve_device

    return plan, check_plan(plan, resolve_device("cpu"))  # timed on the trials' kind of device, as a study does


def drawn(space, n=60):
    """`n` configs as the study's sampler draws them."""
    from tuner.search._searcher import SpaceFunction

    study = optuna.create_study(directions=["maximize"], sampler=optuna.samplers.RandomSampler(seed=2))
    fn = SpaceFunction(space.resolve(CPU), CPU)
    out = []
    for i in range(n):
        trial = study.ask()
        constants = fn(trial) or {}  # the draws first: trial.params holds them after
        out.append(space.trial_config({**trial.params, **constants}, {"workload": "cnn"}))
        study.tell(trial, [float(i % 5)])
    return out


def test_the_baseline_trains_at_the_workloads_batch_and_the_space_splits_it(tmp_path):
    before, plan = checked(tmp_path, "20")
    assert before.space.baseline_point(CPU)["batch_size"] == 64  # the space alone knows tuner's default only
    point = plan.space.baseline_point(CPU)
    assert (point["batch_size"], point["accumulation_steps"]) == (20, 1)
    assert plan.space.trial_config(point, {"workload": "cnn"}).params.effective_batch == 20
    assert plan.preflight.batch_size == 20  # the pre-flight timed the step at the user's batch, not at 64
    cfgs = drawn(plan.space)
    assert {c.params.effective_batch for c in cfgs} == {20}  # every trial splits the user's batch
    assert {c.params.batch_size for c in cfgs} >= {5, 10, 20}  # 5 x 4, 10 x 2, 20 x 1 (4 x 5: accumulation <= 4)
    assert plan.space.definition()["trial"]["params"]["batch_size"] == 20  # study.json records what ran


def test_a_workload_without_a_batch_keeps_tuners_default(tmp_path):
    _, plan = checked(tmp_path, "None")
    assert plan.space.baseline_point(CPU)["batch_size"] == 64 and plan.preflight.batch_size == 64
    assert "trial" not in plan.space.definition() or not plan.space.definition()["trial"].get("params")


def test_a_batch_the_spaces_domains_cannot_split_is_one_line_naming_it(tmp_path):
    narrow = SPLIT.replace("low: 4, high: 256", "low: 16, high: 256")  # 12 = 12 x 1, 6 x 2, ... all below 16
    with pytest.raises(ConfigError, match=r"no micro-batch in its domain splits the workload's effective batch 12"):
        checked(tmp_path, "12", narrow)


def test_a_space_that_fixes_the_batch_decides_and_the_study_says_so(tmp_path):
    fixed = SPLIT.replace("batch_size: {type: int, low: 4, high: 256, log: true}", "batch_size: 32") \
        .replace("accumulation_steps: {type: int, low: 1, high: 4}", "accumulation_steps: 1")
    _, plan = checked(tmp_path, "20", fixed)
    assert plan.space.baseline_point(CPU).get("batch_size", 32) == 32
    assert plan.batch_note is not None and "trains at batch 20" in plan.batch_note
    assert "fixes batch_size 32" in plan.batch_note and "drop it there" in plan.batch_note


def test_a_bad_batch_size_is_a_type_error_naming_the_field():
    import torch.nn as nn

    import tuner

    for bad in (0, 2.5, True, "64"):
        with pytest.raises(TypeError, match="Workload.batch_size must be a positive int"):
            tuner.Workload(models={"net": lambda: nn.Linear(2, 2)}, datasets=lambda: ([], []),
                           loss=lambda m, b: 0, batch_size=bad)


def test_tuner_train_without_a_batch_size_trains_at_the_workloads(tmp_path, monkeypatch):
    from tuner.config import load_config
    from tuner.train import preflight

    module = sys.modules["tuner.train.preflight"]
    monkeypatch.setattr(module, "_apart", lambda device: False)  # in this process
    built = []
    monkeypatch.setattr(module, "build", lambda *a, _build=module.build: built.append(a) or _build(*a))
    ref = workload(tmp_path, "20")
    (tmp_path / "a.yaml").write_text(f"workload: '{ref}'\nbudget: {{samples: 40}}\n")
    (tmp_path / "b.yaml").write_text(f"workload: '{ref}'\nbudget: {{samples: 40}}\nparams: {{batch_size: 8}}\n")
    own = load_config(tmp_path / "a.yaml")
    _, check = preflight(own, tmp_path / "cache")
    assert own.params.batch_size == 20 and check.step_samples == 20
    assert len(built) == 1  # built and timed once, at the workload's batch (it was checked twice: the user waited)
    given = load_config(tmp_path / "b.yaml")
    _, check = preflight(given, tmp_path / "cache")
    assert given.params.batch_size == 8 and check.step_samples == 8  # the config's own batch is kept


def test_resume_with_the_same_space_file_matches_the_copy_that_holds_the_workloads_batch(tmp_path):
    from tuner.search._plan import same_space
    from tuner.space import parse_space

    def space(text):
        import yaml

        return parse_space(yaml.safe_load(text), source="s.yaml", name="s")

    given = space(SPLIT)
    saved = space(SPLIT).with_own_batch(20)[0]  # what study.json kept
    saved = parse_space(saved.definition(), source="study.json", name="s")  # as --resume reads it back
    assert same_space(given, saved)  # `--resume --space s.yaml` with the file the study started with
    assert not same_space(space(SPLIT.replace("high: 0.95", "high: 0.99")), saved)  # an edited file is another
    assert not same_space(space(SPLIT.replace("low: 4,", "low: 32,")), saved)  # one that cannot split 20 too
