"""`tuner export --verify` re-runs each run in a process of its own, as the study's trials and re-runs ran (issue
58): in one process the runs after the first inherited what the ones before allocated (glibc's malloc keeps the
thresholds a freed block raised), and read faster than the study's fresh processes had."""

from __future__ import annotations

import json
import os
import platform
import sys

import pytest

from tests.helpers.userworkloads import HEADER, MAPS_8MB_LOSS

WORKLOAD = HEADER + MAPS_8MB_LOSS + '''
_loss = loss


def run_loss(models, batch):
    """The runs' first steps only: the pre-flight's check runs in a child of each run's process."""
    if tuner.trial_context().preflight:
        return F.cross_entropy(models["net"](batch[0]), batch[1])
    return _loss(models, batch)


def evaluate(models, val_batches):
    x = torch.ones(24 << 18)  # 24 MB, freed: the threshold of the process that runs it rises to it
    del x
    return {"val_loss": 1.0}


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=run_loss,
                          evaluate=evaluate, quality=("val_loss", "min"))
'''


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_each_verify_run_trains_in_a_fresh_process_of_its_own(tmp_path, monkeypatch):
    from tuner.config import parse_config
    from tuner.report.verify import verify

    log = tmp_path / "steps.jsonl"
    work = tmp_path / "plant.py"
    work.write_text(f"import os\nos.environ['PLANT_LOG'] = {str(log)!r}\n" + WORKLOAD)
    cfg = parse_config({"workload": f"{work}:make", "budget": {"samples": 64},
                        "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"warmup_steps": 1, "windows": 3, "window_min_seconds": 0}}, "test")
    v = verify(cfg, None, tmp_path / "r", repeats=2)
    assert v.states == ["complete", "complete"], v.errors
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(runs) == 2 and len({r["pid"] for r in runs}) == 2 and os.getpid() not in {r["pid"] for r in runs}
    # the first run's evaluate() freed 24 MB in its process: the second run's, a fresh one, never saw it
    assert all(r["step_maps_8mb"] for r in runs), runs


def test_a_verify_run_trains_under_what_its_configs_knobs_set_before_torch_loads(tmp_path):
    """The exported config's wait policy reaches the run's process before torch loads there: `export --verify`
    could not set it in its own process once torch was loaded, and said so; each run's process now starts under
    it."""
    from tuner.config import parse_config
    from tuner.report.verify import verify

    log = tmp_path / "env.txt"
    work = tmp_path / "envplant.py"
    work.write_text(HEADER + f'''
import os


def loss(models, batch):
    if not tuner.trial_context().preflight:
        with open({str(log)!r}, "a") as f:
            f.write(str(os.environ.get("OMP_WAIT_POLICY")) + "\\n")
    return F.cross_entropy(models["net"](batch[0]), batch[1])


def make():
    return tuner.Workload(models={{"net": lambda: nn.Linear(4, 2)}}, datasets=data, loss=loss, evaluate=evaluate,
                          quality=("val_loss", "min"))
''')
    cfg = parse_config({"workload": f"{work}:make", "budget": {"samples": 32},
                        "params": {"batch_size": 8, "device": "cpu", "omp_wait_policy": "PASSIVE"},
                        "measure": {"warmup_steps": 1, "windows": 2, "window_min_seconds": 0}}, "test")
    v = verify(cfg, None, tmp_path / "r", repeats=1)
    assert v.states == ["complete"], v.errors
    assert set(log.read_text().split()) == {"PASSIVE"}
