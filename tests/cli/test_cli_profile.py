"""`tuner profile` as a user runs it: on an exported config, JSON on stdout, the trace on disk, one-line errors."""

import json

import pytest

from tests.helpers.fakes import ceilings_on_a_ticking_clock
from tuner.cli import main


@pytest.fixture(autouse=True)
def _kineto_log_level(monkeypatch):
    """The command quiets torch.profiler's backend through the environment; keep that out of other tests."""
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)

EXPORTED = """
workload: cnn
dataset: synthetic
workload_options: {image_size: 16}
budget: {samples: 96}
params: {batch_size: 8, accumulation_steps: 1, num_workers: 0, precision: fp32, beta1: 0.5, beta2: 0.999}
measure: {warmup_steps: 1, windows: 2, window_min_steps: 1, ceiling_seconds: 1.0}
quality: {enabled: false}
provenance: {study: demo, trial: 3, pick: knee, pytorch: {DataLoader: {batch_size: 8}}}
"""


def write(tmp_path, text=EXPORTED):
    p = tmp_path / "best.yaml"
    p.write_text(text)
    return p


def test_json_on_an_exported_config(tmp_path, capsys, monkeypatch):
    ceilings_on_a_ticking_clock(monkeypatch, "tuner.train.profile")  # both ceilings measured at any load
    reports = tmp_path / "r"
    rc = main(["profile", "--config", str(write(tmp_path)), "--steps", "2", "--top", "4", "--format", "json",
               "--reports-dir", str(reports)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)  # exactly one JSON document on stdout
    assert data["trace"] == str(reports / "profile" / "trace.json") and data["steps"] == 2
    assert isinstance(json.loads((reports / "profile" / "trace.json").read_text())["traceEvents"], list)
    assert set(data["phases"]) == {"data", "forward", "backward", "optimizer", "other"}
    assert 0 < len(data["top_ops"]) <= 4 and {"name", "calls", "self_ms", "share"} <= set(data["top_ops"][0])
    for key in ("throughput", "compute_ceiling", "input_ceiling", "bound", "headroom", "device"):
        assert data[key], key


def test_table_names_the_operators_the_parts_and_the_verdict(tmp_path, capsys, monkeypatch):
    from tuner.measure import flops

    monkeypatch.setattr(flops, "matmul_peak", lambda device, precision, seconds: 1e13)  # fast, beyond any CPU
    monkeypatch.setattr(flops, "_MEMO", {})
    ceilings_on_a_ticking_clock(monkeypatch, "tuner.train.profile")  # the compute ceiling measured at any load
    trace = tmp_path / "elsewhere" / "t.json"
    rc = main(["profile", "-c", str(write(tmp_path)), "--steps", "1", "--out", str(trace),
               "--reports-dir", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "operators by self CPU time" in out and "aten::" in out
    assert "forward" in out and "backward" in out and "verdict" in out and "of the compute ceiling" in out
    assert str(trace) in out and trace.exists()
    assert "of the device's matmul peak (10T FLOP/s;" in out  # of_peak beside the ceilings


def test_a_missing_config_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(["profile", "--config", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "nope.yaml" in err and "Traceback" not in err


def test_a_bad_key_and_zero_steps_are_refused_with_exit_2(tmp_path, capsys):
    assert main(["profile", "--config", str(write(tmp_path, EXPORTED + "extra: 1\n"))]) == 2
    assert "extra: unknown key" in capsys.readouterr().err
    assert main(["profile", "--config", str(write(tmp_path)), "--steps", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--steps" in err


def test_a_trace_path_that_is_a_folder_is_refused_before_anything_runs(tmp_path, capsys):
    rc = main(["profile", "--config", str(write(tmp_path)), "--out", str(tmp_path), "--reports-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "it is a folder" in err
