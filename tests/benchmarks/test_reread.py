"""benchmarks/reread.sh re-reads every row after a tuner/ change: a benchmark that publishes rows and is missing from
its queue would stay stale unnoticed, and a command whose option its script no longer takes would fail an hour in."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from benchmarks.table import SCHEMA, STANDALONE

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "reread.sh"


def _queue(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def _commands() -> dict[str, list[str]]:
    """name -> the command the dry run lists for it."""
    out = _queue("--dry-run")
    assert out.returncode == 0, out.stderr
    rows = [re.match(r"(\S+)\s+~\s*\d+ min  (.+)$", line) for line in out.stdout.splitlines()]
    return {m.group(1): shlex.split(m.group(2)) for m in rows if m}


def _publishers() -> set[str]:
    """The script behind every results file that holds table rows."""
    scripts = set()
    for path in (REPO / "benchmarks" / "results").glob("*.json"):
        data = json.loads(path.read_text())
        if not (isinstance(data, dict) and data.get("schema") == SCHEMA and data.get("rows")):
            continue
        for row in data["rows"]:
            scripts.add("benchmarks/run.py" if path.name.startswith("run-full") else STANDALONE[row["benchmark"]])
    return scripts


def test_the_queue_runs_every_benchmark_that_publishes_rows():
    listed = {cmd[1] for cmd in _commands().values()}
    missing = _publishers() - listed
    assert not missing, f"benchmarks/reread.sh does not re-read {sorted(missing)}: add them to its QUEUE"


def test_every_option_in_the_queue_is_one_its_script_takes():
    for name, cmd in _commands().items():
        source = (REPO / cmd[1]).read_text()
        taken = set(re.findall(r"add_argument\(\s*[\"'](--[a-z-]+)", source))
        for option in (a for a in cmd[2:] if a.startswith("--")):
            assert option in taken, f"reread.sh's {name}: {cmd[1]} takes no {option}"


def test_an_unknown_name_is_one_line_and_exit_2_and_runs_nothing():
    out = _queue("run", "no_such_benchmark")
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "no_such_benchmark" in out.stderr
    assert not (REPO / "reports" / "reread" / "no_such_benchmark.log").exists()


def test_a_stop_file_ends_the_queue_before_its_next_benchmark_and_is_removed(tmp_path):
    """`touch reports/reread/stop` ends a queue; left behind, it stopped the next queue before it began."""
    (tmp_path / "stop").touch()
    bin_dir = tmp_path / "bin"  # `python` and `ray` that only leave a mark: a queue that ignored the file runs no
    bin_dir.mkdir()  # real benchmark over the committed results
    for name in ("python", "ray"):
        (bin_dir / name).write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
        (bin_dir / name).chmod(0o755)
    out = subprocess.run(["bash", str(SCRIPT), "quality_rank"], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "REREAD_DIR": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert out.returncode == 0, out.stderr
    assert "stopped before quality_rank" in out.stdout
    assert not (tmp_path / "ran").exists() and not (tmp_path / "quality_rank.log").exists()  # nothing ran
    assert not (tmp_path / "stop").exists()  # so the next queue runs
