"""A reused trial process (Ray Tune's reuse_actors: every search trial, and now every confirmation round, in one
process) starts each trial from fresh models, seed and loader: the process's caches and warm-up carry over,
the training does not. Device pinned to cpu."""

from __future__ import annotations

from tuner.config import parse_config
from tuner.train import run_trial

CONFIG = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
          "budget": {"samples": 192}, "quality": {"enabled": False},
          "params": {"batch_size": 16, "num_workers": 0, "device": "cpu", "threads": 1, "seed": 3},
          # windows of fixed steps after a fixed warm-up, so the curve's points do not move with the step times
          "measure": {"warmup_steps": 1, "warmup_max_steps": 1, "windows": 2, "min_windows": 1,
                      "window_min_steps": 4, "window_min_seconds": 0, "ceiling_seconds": 0}}


def test_the_same_config_and_seed_run_twice_in_one_process_learn_the_same_curve(tmp_path):
    first = run_trial(parse_config(CONFIG, "test"), cache_dir=tmp_path)
    other = run_trial(parse_config({**CONFIG, "params": {**CONFIG["params"], "seed": 4}}, "test"), cache_dir=tmp_path)
    again = run_trial(parse_config(CONFIG, "test"), cache_dir=tmp_path)
    assert first.state == again.state == other.state == "complete"
    assert first.loss_curve and again.loss_curve == first.loss_curve  # nothing learned earlier carried over
    assert other.loss_curve != first.loss_curve  # the seed does reach the curve (a planted difference)
