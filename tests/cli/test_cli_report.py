"""`tuner report` and `tuner export` through the real entry point: output, files, and one-line errors (exit 2)."""

import json

import pytest

from tuner.cli import main
from tuner.study import TrialResult


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error: "), err
    for n in needles:
        assert n in lines[0]


def test_report_table(make_study, capsys):
    reports = make_study()
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports)
    assert code == 0, err
    assert "★ 0" in out and "Pareto front" in out and "OutOfMemoryError" in out


def test_report_json_is_one_document(make_study, capsys):
    reports = make_study()
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "json")
    assert code == 0
    doc = json.loads(out)  # the whole of stdout is one JSON document
    assert [d["trial"] for d in doc["trials"]][:3] == [1, 2, 4] and doc["trials"][0]["front"] is True
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "json", "--trial", "3")
    assert code == 0 and json.loads(out)["error"].startswith("OutOfMemoryError")  # one trial: its document


def test_report_json_carries_what_the_table_says_below_it(make_study, capsys):
    """Not a bare list of trials: the study, its objectives, baseline, front, noise floor and the verdict on its
    knee pick (what the footer under the table says), as the export's JSON carries them."""
    reports = make_study()
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["study"] == "gan-demo" and doc["folder"] == str(reports / "gan-demo")
    assert doc["objectives"] == [{"metric": "throughput", "direction": "maximize"},
                                 {"metric": "fid", "direction": "minimize"}]
    assert doc["front"] == [1, 2, 4] and doc["noise_floor"] is None  # nothing confirmed: no noise floor
    assert doc["verdict"]["trial"] == 2 and doc["verdict"]["rule"] == "knee" and "trial 2 (knee)" in \
        doc["verdict"]["text"]
    assert len(doc["trials"]) == 8
    reports = make_study("new", kind="empty")
    code, out, err = run(capsys, "report", "new", "--reports-dir", reports, "--format", "json")
    assert code == 0 and json.loads(out)["trials"] == [] and json.loads(out)["verdict"] is None


def test_report_one_trial(make_study, capsys):
    reports = make_study()
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--trial", "2")
    assert code == 0 and "trial 2" in out and "samples.png" in out and "batch_size" in out


def test_report_html(make_study, capsys):
    reports = make_study()
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "html")
    assert code == 0 and (reports / "gan-demo" / "report.html").is_file()
    assert str(reports / "gan-demo" / "report.html") in out


def test_export_then_train_reads_it(make_study, capsys, monkeypatch):
    reports = make_study()
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports)
    assert code == 0, err
    best = reports / "gan-demo" / "best.yaml"
    assert best.is_file() and "trial 2" in out and f"tuner train --config {best}" in out

    seen = {}

    def fake_run_trial(cfg, *, cache_dir, out_dir=None, on_window=None, **_):
        seen["cfg"] = cfg
        return TrialResult(state="complete", throughput=650.0, windows=[650.0], throughput_spread=0.0,
                           data_wait=0.1, peak_mem_mb=100.0)

    monkeypatch.setattr("tuner.train.run_trial", fake_run_trial)
    code, _, err = run(capsys, "train", "--config", best, "--reports-dir", reports)
    assert code == 0, err
    assert seen["cfg"].params.batch_size == 128 and seen["cfg"].provenance["trial"] == 2


def in_process(monkeypatch):
    """verify's re-runs in this process, through tuner.train.run_trial as the test fakes it: each really runs in a
    process of its own (tuner.report.verify.apart), forked from a fork server that never sees this test's fakes."""
    import tuner.train

    monkeypatch.setattr("tuner.report.verify.apart",
                        lambda servers: lambda cfg, cache_dir: tuner.train.run_trial(cfg, cache_dir=cache_dir))


def test_export_verify(make_study, capsys, monkeypatch):
    """--verify reruns the config --repeats times; exit 3 only when the recorded figure lies outside the
    re-measured interval (or a rerun fails)."""
    reports = make_study()
    in_process(monkeypatch)
    readings = iter([650.0, 770.0, 720.0, 1400.0, 1410.0, 1390.0])
    monkeypatch.setattr("tuner.train.run_trial",
                        lambda cfg, *, cache_dir, **_: TrialResult(state="complete", throughput=next(readings)))
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--verify")
    assert code == 0, err
    assert "over 3 runs, interval" in out and "vs recorded 700.0 (one reading); no baseline re-measured beside " \
        "it: the machine's drift since the study is in this comparison: within the interval" in out
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--verify")
    assert code == 3 and "recorded figure lies outside the re-measured interval" in err

    monkeypatch.setattr("tuner.train.run_trial",
                        lambda cfg, *, cache_dir, **_: TrialResult(state="oom", error="OutOfMemoryError: boom"))
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--verify")
    assert code == 3 and "ended oom: OutOfMemoryError: boom" in err


def test_export_verify_re_measures_the_baseline_beside_the_config_and_judges_the_ratio(make_study, capsys,
                                                                                         monkeypatch):
    """The machine reads 20% slower than in the study: the config (700 recorded) reads 560, outside its interval
    alone, but so does the baseline beside it (400 -> 320): 1.75x both times, within the noise, and it says so."""
    from tuner.study import StudyFolder

    reports = make_study()
    folder = StudyFolder(reports / "gan-demo")
    folder.write_meta(folder.read_meta().model_copy(update={"baseline": {"trial": 0, "params": {}}}))
    in_process(monkeypatch)
    runs = []

    def run_trial(cfg, *, cache_dir, **_):
        runs.append(cfg.params.batch_size)
        speed = 700.0 if cfg.params.batch_size == 128 else 400.0
        return TrialResult(state="complete", throughput=0.8 * speed * (1.0 + 0.01 * (len(runs) % 3 - 1)))

    monkeypatch.setattr("tuner.train.run_trial", run_trial)
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--verify", "--format", "json")
    assert code == 0, err
    assert runs == [128, 64, 64, 128, 128, 64]  # interleaved
    assert "beside the baseline's (trial 0), interleaved" in err
    verify = json.loads(out)["verify"]
    assert verify["judged"] == "ratio to the baseline" and verify["agrees"] is True
    assert verify["recorded_ratio"] == pytest.approx(1.75) and verify["drift"] == pytest.approx(0.8, rel=0.02)
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--verify")
    assert code == 0 and "x the baseline (trial 0) re-measured beside it, interleaved, 3 runs each" in out
    assert "vs 1.75x recorded (one reading)" in out and "the machine reading 0.80x what it did in the study" in out


def test_export_options(make_study, capsys, tmp_path):
    """--as picks the file's format (whatever the suffix); --format picks what is printed."""
    reports = make_study()
    out_file = tmp_path / "fast.cfg"
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--pick", "throughput",
                         "--min-quality", "30", "--out", out_file, "--as", "json", "--format", "json")
    assert code == 0, err
    assert json.loads(out_file.read_text())["provenance"]["trial"] == 2
    printed = json.loads(out)  # stdout is exactly one JSON document
    assert printed["trial"] == 2 and printed["path"] == str(out_file) and printed["pick"] == "throughput"
    assert printed["quality"] == {"fid": 22.0}


def test_export_format_yaml_as_a_newcomer_types_it(make_study, capsys, tmp_path):
    """--format is what export prints (table or json), as on every command; the file's format is --as. The
    older README's `--format yaml|json` failed ('yaml' is not one of 'table', 'json'): --format yaml is taken as
    --as yaml, with a note naming the spelling."""
    reports = make_study()
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--format", "yaml")
    assert code == 0, err
    assert "--as yaml" in err and f"wrote {reports / 'gan-demo' / 'best.yaml'}" in out
    assert (reports / "gan-demo" / "best.yaml").read_text().startswith("# tuner config exported")
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--format", "yaml", "--out",
                         tmp_path / "x.json")
    assert code == 0, err
    assert (tmp_path / "x.json").read_text().startswith("# tuner config")  # --as yaml: whatever the suffix
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--format", "yaml", "--as", "json")
    assert_one_line_error(code, err, "--format yaml", "--as json")
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--format", "pdf")
    assert_one_line_error(code, err, "'pdf'", "table", "json", "--as")
    assert out == ""


def test_export_one_trial_by_number(make_study, capsys):
    """--trial N writes that trial's config with the header and provenance a pick gets; not with --pick or
    --min-quality; a trial that did not complete is one line, exit 2, and nothing is written."""
    reports = make_study()
    best = reports / "gan-demo" / "best.yaml"
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--trial", "5")
    assert code == 0, err
    assert f"wrote {best}: trial 5 (--trial 5)" in out and "verdict: trial 5 (--trial): " in out
    assert best.read_text().startswith("# tuner config exported from study 'gan-demo', trial 5 (--trial 5).")
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--trial", "4", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["trial"] == 4 and doc["pick"] is None and doc["verdict"]["rule"] == "trial"
    best.unlink()
    for argv, needles in ((["--trial", "3"], ["trial 3 ended oom", "complete: 0, 1, 2, 4, 5"]),
                          (["--trial", "99"], ["no trial 99"]),
                          (["--trial", "4", "--pick", "quality"], ["--trial", "--pick"]),
                          (["--trial", "4", "--min-quality", "30"], ["--trial", "--min-quality"])):
        code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, *argv)
        assert_one_line_error(code, err, *needles)
        assert out == "" and not best.exists()


@pytest.mark.parametrize("argv,needles", [
    (["report", "nope"], ["no study 'nope'", "known: gan-demo"]),
    (["export", "nope"], ["no study 'nope'", "known: gan-demo"]),
    (["report", "gan-demo", "--trial", "99"], ["no trial 99", "0-7"]),
    (["report", "gan-demo", "--trial", "99", "--format", "json"], ["no trial 99", "0-7"]),
    (["export", "gan-demo", "--min-quality", "1"], ["fid <= 1", "best is 18"]),
    (["export", "gan-demo", "--pick", "fastest"], ["fastest"]),
    (["report", "gan-demo", "--format", "pdf"], ["pdf"]),
])
def test_errors_are_one_line_exit_2(make_study, capsys, argv, needles):
    reports = make_study()
    code, out, err = run(capsys, *argv, "--reports-dir", reports)
    assert_one_line_error(code, err, *needles)
    assert out == ""


@pytest.mark.parametrize("argv", [["export", "gan-demo"], ["export", "gan-demo", "--pick", "quality"]])
def test_no_complete_trial_exit_2(make_study, capsys, argv):
    reports = make_study(kind="failed")
    code, _, err = run(capsys, *argv, "--reports-dir", reports)
    assert_one_line_error(code, err, "no complete trial")
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports)  # the table still shows the failures
    assert code == 0 and "oom" in out


def test_study_without_trials_yet(make_study, capsys):
    reports = make_study(kind="empty")
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports)
    assert code == 0 and "no finished trials yet" in out
    code, _, err = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--trial", "0")
    assert_one_line_error(code, err, "no trial 0", "no finished trials yet")
    code, _, err = run(capsys, "export", "gan-demo", "--reports-dir", reports)
    assert_one_line_error(code, err, "no complete trial")


def test_trial_with_html_is_refused(make_study, capsys):
    reports = make_study()
    code, _, err = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "html", "--trial", "1")
    assert_one_line_error(code, err, "--trial")


def test_error_text_with_brackets_is_shown_intact(make_study, capsys):
    """Errors are the user's or torch's text: rich must not read `[bold]` or `[enforce fail ...]` as markup."""
    reports = make_study()
    path = reports / "gan-demo" / "trials" / "0007" / "result.json"
    doc = json.loads(path.read_text())
    doc["error"] = "RuntimeError: [bold]kept[/bold]"
    doc["params"]["precision"] = "[red]x"
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports)
    assert code == 0, err
    assert "[bold]kept" in out and "[red]x" in out
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--trial", "7")
    assert code == 0, err
    assert "RuntimeError: [bold]kept[/bold]" in out and "[red]x" in out


@pytest.mark.parametrize("command", [["report", "--format", "html"], ["export"]])
def test_a_study_path_outside_the_reports_dir_is_refused_and_nothing_is_written(make_study, capsys, tmp_path,
                                                                               command):
    """report --format html and export write into the study's folder: only a folder in --reports-dir is taken."""
    reports = make_study()
    study = reports / "gan-demo"
    before = sorted(p.name for p in study.iterdir())
    other = tmp_path / "elsewhere"
    other.mkdir()
    for given in (str(study), "../" + reports.name + "/gan-demo"):
        code, out, err = run(capsys, command[0], given, *command[1:], "--reports-dir", other)
        assert_one_line_error(code, err, f"study {given!r} is not a folder in --reports-dir {other}",
                              f"gan-demo --reports-dir {reports}")
        assert out == ""
    code, out, err = run(capsys, command[0], "gan-demo\n", *command[1:], "--reports-dir", reports)
    assert_one_line_error(code, err, "study 'gan-demo\\n' is not a folder")
    assert sorted(p.name for p in study.iterdir()) == before and list(other.iterdir()) == []


def test_a_read_only_study_folder_is_one_line_when_report_writes_into_it(make_study, capsys, monkeypatch):
    """report --format html writes report.html into the study's folder: a read-only file system there (planted:
    the temp file cannot be made) is one line naming the folder, exit 2, not an internal error."""
    import errno
    import os
    import tempfile

    reports = make_study()
    study = reports / "gan-demo"

    def read_only(*a, dir=None, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "html")
    assert_one_line_error(code, err, f"{study}: cannot write: Read-only file system")
    assert not (study / "report.html").exists()


def test_a_table_piped_to_a_file_keeps_each_row_on_one_line(capsys):
    """Piped (stdout not a terminal), a table prints at its natural width: a study's 23 columns squeezed into 240
    had folded each drift-adjusted throughput cell ('576.4 (1.01x the baseline; read 576.4 (457.3-726.5))') over
    six lines."""
    from rich.table import Table

    from tuner.cli.app import print_table, stdout_console

    cell = "576.4 (1.01x the baseline; read 576.4 (457.3-726.5))"
    table = Table(title="study")
    for i in range(12):
        table.add_column(f"param_{i}")
    for _ in range(3):
        table.add_row(*[cell] * 12)
    print_table(stdout_console(), table)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert len(rows) == 3 and all(line.count(cell) == 12 for line in rows)
