"""The fixed-effective-batch benchmark's rows (benchmarks/fixed_batch.py), computed from planted trajectories and
throughputs: its targets pass when the splits train alike and the speed moves, and miss when they do not."""

from __future__ import annotations

import pytest

from benchmarks.fixed_batch import EXACT, Arm, judge_case, markdown, rows, speed_figures, split_labels
from benchmarks.table import Row

LABELS = ["64x1", "32x2", "16x4", "8x8"]
STEPS = 40
REF = [2.3 * 0.97 ** i for i in range(STEPS)]
SEED = [x * (1.1 if i % 2 else 0.92) for i, x in enumerate(REF)]  # another seed: ~10% off, step by step


def _arms(split_losses, layers=(), val=None):
    """64 x 1, each split with `split_losses(label)`, and 64 x 1 from another seed."""
    val = val or {}
    arms = {"64x1": Arm(REF, 1.0, 0.7, 1.0, 1438, list(layers))}
    arms.update({k: Arm(split_losses(k), val.get(k, 1.0001), 0.7, 1.0, 1438, list(layers)) for k in LABELS[1:]})
    arms["64x1 seed 1"] = Arm(SEED, 1.2, 0.6, 1.0, 1438, list(layers))
    return arms


def _verdicts(exact, bn, speed):
    out = rows(exact, bn, speed, STEPS, 3, 3.0, {"commit": None, "dirty": False, "date": "2026-11-27T04:00:00+00:00",
                                                 "load": [1.0], "machine": "test"})
    return {r["id"]: Row.from_json(r, "fixed-batch.json").verdict() for r in out}, out


EXACT_CASE = judge_case(_arms(lambda k: [x * (1 + 1e-6) for x in REF]), LABELS, "64x1 seed 1")
BN_CASE = judge_case(_arms(lambda k: [x * 1.05 for x in REF], layers=["body.1 (BatchNorm2d)"],
                           val={"32x2": 0.8, "16x4": 0.7, "8x8": 0.6}), LABELS, "64x1 seed 1")
SPEED = speed_figures({"64x1": [300.0, 310.0, 305.0], "32x2": [290.0, 280.0, 295.0], "16x4": [240.0, 250.0, 245.0],
                       "8x8": [180.0, 175.0, 185.0]})


def test_the_splits_of_64():
    assert split_labels(64) == [("64x1", 64, 1), ("32x2", 32, 2), ("16x4", 16, 4), ("8x8", 8, 8)]
    assert [s[0] for s in split_labels(12)] == ["12x1", "6x2", "3x4"]  # 8 does not divide 12: no 1.5 x 8


def test_splits_that_train_alike_and_a_speed_that_moves_pass_every_row():
    verdicts, out = _verdicts(EXACT_CASE, BN_CASE, SPEED)
    assert verdicts == {"17a": "pass", "17b": "pass", "17c": "pass"}
    assert EXACT_CASE.within == 3 and EXACT_CASE.train_size == 1438
    assert out[2]["figure"] == pytest.approx(305 / 180) and out[2]["baseline"] == pytest.approx(185 / 175)
    # the BatchNorm case's validation loss moved by 0.2-0.4 against another seed's 0.2: in its details and note
    assert out[1]["details"]["val_gap"] == pytest.approx({"32x2": 0.2, "16x4": 0.3, "8x8": 0.4})
    assert out[1]["details"]["seed_val_gap"] == pytest.approx(0.2)
    assert "body.1 (BatchNorm2d)" in out[1]["note"]


def test_a_split_that_drifts_or_is_not_exact_misses_the_no_batch_statistics_row():
    half = STEPS // 2
    drifting = judge_case(_arms(lambda k: REF[:half] + [x * (1.6 if k == "8x8" else 1.0) for x in REF[half:]]),
                          LABELS, "64x1 seed 1")
    assert drifting.states["8x8"] == "drifts" and drifting.within == 2
    assert _verdicts(drifting, BN_CASE, SPEED)[0]["17a"] == "MISSED"
    # within the seed noise over the whole run, but 1% off on the first steps: not the same gradient
    inexact = judge_case(_arms(lambda k: [x * (1.01 if i < 22 else 1.0) for i, x in enumerate(REF)]), LABELS,
                         "64x1 seed 1")
    assert inexact.within == 3 and max(inexact.step_gap.values()) > EXACT
    assert _verdicts(inexact, BN_CASE, SPEED)[0]["17a"] == "MISSED"
    diverged = judge_case(_arms(lambda k: REF[:30] + [float("nan")] if k == "16x4" else list(REF)), LABELS,
                          "64x1 seed 1")
    assert diverged.states["16x4"] == "diverged" and diverged.step_gap["16x4"] == 0.0  # its 30 finite steps: exact
    assert _verdicts(diverged, BN_CASE, SPEED)[0]["17a"] == "MISSED"


def test_rounding_that_compounds_over_the_run_is_still_exact():
    """Rounding's differences grow step by step (1e-7 of the loss at first, 1e-4 by step 80 on the CNN): exactness is
    read on the first steps, where a split with other math is already far off."""
    compounding = judge_case(_arms(lambda k: [x * (1 + 1e-7 * 1.4 ** i) for i, x in enumerate(REF)]), LABELS,
                             "64x1 seed 1")
    assert max(compounding.run_gap.values()) > 1e-3 > EXACT > max(compounding.step_gap.values())
    assert _verdicts(compounding, BN_CASE, SPEED)[0]["17a"] == "pass"


def test_batch_statistics_found_where_the_split_is_exact_miss_both_model_rows():
    exact_with_bn = judge_case(_arms(lambda k: list(REF), layers=["bn (BatchNorm1d)"]), LABELS, "64x1 seed 1")
    verdicts, _ = _verdicts(exact_with_bn, exact_with_bn, SPEED)
    assert verdicts["17a"] == "MISSED"  # a layer detected: the split is not a speed knob there
    assert verdicts["17b"] == "MISSED"  # the split changed nothing: the detection would not be warranted
    undetected = judge_case(_arms(lambda k: [x * 1.05 for x in REF]), LABELS, "64x1 seed 1")
    assert _verdicts(EXACT_CASE, undetected, SPEED)[0]["17b"] == "MISSED"


def test_a_speed_difference_inside_one_splits_own_spread_misses():
    noisy = speed_figures({"64x1": [300.0, 200.0, 250.0], "32x2": [280.0, 270.0, 275.0], "8x8": [240.0, 245.0]})
    assert noisy["across"] == pytest.approx(275 / 242.5) and noisy["noise"] == pytest.approx(1.5)
    assert _verdicts(EXACT_CASE, BN_CASE, noisy)[0]["17c"] == "MISSED"
    failed = speed_figures({"64x1": [300.0], "8x8": [None]})  # one reading, one failed trial: nothing to compare
    assert failed["ratio"] is None
    assert _verdicts(EXACT_CASE, BN_CASE, failed)[0]["17c"] == "not measured"


def test_the_markdown_shows_each_rows_result_and_each_splits_verdict():
    _, out = _verdicts(EXACT_CASE, BN_CASE, SPEED)
    from dataclasses import asdict

    doc = {"effective_batch": 64, "labels": LABELS, "steps": STEPS, "rounds": 3, "seconds": 1.0, "load": [1.0],
           "date": "2026-11-27T04:00:00+00:00", "machine": "test", "rows": out,
           "cases": {"cnn, BatchNorm removed": asdict(EXACT_CASE), "cnn": asdict(BN_CASE)}}
    md = markdown(doc)
    assert "| 17c | throughput varies with the split of 64" in md and "| pass |" in md
    assert "| cnn | 8x8 | 8x8: within seed noise" in md and "| 180 |" in md


def test_an_arm_trains_the_parity_runs_own_steps_and_is_scored(tmp_path):
    """run_arm trains through tuner.train.train_steps (one loop for both): the same losses step by step as a parity
    trajectory of the same config, then its models' batch-statistics layers and the training set's size."""
    import sys

    from benchmarks.fixed_batch import run_arm
    from tests.helpers.userworkloads import GOOD, write
    from tuner.config import parse_config
    from tuner.parity import FP32, arm_config, trajectory

    text = GOOD.replace("nn.Linear(4, hidden), nn.ReLU()", "nn.Linear(4, hidden), nn.BatchNorm1d(hidden), nn.ReLU()")
    path = write(tmp_path, text, "fixed_batch_arm.py")
    sys.modules.pop("fixed_batch_arm", None)
    cfg = parse_config({"workload": f"{path}:make", "budget": {"samples": 10 ** 6},
                        "params": {"batch_size": 16, "accumulation_steps": 2, "device": "cpu"}})
    arm = run_arm(cfg, 6, tmp_path / "cache")
    assert arm.losses == trajectory(arm_config(cfg, dict(FP32)), 6, tmp_path / "cache")
    assert len(arm.losses) == 6 and arm.train_size == 64
    assert arm.batch_stat_layers == ["1 (BatchNorm1d)"]
