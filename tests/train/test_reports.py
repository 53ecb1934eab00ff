"""The reports a trial makes while it trains (issue 20): one per window, one per rung with a quality evaluation
the budget does not pay for, and a scheduler's stop unwinding the engine; without a reporter nothing changes."""

import pytest

from tuner.config import parse_config
from tuner.train import run_trial
from tuner.train.reports import StopTrial
from tests.helpers.userworkloads import GOOD, write


def cfg(tmp_path, **over):
    work = write(tmp_path / "proj", GOOD)
    base = {"workload": f"{work}:make", "budget": {"samples": 480}, "params": {"batch_size": 8, "device": "cpu"},
            "measure": {"warmup_steps": 1, "warmup_max_steps": 2, "windows": 6, "ceiling_seconds": 0},
            "quality": {"enabled": True}}
    for k, v in over.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return parse_config(base)


class Collect:
    def __init__(self, rungs, stop_at=None):
        self.rungs, self.stop_at = rungs, stop_at
        self.windows, self.rung_reports = [], []

    def window(self, report):
        self.windows.append(report)

    def rung(self, report):
        self.rung_reports.append(report)
        if report.rung == self.stop_at:
            raise StopTrial()


def test_windows_and_rungs_are_reported_with_the_quality_at_each_rung(tmp_path):
    rep = Collect([60, 180, 480])
    res = run_trial(cfg(tmp_path), cache_dir=tmp_path, reporter=rep)
    assert res.state == "complete" and res.value("samples") >= 480
    assert [w.window for w in rep.windows] == list(range(1, len(rep.windows) + 1))
    assert all(w.throughput > 0 and w.throughput_spread >= 0 and w.budget_used == w.samples for w in rep.windows)
    assert [r.rung for r in rep.rung_reports] == [0, 1]  # the last rung is the trial's end: its own report
    for r, budget in zip(rep.rung_reports, [60, 180]):
        assert r.result.state == "stopped" and r.result.rung == r.rung
        assert budget <= r.result.measured_at == r.budget_used < 480
        assert r.result.value("val_loss") is not None and r.result.throughput > 0  # quality and speed at the rung
    assert res.rung == 2 and res.measured_at == res.value("samples")  # a trial that trained its whole budget: top rung
    # the race's clock (tuner.schedule.race): training seconds so far, growing, inside the trial's wall time
    seconds = [w.train_seconds for w in rep.windows]
    assert all(s is not None and s > 0 for s in seconds) and seconds == sorted(seconds)
    assert seconds[-1] < res.value("wall_seconds")


def test_a_stop_at_a_rung_unwinds_the_engine(tmp_path):
    rep = Collect([60, 180, 480], stop_at=0)
    with pytest.raises(StopTrial):
        run_trial(cfg(tmp_path), cache_dir=tmp_path, reporter=rep)
    assert [r.rung for r in rep.rung_reports] == [0]
    assert max(w.samples for w in rep.windows) < 480


def test_without_a_reporter_a_trial_records_no_rung(tmp_path):
    res = run_trial(cfg(tmp_path), cache_dir=tmp_path)
    assert res.state == "complete" and res.rung is None and res.measured_at is None
