"""The `tuner` program as a process (`python -m tuner`): it ends without Python's module teardown
(tuner.cli.entry -> tuner.files.fast_exit), and still says everything it printed and exits with the command's code."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.searchproc import REPO, tuner_env


def _tuner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=REPO, env=tuner_env(), capture_output=True,
                          text=True, timeout=120)


def test_a_command_that_succeeds_prints_all_of_its_output_into_a_pipe_and_exits_0():
    done = _tuner("spaces")
    assert done.returncode == 0, done.stderr
    assert "amp_loader" in done.stdout  # stdout is a pipe (block-buffered): flushed before the process ended


def test_bad_input_still_exits_2_with_its_one_line(tmp_path):
    done = _tuner("report", "no-such-study", "--reports-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("tuner: error: ") and "no-such-study" in done.stderr
    assert "Traceback" not in done.stderr
