"""Files a user hands tuner (a config, a space, an exported config) or that a study keeps (result.json, study.json):
a binary, empty, non-UTF-8 or non-mapping file is one line on stderr naming it, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil

import pytest

from tuner.cli import main

BAD = {
    "binary": b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00",
    "empty": b"",
    "a list": b"- workload: cnn\n- dataset: synthetic\n",
    "invalid UTF-8": "workload: cnn\ndataset: synth\u00e9tique\n".encode("latin-1"),
}
NEEDLE = {
    "binary": "not a text file (binary content)",
    "empty": "is empty",
    "a list": "expected a YAML mapping (key: value lines) but found a list",
    "invalid UTF-8": "not UTF-8 text",
}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code, out, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error: "), err
    assert "Traceback" not in err and "internal error" not in err and out == ""
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("kind", BAD)
def test_train_config(tmp_path, capsys, kind):
    path = tmp_path / "run.yaml"
    path.write_bytes(BAD[kind])
    reports = tmp_path / "reports"
    assert_one_line(*run(capsys, "train", "--config", path, "--reports-dir", reports), str(path), NEEDLE[kind])
    assert not reports.exists()


@pytest.mark.parametrize("kind", BAD)
def test_search_space_and_spaces_show(tmp_path, capsys, kind):
    path = tmp_path / "space.yaml"
    path.write_bytes(BAD[kind])
    reports = tmp_path / "reports"
    assert_one_line(*run(capsys, "search", "--space", path, "--reports-dir", reports), str(path), NEEDLE[kind])
    assert not reports.exists()
    assert_one_line(*run(capsys, "spaces", "show", path), str(path), NEEDLE[kind])


@pytest.mark.parametrize("kind", BAD)
def test_an_exported_config_that_was_damaged(make_study, capsys, kind):
    reports = make_study()
    code, _, err = run(capsys, "export", "gan-demo", "--reports-dir", reports)
    assert code == 0, err
    best = reports / "gan-demo" / "best.yaml"
    best.write_bytes(BAD[kind])
    assert_one_line(*run(capsys, "train", "--config", best, "--reports-dir", reports), str(best), NEEDLE[kind])


@pytest.mark.parametrize("data, needle", [
    (b'{"trial": 2, "state": "compl', "not valid JSON at line 1"),
    (b"\x00\x00\x00\x00", "not a text file (binary content)"),
    (b"", "is empty"),
    (b"[1, 2, 3]", "expected a JSON object"),
    ('{"trial": 2, "state": "complete", "device": "\u00e9"}'.encode("latin-1"), "not UTF-8 text"),
])
def test_a_corrupt_result_file_stops_report_and_export_with_its_name(make_study, capsys, data, needle):
    reports = make_study()
    result = reports / "gan-demo" / "trials" / "0002" / "result.json"
    result.write_bytes(data)
    for argv in (["report", "gan-demo"], ["report", "gan-demo", "--format", "json"], ["export", "gan-demo"]):
        assert_one_line(*run(capsys, *argv, "--reports-dir", reports), str(result), needle)
    assert not (reports / "gan-demo" / "best.yaml").exists()
    assert result.read_bytes() == data  # left as it was, for the user to look at


def test_a_result_file_with_a_wrong_value_names_the_key(make_study, capsys):
    reports = make_study()
    result = reports / "gan-demo" / "trials" / "0001" / "result.json"
    result.write_text('{"trial": "one", "state": "complete"}')
    assert_one_line(*run(capsys, "report", "gan-demo", "--reports-dir", reports), str(result), "trial:")


@pytest.mark.parametrize("data, needle", [(b"", "is empty"), (b"[]", "expected a JSON object"),
                                          (b"\xff\xfe{}", "not UTF-8 text")])
def test_a_corrupt_study_file(make_study, capsys, data, needle):
    reports = make_study()
    meta = reports / "gan-demo" / "study.json"
    meta.write_bytes(data)
    assert_one_line(*run(capsys, "report", "gan-demo", "--reports-dir", reports), str(meta), needle)


# --- limits on every file read (issue 23): size, aliases, duplicate keys ---------------------------------------------
LIMITED = {
    "too large": ("workload: cnn\n" + "#" * (2 << 20) + "\n", "1 MiB at most"),
    "alias bomb": ("".join(f"{n}: &{n} [{', '.join([p] * 9)}]\n" for n, p in
                           zip("abcdefghi", ['"lol"', *(f"*{c}" for c in "abcdefgh")])), "aliases expand to over"),
    "duplicate key": ("workload: cnn\ndataset: digits\nworkload: gan\n", "duplicate key 'workload' at line 3"),
}


@pytest.mark.parametrize("kind", LIMITED)
def test_limits_on_a_config_and_a_space_file(tmp_path, capsys, kind):
    text, needle = LIMITED[kind]
    path = tmp_path / "file.yaml"
    path.write_text(text)
    reports = tmp_path / "reports"
    assert_one_line(*run(capsys, "train", "--config", path, "--reports-dir", reports), str(path), needle)
    assert_one_line(*run(capsys, "search", "--space", path, "--reports-dir", reports), str(path), needle)
    assert_one_line(*run(capsys, "spaces", "show", path), str(path), needle)
    assert not reports.exists()


def test_a_copy_of_a_trial_folder_is_named_and_left_out_by_report_and_export(make_study, capsys):
    reports = make_study()
    trials = reports / "gan-demo" / "trials"
    shutil.copytree(trials / "0001", trials / "0001.bak")
    for argv in (["report", "gan-demo", "--format", "json"], ["export", "gan-demo"]):
        code, out, err = run(capsys, *argv, "--reports-dir", reports)
        assert code == 0, err
        assert "0001.bak/" in err and "left out" in err
    code, out, _ = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "json")
    assert sorted(d["trial"] for d in json.loads(out)["trials"]) == list(range(8))


def test_a_result_file_in_another_trials_folder_stops_report_and_export_with_its_name(make_study, capsys):
    reports = make_study()
    trials = reports / "gan-demo" / "trials"
    (trials / "0000" / "result.json").write_bytes((trials / "0002" / "result.json").read_bytes())
    for argv in (["report", "gan-demo"], ["export", "gan-demo"]):
        assert_one_line(*run(capsys, *argv, "--reports-dir", reports), str(trials / "0000" / "result.json"),
                        "trial: 2, but the file is in trial 0's folder")
    assert not (reports / "gan-demo" / "best.yaml").exists()


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("record", ["study.json", "study.db", "trials/0002/result.json", "trials.csv",
                                    "trials/0009/best.yaml", "ray/best.yaml"])
def test_export_never_writes_over_a_study_record(make_study, capsys, tmp_path, record):
    """`--out reports/STUDY/study.db` replaced the study's database (then --resume failed: "file is not a database"):
    a study folder's records, this study's or another's, given directly, through `..` or through a link to the
    folder, are refused with one line whether or not --force is given, and nothing in any study changes."""
    reports = make_study()
    make_study("other")
    for name in ("gan-demo", "other"):
        (reports / name / "study.db").write_bytes(b"SQLite format 3\x00" + bytes(200))
    before = snapshot(reports)
    (tmp_path / "link").symlink_to(reports / "other")
    for out in (reports / "gan-demo" / record, reports / "gan-demo" / ".." / "other" / record,
                tmp_path / "link" / record):
        for force in ([], ["--force"]):
            assert_one_line(*run(capsys, "export", "gan-demo", "--reports-dir", reports, "--out", out, *force),
                            f"--out {out} is {record} of the study at", "export elsewhere")
    assert snapshot(reports) == before


def test_export_replaces_only_its_own_earlier_export_unless_forced(make_study, capsys, tmp_path):
    reports = make_study()
    notes = tmp_path / "notes.yaml"
    notes.write_text("mine: true\n")
    assert_one_line(*run(capsys, "export", "gan-demo", "--reports-dir", reports, "--out", notes), f"--out {notes}",
                    "not a config tuner exported", "--force")
    assert notes.read_text() == "mine: true\n"
    mine = reports / "gan-demo" / "best.yaml"  # the default path, holding a file of the user's
    mine.write_text("mine: true\n")
    assert_one_line(*run(capsys, "export", "gan-demo", "--reports-dir", reports), "not a config tuner exported")
    assert mine.read_text() == "mine: true\n"
    for argv in (["--out", notes, "--force"], ["--force"]):
        code, _, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, *argv)
        assert code == 0, err
    assert "provenance" in notes.read_text() and "provenance" in mine.read_text()
    for argv in ([], ["--out", notes], ["--out", tmp_path / "best.json"], ["--out", tmp_path / "best.json"],
                 ["--as", "json"], ["--as", "json"]):  # over its own earlier exports: nothing to force
        code, _, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, *argv)
        assert code == 0, err
    assert json.loads((tmp_path / "best.json").read_text())["provenance"]["study"] == "gan-demo"
