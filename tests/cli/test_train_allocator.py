"""`tuner train` trains in a process whose allocator starts as the user's own fresh process's would (issue 58).

glibc's malloc raises its mmap threshold to the largest block a process frees. The pre-flight check runs the
workload's step and evaluate() before the run; in the run's own process that left its step's tensors on the heap,
and the run read 10-15% faster than the user's own script, which maps and faults them in every step."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from tests.helpers.userworkloads import HEADER, MAPS_8MB_LOSS

pytestmark = pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's malloc only")

WORKLOAD = HEADER + MAPS_8MB_LOSS + '''
def evaluate(models, val_batches):
    x = torch.ones(24 << 18)  # 24 MB, freed: a process's threshold rises to it
    del x
    return {"val_loss": 1.0}


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=loss, evaluate=evaluate,
                          quality=("val_loss", "min"))
'''


def test_the_run_trains_in_a_process_the_pre_flight_checks_allocations_did_not_reach(tmp_path):
    work = tmp_path / "plant.py"
    work.write_text(WORKLOAD)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {work}:make\nbudget: {{samples: 64}}\nparams: {{batch_size: 8, device: cpu}}\n"
                   f"measure: {{warmup_steps: 1, windows: 3, window_min_seconds: 0}}\n")
    log = tmp_path / "steps.jsonl"
    proc = subprocess.run([sys.executable, "-m", "tuner", "train", "--config", str(cfg), "--format", "json",
                           "--reports-dir", str(tmp_path / "r")], capture_output=True, text=True,
                          env={**os.environ, "PLANT_LOG": str(log)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(steps) == 2, steps  # the pre-flight's first step in one process, the run's in another
    check, run = steps
    assert check["pid"] != run["pid"]
    # The pre-flight's evaluate() freed 24 MB in its process; the run's process never saw it, so an 8 MB block is
    # still mapped on its own there, as in a fresh python that imported torch (its threshold a few MB).
    assert run["step_maps_8mb"], steps
