"""A confirmation re-run in a fresh child process of its trial process (tuner.search._fresh), outside Ray here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tuner.search._fresh import run_fresh
from tuner.search._trial import REPEAT_KEY, TRIAL_KEY, TrialSetup, record_from_payload
from tuner.space import Space
from tuner.study import Objective, TrialResult

OBJ = [Objective(metric="throughput", direction="max")]


def engine_pid(cfg, *, out_dir=None, **_):
    """Fake: writes the process it ran in beside its grid; throughput from the batch size."""
    (Path(out_dir) / "pid").write_text(str(os.getpid()))
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01)


def engine_killed(cfg, **_):
    """Fake: the process dies as the kernel's out-of-memory killer would end it, without a word."""
    os._exit(137)


def _setup(tmp_path: Path) -> TrialSetup:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the child cannot import a test module
    space = Space.model_validate({"objectives": [], "params": {"batch_size": 8}})
    return TrialSetup(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                         "params": {"device": "cpu"}},
                      objectives=OBJ, study_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"))


def test_each_rerun_runs_in_a_fresh_process_and_reports_as_run_one_would(tmp_path):
    setup = _setup(tmp_path)
    pids = []
    for repeat in (0, 1):
        record = record_from_payload(run_fresh({TRIAL_KEY: 3, REPEAT_KEY: repeat}, setup, engine_pid))
        assert record is not None and record.state == "complete" and record.trial == 3
        assert record.get("throughput") == 8.0 and record.config is not None and record.started is not None
        pids.append(int((tmp_path / "s" / "trials" / "0003" / "confirm" / f"{repeat:02d}" / "pid").read_text()))
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_a_rerun_whose_process_dies_without_a_report_is_an_error_trial(tmp_path):
    record = record_from_payload(run_fresh({TRIAL_KEY: 3, REPEAT_KEY: 0}, _setup(tmp_path), engine_killed))
    assert record is not None and record.state == "error" and record.trial == 3
    assert "exit status 137" in (record.error or "")
