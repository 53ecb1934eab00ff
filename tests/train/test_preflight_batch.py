"""The pre-flight finds the models' batch-statistics layers (issue 40): a study whose split of the effective batch
changes what is learned says so as it starts, and its report's knob roles follow."""

from __future__ import annotations

import sys

import torch

from tests.helpers.userworkloads import GOOD, write
from tuner.config import parse_config
from tuner.device import Device
from tuner.space import load_space, split_learning_note
from tuner.train import check_workload

CPU = Device("cpu", torch.device("cpu"))


def check(tmp_path, text):
    path = write(tmp_path, text, "pfb.py")
    sys.modules.pop("pfb", None)
    return check_workload(parse_config({"workload": f"{path}:make", "params": {"batch_size": 8}}), tmp_path / "cache",
                          CPU)


def test_a_model_with_batchnorm_makes_the_split_a_learning_knob_and_one_without_does_not(tmp_path):
    plain = check(tmp_path, GOOD)
    assert plain.batch_statistics == []
    assert split_learning_note(load_space("amp_loader"), plain.batch_statistics) is None
    normed = check(tmp_path, GOOD.replace("nn.Linear(4, hidden), nn.ReLU()", "nn.Linear(4, hidden), "
                                          "nn.BatchNorm1d(hidden), nn.ReLU()"))
    assert normed.batch_statistics == ["1 (BatchNorm1d)"]
    note = split_learning_note(load_space("amp_loader"), normed.batch_statistics)
    assert "1 (BatchNorm1d)" in note and "micro-batch size is a learning knob" in note
    assert split_learning_note(load_space("loader"), normed.batch_statistics) is None  # a fixed batch: no split


def test_the_built_in_cnn_has_batchnorm(tmp_path):
    cfg = parse_config({"workload": "cnn", "dataset": "synthetic", "params": {"batch_size": 8},
                        "budget": {"samples": 64}})
    assert check_workload(cfg, tmp_path / "cache", CPU).batch_statistics
