"""`tuner parity` as a user runs it: one verdict per numerics knob, JSON on stdout, one-line errors with exit 2."""

import json

import pytest

from tuner.cli import main

CNN = """
workload: cnn
dataset: synthetic
workload_options: {image_size: 16}
params: {batch_size: 8, num_workers: 0, precision: fp32}
quality: {enabled: false}
"""


def _config(tmp_path, text=CNN):
    p = tmp_path / "run.yaml"
    p.write_text(text)
    return p


def test_a_knob_compared_with_fp32_prints_one_verdict_as_json(tmp_path, capsys):
    rc = main(["parity", "--config", str(_config(tmp_path)), "--knob", "precision=bf16", "--steps", "16",
               "--format", "json", "--reports-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out)  # nothing else on stdout
    [v] = doc["verdicts"]
    assert doc["steps"] == 16 and v["knob"] == "precision=bf16"
    assert v["state"] in ("within seed noise", "drifts", "diverged") and v["text"].startswith("precision=bf16: ")


def test_a_knob_that_is_not_numerics_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(["parity", "--config", str(_config(tmp_path)), "--knob", "batch_size=32"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "--knob 'batch_size=32'" in err and "precision" in err


def test_an_fp32_config_without_a_knob_says_what_to_compare(tmp_path, capsys):
    rc = main(["parity", "--config", str(_config(tmp_path))])
    err = capsys.readouterr().err
    assert rc == 2 and "nothing to compare" in err and "--knob precision=bf16" in err


def test_a_bad_knob_value_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(["parity", "--config", str(_config(tmp_path)), "--knob", "precision=fp64"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "precision=fp64" in err


@pytest.mark.parametrize("value", ["[", "{a: 1", "&a [*a]"])
def test_a_knob_value_that_is_not_yaml_is_one_line_and_exit_2(tmp_path, capsys, value):
    """`--knob precision=[` raised yaml's ParserError as an internal error; it is one line now, as -o's values."""
    rc = main(["parity", "--config", str(_config(tmp_path)), "--knob", f"precision={value}"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--knob 'precision=" in err
    assert "internal error" not in err and "Traceback" not in err
