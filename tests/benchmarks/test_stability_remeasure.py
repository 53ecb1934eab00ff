"""benchmarks/stability.py re-measures a study's top configs each in a process of its own, as the study's trials
run: a run in the benchmark's own warm process read 10-38% faster than the study's trials of the same config
(glibc's malloc thresholds raised by every run before it), which made row 10 favour the figure that read high."""

from __future__ import annotations

import os

from benchmarks.stability import fresh_runs
from tuner.config import parse_config


def _config(batch_size: int):
    return parse_config({"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
                         "budget": {"samples": 64}, "params": {"batch_size": batch_size, "device": "cpu"},
                         "measure": {"warmup_steps": 1, "windows": 2, "min_windows": 2, "window_min_steps": 1,
                                     "window_min_seconds": 0, "ceiling_seconds": 0},
                         "quality": {"enabled": False}})


def test_each_remeasurement_trains_in_a_fresh_process_and_reads_its_figures(tmp_path):
    configs = {"a": (_config(8), None, None), "b": (_config(16), None, None)}
    done = fresh_runs(configs, ["throughput"], tmp_path / "cache", rounds=2)
    assert [k for k, _, _ in done] == ["a", "b", "b", "a"]  # round-robin, the order rotated each round
    pids = [pid for _, pid, _ in done]
    assert os.getpid() not in pids and len(set(pids)) == 4  # a process of its own for every run
    assert all(values["throughput"] > 0 for _, _, values in done)
