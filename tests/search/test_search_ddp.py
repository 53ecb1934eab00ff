"""A multi-GPU trial's path (Tune trial -> Ray Train TorchTrainer -> engine under DDP), smoke-tested on the CPU
with two gloo workers. About 35 s, so it runs only with TUNER_SLOW_TESTS=1. What only real GPUs can confirm:
NCCL, one GPU per worker, and the DDP throughput scaling."""

from __future__ import annotations

import json
import os

import pytest

from tuner.space import parse_space
from tuner.search._trial import RECORD_KEY, TRIAL_KEY, TrialSetup
from tuner.search._trainable import trainable

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(os.environ.get("TUNER_SLOW_TESTS") != "1", reason="slow (~35 s): set TUNER_SLOW_TESTS=1"),
]


def test_ddp_trial_reports_rank_zero_metrics_to_tune(ray_session, tmp_path):
    from ray import tune

    space = parse_space({
        "objectives": {"cnn": [{"metric": "throughput", "direction": "max"}, {"metric": "loss", "direction": "min"}]},
        "params": {"batch_size": {"type": "categorical", "choices": [16]}, "num_workers": 0},
    }, source="ddp.yaml", name="ddp")
    setup = TrialSetup(
        space=space, objectives=space.objectives_for("cnn"), study_dir=str(tmp_path / "study"),
        cache_dir=str(tmp_path / ".cache"),
        base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 256}, "gpus": 2,
              "params": {"device": "cpu"}},
        ddp_workers=2, ddp_use_gpu=False, ddp_cpus_per_worker=0.5,  # 1 CPU for the trial + 2 x 0.5: fits in 2
    )
    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), {"cpu": 1})
    grid = tune.Tuner(fn, param_space={TRIAL_KEY: 7, "batch_size": 16},
                      tune_config=tune.TuneConfig(num_samples=1),
                      run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0)).fit()
    result = grid[0]
    assert result.error is None, result.error
    record = json.loads(result.metrics[RECORD_KEY])
    assert record["trial"] == 7 and record["state"] == "complete", record.get("error")
    assert record["throughput"] > 0 and record["samples"] >= 256  # both ranks' samples
    assert result.metrics["objective_throughput"] == record["throughput"]


def test_ddp_trial_closes_its_rungs_on_every_rank_and_reports_rank_zero_quality(ray_session, tmp_path):
    """Under a rung scheduler every rank reports each window and each rung alike (Train V2 reports are
    collective) and agrees on when a rung closes; rank 0 evaluates. A deadlock here would time the trial out."""
    from ray import tune

    from tuner.search._trial import RUNGS_KEY

    space = parse_space({
        "objectives": {"cnn": [{"metric": "throughput", "direction": "max"}, {"metric": "loss", "direction": "min"}]},
        "params": {"batch_size": {"type": "categorical", "choices": [16]}, "num_workers": 0},
    }, source="ddp.yaml", name="ddp")
    setup = TrialSetup(
        space=space, objectives=space.objectives_for("cnn"), study_dir=str(tmp_path / "study"),
        cache_dir=str(tmp_path / ".cache"),
        base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 384}, "gpus": 2,
              "params": {"device": "cpu"}, "measure": {"warmup_max_steps": 2}},
        ddp_workers=2, ddp_use_gpu=False, ddp_cpus_per_worker=0.5,
    )
    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), {"cpu": 1})
    grid = tune.Tuner(fn, param_space={TRIAL_KEY: 8, "batch_size": 16, RUNGS_KEY: [128.0, 384.0]},
                      tune_config=tune.TuneConfig(num_samples=1),
                      run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0)).fit()
    result = grid[0]
    assert result.error is None, result.error
    record = json.loads(result.metrics[RECORD_KEY])
    assert record["state"] == "complete", record.get("error")
    assert record["rung"] == 1 and record["measured_at"] >= 384 and record["loss"] is not None
