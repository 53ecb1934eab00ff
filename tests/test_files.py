"""tuner.files: every file tuner reads is checked as text first; what is not readable UTF-8 text, is empty, or (for
YAML and JSON) is not a mapping is one ConfigError (or the caller's error type) naming the file and the fix."""

from __future__ import annotations

import os

import pytest

from tuner.errors import ConfigError, StudyError
from tuner.files import atomic_write, load_json, load_json_object, load_yaml_mapping, read_text

# name -> (bytes on disk, what the message says)
BAD_TEXT = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a text file (binary content)"),
    "latin1": ("params: {précision: fp32}\n".encode("latin-1"), "not UTF-8 text (byte 11)"),
    "empty": (b"", "is empty"),
    "blank": (b"  \n\t\n", "is empty"),
    "bom-only": ("\ufeff\n".encode(), "is empty"),
}


@pytest.mark.parametrize("name", BAD_TEXT)
def test_what_is_not_utf8_text_or_is_empty_is_one_line_naming_the_file(tmp_path, name):
    data, needle = BAD_TEXT[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    for read in (lambda: read_text(path, "config file"), lambda: load_yaml_mapping(path, "config file"),
                 lambda: load_json(path, "config file")):
        with pytest.raises(ConfigError) as err:
            read()
        message = str(err.value)
        assert message.startswith(f"{path}: ") and needle in message and "\n" not in message


@pytest.mark.parametrize("text, found", [
    ("- a\n- b\n", "found a list"),
    ("just words\n", "found a single string"),
    ("42\n", "found a number"),
    ("# only a comment\n", "found nothing"),
    ("~\n", "found nothing"),
])
def test_yaml_that_is_not_a_mapping_is_refused(tmp_path, text, found):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"expected a YAML mapping \\(key: value lines\\) but {found}"):
        load_yaml_mapping(path, "config file")


def test_malformed_yaml_names_the_line_and_a_mapping_reads(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\nb: [\n")
    with pytest.raises(ConfigError, match=r"c.yaml: not valid YAML at line \d+"):
        load_yaml_mapping(path)
    path.write_bytes("\ufeffa: 1\nb: é\n".encode())  # a byte-order mark, as some editors write
    assert load_yaml_mapping(path) == {"a": 1, "b": "é"}


def test_json_errors_use_the_callers_error_type(tmp_path):
    path = tmp_path / "result.json"
    path.write_text('{"trial": 1, ')
    with pytest.raises(StudyError, match="result.json: not valid JSON at line 1"):
        load_json(path, "trial result file", StudyError)
    path.write_text("[1, 2]")
    with pytest.raises(StudyError, match=r"expected a JSON object \({...}\) but found a list"):
        load_json_object(path, "trial result file", StudyError)
    path.write_text('{"trial": 1}')
    assert load_json_object(path) == {"trial": 1}


def test_missing_a_folder_or_a_fifo_is_refused_without_reading(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        read_text(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="is a folder"):
        read_text(tmp_path)
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):  # reading it would block forever
        read_text(fifo)


def test_atomic_write_leaves_no_temp_file(tmp_path):
    path = atomic_write(tmp_path / "sub" / "x.json", '{"a": 1}')
    assert load_json(path) == {"a": 1} and [p.name for p in path.parent.iterdir()] == ["x.json"]


# --- limits: size, aliases, duplicate keys (issue 23) --------------------------------------------------------------
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([prev] * 9)}]\n"
    for name, prev in zip("abcdefghi", ['"lol"', *(f"*{c}" for c in "abcdefgh")])
)  # nine levels of nine aliases: 9**9 (387 million) strings when expanded, from under 500 bytes


def test_a_yaml_file_over_the_size_limit_is_refused_naming_the_file_and_the_limit(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("workload: cnn\n" + "#" * (2 << 20) + "\n")
    with pytest.raises(ConfigError) as err:
        load_yaml_mapping(path, "config file")
    message = str(err.value)
    assert message.startswith(f"{path}: ") and "1 MiB" in message and "\n" not in message


def test_an_alias_bomb_is_refused_not_expanded(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 500
    with pytest.raises(ConfigError) as err:
        load_yaml_mapping(path, "space file")
    assert str(err.value).startswith(f"{path}: line ") and "aliases expand to over" in str(err.value)


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    path = tmp_path / "cycle.yaml"
    path.write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="a cycle"):
        load_yaml_mapping(path, "space file")


def test_ordinary_aliases_and_merge_keys_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nmore:\n  <<: *b\n  x: 5\nsame: *b\n")
    assert load_yaml_mapping(path) == {"base": {"x": 1, "y": 2}, "more": {"x": 5, "y": 2}, "same": {"x": 1, "y": 2}}


def test_a_float_without_a_dot_reads_as_a_number_in_files_and_in_option_values(tmp_path):
    """PyYAML (YAML 1.1) reads 1e-6 as the string '1e-6': `-o lr=1e-6` reached a user's factory as a string and
    its optimizer refused it. Such values are numbers now; a quoted one stays a string."""
    from tuner.cli.search import parse_options

    path = tmp_path / "c.yaml"
    path.write_text("lr: 3e-4\neps: -1E-8\nname: '1e-6'\nbatch_size: 64\ntag: 1e\n")
    assert load_yaml_mapping(path) == {"lr": 3e-4, "eps": -1e-8, "name": "1e-6", "batch_size": 64, "tag": "1e"}
    assert parse_options(["lr=1e-6", "steps=2e3", "mode=fp16"]) == {"lr": 1e-6, "steps": 2000.0, "mode": "fp16"}


@pytest.mark.parametrize("text, key, line", [
    ("workload: cnn\ndataset: digits\nworkload: gan\n", "workload", 3),
    ("params:\n  batch_size: 8\n  lr: 0.1\n  batch_size: 64\n", "batch_size", 4),
])
def test_a_duplicate_key_is_refused_naming_the_key_and_the_file(tmp_path, text, key, line):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_yaml_mapping(path, "config file")
    assert str(err.value) == f"{path}: duplicate key {key!r} at line {line} (the config file gives it twice); keep one"


# --- a folder tuner cannot write (issue 23) --------------------------------------------------------------------------
def test_check_writable_refuses_a_file_in_the_way_and_creates_nothing(tmp_path):
    from tuner.errors import StorageError
    from tuner.files import check_writable

    (tmp_path / "reports").write_text("not a folder")
    with pytest.raises(StorageError) as err:
        check_writable(tmp_path / "reports" / "study", "the study folder")
    assert f"{tmp_path / 'reports'} is a file, not a folder" in str(err.value)
    check_writable(tmp_path / "new" / "deeper", "the study folder")  # fine, and nothing made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]


@pytest.mark.parametrize("code, needle", [(28, "No space left on device; free some space"),
                                          (30, "Read-only file system; pass a folder you can write to")])
def test_check_writable_refuses_a_full_or_read_only_disk_and_leaves_no_probe(tmp_path, monkeypatch, code, needle):
    import errno

    from tuner.errors import StorageError
    from tuner.files import check_writable

    assert code in (errno.ENOSPC, errno.EROFS)

    def refused(fd, data):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "write", refused)
    with pytest.raises(StorageError) as err:
        check_writable(tmp_path / "reports", "--reports-dir")
    assert str(err.value) == f"--reports-dir {tmp_path / 'reports'}: cannot write in {tmp_path}: {needle}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into a read-only folder")
def test_check_writable_refuses_a_read_only_folder(tmp_path):
    from tuner.errors import StorageError
    from tuner.files import check_writable

    (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(StorageError, match="Permission denied"):
        check_writable(tmp_path / "ro" / "study", "the study folder")


def test_fast_exit_keeps_the_exit_code_the_exit_handlers_and_buffered_output(tmp_path):
    """A process that ends through fast_exit says what it printed (stdout a pipe: buffered), runs its atexit
    handlers, waits for its non-daemon threads and exits with the code it was given."""
    import subprocess
    import sys

    marker, worker = tmp_path / "atexit", tmp_path / "thread"
    script = (
        "import atexit, threading, time\n"
        "from pathlib import Path\n"
        "from tuner.files import fast_exit\n"
        f"atexit.register(lambda: Path({str(marker)!r}).write_text('ran'))\n"
        f"threading.Thread(target=lambda: (time.sleep(0.3), Path({str(worker)!r}).write_text('done'))).start()\n"
        "print('every line', end='')\n"
        "fast_exit(3)\n"
        "print('never')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "every line"
    assert marker.read_text() == "ran" and worker.read_text() == "done"


def _ends(script: str) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_fast_exit_ends_a_process_that_keeps_a_live_thread_pool():
    """A live ThreadPoolExecutor (torch.compile's inductor keeps one, as do many libraries) has idle workers that
    end only when Python's threading exit callbacks tell them to; joined before those, the exit never returned
    (issue 57: the three lines below hung forever)."""
    done = _ends("import concurrent.futures as f; pool = f.ThreadPoolExecutor(2); pool.submit(lambda: 1).result()\n"
                 "from tuner.files import fast_exit; fast_exit(5)\n")
    assert done.returncode == 5, done.stderr
    assert done.stderr == ""  # every thread ended: nothing left to name


def test_fast_exit_waits_a_bounded_time_for_a_thread_that_never_ends_and_names_it():
    """A thread the command does not own (a user's, a pool task that never returns) does not hold the exit."""
    done = _ends("import threading, time\n"
                 "import tuner.files as files; files.THREADS_WAIT_S = 0.5\n"
                 "threading.Thread(target=lambda: time.sleep(600), name='user-forever').start()\n"
                 "print('result', end='')\n"
                 "files.fast_exit(4)\n")
    assert done.returncode == 4 and done.stdout == "result"
    assert "not waiting for thread(s) 'user-forever' still running 0.5 s" in done.stderr
