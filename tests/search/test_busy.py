"""A busy machine before the study (issue 58): said in one line, waited out with --busy wait, or refused with
--busy refuse before anything is written. The sample is planted: no test depends on this machine's load."""

from __future__ import annotations

import pytest

from tuner.cli import main
from tuner.measure.load import CpuShare
from tuner.search import _busy

BUSY = CpuShare(seconds=1.0, others_cpus=1.8, share=0.9, load1=3.4, cpus=2)
QUIET = CpuShare(seconds=1.0, others_cpus=0.05, share=0.02, load1=0.1, cpus=2)


@pytest.fixture
def machine(monkeypatch):
    """machine(*samples): the samples the check reads, in turn (the last repeats)."""
    monkeypatch.setenv("TUNER_BUSY_SAMPLE_S", "1")  # the check runs (conftest turns it off elsewhere)

    def plant(*samples):
        seq = list(samples)
        monkeypatch.setattr(_busy, "sample", lambda *a, **k: seq.pop(0) if len(seq) > 1 else seq[0])
        monkeypatch.setattr(_busy, "wait_quiet", lambda *a, **k: seq.pop(0) if len(seq) > 1 else seq[0])
    return plant


def test_refuse_stops_in_one_line_before_anything_is_written(tmp_path, capsys, machine):
    machine(BUSY)
    reports = tmp_path / "reports"
    code = main(["search", "--space", "amp_loader", "--study", "b", "--reports-dir", str(reports), "--busy", "refuse",
                 "--trials", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("tuner: error: the machine is busy: other processes took 90% of 2 CPUs")
    assert "--busy wait" in err[0] and not reports.exists()


def test_note_says_so_and_wait_waits_for_a_quiet_machine(capsys, machine):
    from rich.console import Console

    console = Console(stderr=True, width=200)
    machine(BUSY)
    assert _busy.check_machine("note", 5.0, console) is BUSY
    assert capsys.readouterr().err == ""  # said by the search once its checks pass (the test below)
    assert _busy.busy_warning(BUSY).startswith("the machine is busy: other processes took 90% of 2 CPUs")
    machine(BUSY, QUIET)
    assert _busy.check_machine("wait", 5.0, console) is QUIET
    err = capsys.readouterr().err
    assert "waiting up to 5 s for it to be quiet" in err and "warning" not in err
    machine(QUIET)
    assert _busy.check_machine("refuse", 5.0, console) is QUIET and capsys.readouterr().err == ""


def test_an_unknown_busy_choice_is_one_line(tmp_path, capsys):
    assert main(["search", "--space", "amp_loader", "--study", "b", "--reports-dir", str(tmp_path / "r"), "--busy",
                 "sometimes"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--busy must be one of note, wait, refuse" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_workload_that_names_no_function_is_its_own_line_on_a_busy_machine(tmp_path, capsys, machine):
    """Bad input is one line even when the machine is busy: the workload is imported before the busy warning."""
    machine(BUSY)
    (tmp_path / "mine.py").write_text("def make():\n    pass\n")
    reports = tmp_path / "reports"
    code = main(["search", "--space", "amp_loader", "--workload", f"{tmp_path / 'mine.py'}:nope", "--study", "b",
                 "--reports-dir", str(reports), "--trials", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "has no attribute 'nope'" in err[0] and not reports.exists()


def test_bad_input_the_pre_flight_finds_is_its_own_line_on_a_busy_machine(tmp_path, capsys, machine):
    """A quality metric evaluate() never returns is found by the pre-flight, after the machine was sampled: the
    busy warning waits until the plan's checks pass, so the error is the one line (it printed first before)."""
    from tests.helpers.userworkloads import GOOD, write

    machine(BUSY)
    work = write(tmp_path / "proj", GOOD.replace('quality=("val_loss", "min")', 'quality=("val_acc", "max")'),
                 "busy_quality.py")
    reports = tmp_path / "reports"
    code = main(["search", "--space", "loader", "--workload", f"{work}:make", "--study", "b", "--reports-dir",
                 str(reports), "--trials", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "quality metric 'val_acc' is not among what evaluate() returns" in err[0] and not reports.exists()
