"""The benchmark table is generated from committed results files: a result is computed from the figures and a
target that can fail, a row measured on other code says stale, a missing row says not measured."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks.common import BenchResult, write_rows
from benchmarks.table import EXPECTED, SCHEMA, Row, Target, load_rows, render_markdown, target


def _repo(tmp_path, rows, commit=None):
    """A git repository holding one results file with `rows`, measured at `commit` (default: its HEAD)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "tuner").mkdir()
    (tmp_path / "tuner" / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "code")
    head = _git(tmp_path, "rev-parse", "HEAD").strip()
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for r in rows:
        r.setdefault("commit", commit or head)
    (results / "run-full.json").write_text(json.dumps({"schema": SCHEMA, "rows": rows}))
    return tmp_path


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def _row(rid="2", ratio=0.09, **kw):
    d = {"id": rid, "benchmark": "overhead", "name": "total overhead", "figure": 27.0, "unit": "s",
         "baseline": 300.0, "ratio": ratio, "target": target("ratio <= 0.10", ("ratio", "<=", 0.10)).to_json(),
         "date": "2026-11-26T22:00:00+00:00"}
    d.update(kw)
    return d


def _line(md, rid):
    return next(ln for ln in md.splitlines() if ln.startswith(f"| {rid} |"))


def test_a_row_passes_or_misses_by_its_figures_not_by_a_stored_verdict(tmp_path):
    repo = _repo(tmp_path, [_row("2", 0.09, **{"pass": False}), _row("3", 0.5)])
    md = render_markdown(repo)
    assert "| pass |" in _line(md, "2") and "current" in _line(md, "2")
    assert "**MISSED**" in _line(md, "3")


def test_a_row_measured_on_other_code_is_stale(tmp_path):
    repo = _repo(tmp_path, [])
    old = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "tuner" / "code.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "change the code")
    (repo / "benchmarks" / "results" / "run-full.json").write_text(
        json.dumps({"schema": SCHEMA, "rows": [_row("2", 0.09, commit=old)]}))
    assert f"stale: measured at {old[:7]}" in _line(render_markdown(repo), "2")


def test_a_row_stays_current_through_a_comment_or_docstring_change_but_not_through_a_message_change(tmp_path):
    """Mending a docstring must not send every row back to hours of re-reading; a changed string that the code
    prints, or a new file, is code and stales the row."""
    repo = _repo(tmp_path, [])
    (repo / "tuner" / "code.py").write_text('"""Old words."""\n\ndef f():\n    """Old."""\n    return "msg"\n')
    _git(repo, "commit", "-qam", "code")
    old = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "benchmarks" / "results" / "run-full.json").write_text(
        json.dumps({"schema": SCHEMA, "rows": [_row("2", 0.09, commit=old)]}))
    (repo / "tuner" / "code.py").write_text('"""New words."""\n\n\ndef f():  # why\n    return "msg"\n')
    _git(repo, "commit", "-qam", "docstrings and a comment")
    line = _line(render_markdown(repo), "2")
    assert "| pass |" in line and f"current (measured at {old[:7]}; only comments and docstrings" in line
    (repo / "tuner" / "code.py").write_text('"""New words."""\n\n\ndef f():  # why\n    return "message"\n')
    _git(repo, "commit", "-qam", "a message")
    assert f"stale: measured at {old[:7]}" in _line(render_markdown(repo), "2")
    (repo / "tuner" / "code.py").write_text('"""New words."""\n\n\ndef f():  # why\n    return "msg"\n')
    (repo / "tuner" / "more.py").write_text("")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "message back, a new module")
    assert f"stale: measured at {old[:7]}" in _line(render_markdown(repo), "2")


def test_a_change_to_one_standalone_benchmark_leaves_other_rows_current_and_its_own_stale(tmp_path):
    repo = _repo(tmp_path, [])
    (repo / "benchmarks" / "time_to_target.py").write_text("SIZE = 1\n")
    (repo / "benchmarks" / "common.py").write_text("SHARED = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "scripts")
    old = _git(repo, "rev-parse", "HEAD").strip()
    rows = [_row("2", 0.09, commit=old), _row("15", 0.9, benchmark="parity", commit=old),
            _row("tt-cnn", 0.9, benchmark="time_to_target", commit=old)]
    (repo / "benchmarks" / "results" / "run-full.json").write_text(json.dumps({"schema": SCHEMA, "rows": rows}))
    (repo / "benchmarks" / "time_to_target.py").write_text("SIZE = 2\n")
    _git(repo, "commit", "-qam", "resize the time-to-target benchmark")
    md = render_markdown(repo)
    assert "current" in _line(md, "2") and "current" in _line(md, "15")
    assert f"stale: measured at {old[:7]}" in _line(md, "tt-cnn")
    (repo / "benchmarks" / "common.py").write_text("SHARED = 2\n")  # what every benchmark imports
    _git(repo, "commit", "-qam", "change the shared module")
    md = render_markdown(repo)
    assert all(f"stale: measured at {old[:7]}" in _line(md, rid) for rid in ("2", "15", "tt-cnn"))


def test_a_change_to_levers_stales_its_rows_and_fixed_batchs_which_runs_in_its_order_only(tmp_path):
    repo = _repo(tmp_path, [])
    (repo / "benchmarks" / "levers.py").write_text("ROUNDS = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "scripts")
    old = _git(repo, "rev-parse", "HEAD").strip()
    rows = [_row("2", 0.09, commit=old), _row("15", 0.9, benchmark="parity", commit=old),
            _row("levers-cl-gan", 1.0, benchmark="levers", commit=old),
            _row("17c", 1.1, benchmark="fixed_batch", commit=old),
            _row("mf-t90-cnn", 0.4, benchmark="multifidelity", commit=old)]
    (repo / "benchmarks" / "results" / "run-full.json").write_text(json.dumps({"schema": SCHEMA, "rows": rows}))
    (repo / "benchmarks" / "levers.py").write_text("ROUNDS = 2\n")
    _git(repo, "commit", "-qam", "change the levers benchmark")
    md = render_markdown(repo)
    assert all("current" in _line(md, rid) for rid in ("2", "15", "mf-t90-cnn"))
    assert all(f"stale: measured at {old[:7]}" in _line(md, rid) for rid in ("levers-cl-gan", "17c"))


def test_a_row_goes_stale_only_with_the_benchmark_modules_its_process_ran_before_it(tmp_path):
    """A stand-alone script's results file, run.py --only NAME's run-full-NAME.json, or run-full.json up to the
    row's own benchmark in run.py's order: its rows depend on the benchmark modules that process imported (followed
    through imports), not on one it never ran or ran after the row was measured."""
    repo = _repo(tmp_path, [])
    files = {"benchmarks/common.py": 'BENCHMARKS = ("overhead", "speedup", "stability")\nSHARED = 1\n',
             "benchmarks/run.py": "from benchmarks.common import SHARED\n",
             "benchmarks/overhead.py": "def prewarm():\n    pass\n",
             "benchmarks/speedup.py": "SIZE = 1\n",
             "benchmarks/stability.py": "def run():\n    from benchmarks.overhead import prewarm\n",
             "benchmarks/time_to_target.py": "from benchmarks.common import SHARED\nSIZE = 1\n"}
    for path, text in files.items():
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "scripts")
    old = _git(repo, "rev-parse", "HEAD").strip()
    results = repo / "benchmarks" / "results"
    (results / "run-full.json").write_text(json.dumps({"schema": SCHEMA, "rows": [
        _row("2", 0.09, commit=old), _row("10", 0.5, benchmark="stability", commit=old)]}))
    (results / "run-full-stability.json").write_text(json.dumps({"schema": SCHEMA, "rows": [
        _row("9", 0.09, benchmark="stability", commit=old)]}))
    (results / "time-to-target.json").write_text(json.dumps({"schema": SCHEMA, "rows": [
        _row("tt-cnn", 0.9, benchmark="time_to_target", commit=old)]}))

    def stale_after(path, text):
        (repo / path).write_text(text)
        _git(repo, "commit", "-qam", f"change {path}")
        md = render_markdown(repo)
        return sorted(rid for rid in ("2", "9", "10", "tt-cnn") if "stale" in _line(md, rid))

    assert stale_after("benchmarks/speedup.py", "SIZE = 2\n") == ["10"]  # ran before row 10, after row 2
    assert stale_after("benchmarks/stability.py", "def run():\n    pass\n") == ["10", "9"]
    assert stale_after("benchmarks/overhead.py", "def prewarm():\n    return 1\n") == ["10", "2", "9"]
    assert stale_after("benchmarks/common.py", files["benchmarks/common.py"] + "MORE = 1\n") == [
        "10", "2", "9", "tt-cnn"]


def test_a_change_to_the_gpu_proof_leaves_every_row_current(tmp_path):
    """The GPU proof's script and workloads run only on a GPU machine and no row imports them (a dry-run trim of
    benchmarks/gpu.py once staled every CPU row)."""
    repo = _repo(tmp_path, [])
    for path in ("benchmarks/gpu.py", "benchmarks/gpu_workloads.py", "benchmarks/run.py"):
        (repo / path).write_text("SIZE = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "scripts")
    old = _git(repo, "rev-parse", "HEAD").strip()
    rows = [_row("2", 0.09, commit=old), _row("tt-cnn", 0.9, benchmark="time_to_target", commit=old)]
    (repo / "benchmarks" / "results" / "run-full.json").write_text(json.dumps({"schema": SCHEMA, "rows": rows}))
    for path in ("benchmarks/gpu.py", "benchmarks/gpu_workloads.py"):
        (repo / path).write_text("SIZE = 2\n")
    _git(repo, "commit", "-qam", "trim the GPU proof's dry run")
    md = render_markdown(repo)
    assert "current" in _line(md, "2") and "current" in _line(md, "tt-cnn")
    (repo / "benchmarks" / "run.py").write_text("SIZE = 2\n")  # a benchmark's own script: its rows are stale
    _git(repo, "commit", "-qam", "change run.py")
    assert f"stale: measured at {old[:7]}" in _line(render_markdown(repo), "2")


def test_every_expected_row_appears_and_a_missing_one_says_not_measured(tmp_path):
    md = render_markdown(_repo(tmp_path, [_row("2", 0.09)]))
    for e in EXPECTED:
        assert f"| {e.id} |" in md
    assert "**not measured**" in _line(md, "1")


def test_a_changed_target_says_from_what_and_why(tmp_path):
    row = _row("11", 0.8, target_history=[{"was": "reported", "why": "it could not fail"}])
    md = render_markdown(_repo(tmp_path, [row]))
    assert "Target changed from `reported`: it could not fail." in md


def test_a_target_must_be_able_to_fail():
    with pytest.raises(ValueError, match="must be able to fail"):
        Target("reported: where the remaining speed is", ())


def test_alternatives_and_details_paths():
    rule = target("with > without, or both 100%", [("details.gain", ">", 0), ("details.both_perfect", ">=", 1)])
    base = _row("9", None, target=rule.to_json())
    assert Row.from_json({**base, "details": {"gain": 0.33, "both_perfect": 0}}, "f").verdict() == "pass"
    assert Row.from_json({**base, "details": {"gain": 0.0, "both_perfect": 1}}, "f").verdict() == "pass"
    assert Row.from_json({**base, "details": {"gain": -0.3, "both_perfect": 0}}, "f").verdict() == "MISSED"
    assert Row.from_json({**base, "details": {}}, "f").verdict() == "not measured"


def test_a_benchmark_result_written_as_rows_reads_back_with_the_same_verdict(tmp_path):
    rule = target("ratio <= 1.1", ("ratio", "<=", 1.1))
    missed = BenchResult("best config vs its compute ceiling", "ceilings", 1300.0, "samples/s", 1000.0, 1.3,
                         "ignored", pass_=True, row="11", rule=rule)
    assert missed.pass_ is False and missed.target == "ratio <= 1.1"  # the rule decides, not the caller
    unmarked = BenchResult("x", "levers", 1.0, "", 1.0, 1.0, "reported", pass_=None)
    meta = {"date": "2026-11-26T22:00:00+00:00", "machine": {"cpu": "Test CPU", "cores": 2}}
    path = write_rows([missed, unmarked], meta, tmp_path / "benchmarks" / "results" / "run-full.json")
    rows = load_rows(tmp_path)
    assert path is not None and [r.id for r in rows] == ["11"] and rows[0].verdict() == "MISSED"


def test_an_export_that_is_the_own_settings_cannot_pass_the_speed_up_row():
    """Row 8a compares the export with the workload's own settings: when the knee is the baseline, a config is
    compared with itself, and noise must not read as the search's doing."""
    from types import SimpleNamespace

    from benchmarks.speedup import _arm_row
    from tuner.config import Params

    cfg = SimpleNamespace(params=Params(batch_size=64, beta1=0.5, beta2=0.999))
    runs = {"exported": [{"state": "complete", "throughput": 900.0, "fid": 50.0}],
            "own": [{"state": "complete", "throughput": 450.0, "fid": 50.0}]}
    same = _arm_row("8a", "vs own", cfg, cfg, "own settings", runs, "own", "fid", {"is_baseline_trial": True}, "")
    assert same.ratio == 2.0 and same.pass_ is False and "found no faster config" in same.note
    other = _arm_row("8a", "vs own", cfg, cfg, "own settings", runs, "own", "fid", {"is_baseline_trial": False}, "")
    assert other.pass_ is True
