"""Splitting one effective batch is exact without batch statistics (issue 40): the same seed trains the same loss
trajectory at 64 x 1 and 16 x 4, judged by the parity statistic that judges numerics knobs (tuner.parity)."""

from __future__ import annotations

import sys

from tests.helpers.userworkloads import GOOD, write
from tuner.config import parse_config
from tuner.measure.batch_stats import batch_statistics_layers
from tuner.parity import judge, trajectory

STEPS = 24


def test_two_splits_of_one_effective_batch_train_the_same_trajectory_without_batch_statistics(tmp_path):
    path = write(tmp_path, GOOD.replace("def data(n=96)", "def data(n=160)"), "split_parity.py")
    sys.modules.pop("split_parity", None)

    def run(batch, accumulation, seed=0):
        cfg = parse_config({"workload": f"{path}:make", "budget": {"samples": 10 ** 6},
                            "params": {"batch_size": batch, "accumulation_steps": accumulation, "seed": seed,
                                       "device": "cpu"}})
        return trajectory(cfg, STEPS, tmp_path / "cache")

    whole, split, other_seed = run(64, 1), run(16, 4), run(64, 1, seed=1)
    assert len(whole) == len(split) == STEPS
    verdict = judge("batch_size=16 x accumulation_steps=4", whole, split, other_seed)
    assert verdict.state == "within seed noise", verdict.text()
    assert max(abs(a - b) for a, b in zip(whole, split)) < 1e-5 * max(abs(x) for x in whole)  # rounding only
    assert verdict.seed_gap > 0  # a change of seed does show: the statistic can tell them apart


def test_with_batchnorm_the_split_changes_the_trajectory(tmp_path):
    """The counter-case, which the test above would catch: BatchNorm normalizes by the micro-batch."""
    text = GOOD.replace("def data(n=96)", "def data(n=160)").replace(
        "nn.Linear(4, hidden), nn.ReLU()", "nn.Linear(4, hidden), nn.BatchNorm1d(hidden), nn.ReLU()")
    path = write(tmp_path, text, "split_bn.py")
    sys.modules.pop("split_bn", None)

    def run(batch, accumulation):
        cfg = parse_config({"workload": f"{path}:make", "budget": {"samples": 10 ** 6},
                            "params": {"batch_size": batch, "accumulation_steps": accumulation, "device": "cpu"}})
        return trajectory(cfg, STEPS, tmp_path / "cache")

    whole, split = run(64, 1), run(16, 4)
    assert max(abs(a - b) for a, b in zip(whole, split)) > 1e-3 * max(abs(x) for x in whole)
