"""What every benchmark shares (benchmarks/common.py): the `dirty` flag a results row carries says whether the code
the table's staleness check covers (benchmarks.table.CODE) had uncommitted changes, nothing else."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import benchmarks.common as common

BENCHMARKS = Path(common.__file__).resolve().parent


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_a_results_file_written_earlier_in_the_sequence_is_not_an_uncommitted_change(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    for path in ("tuner/a.py", "benchmarks/run.py", "benchmarks/results/parity.json", "benchmarks/README.md"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("x\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(common, "REPO", repo)
    (repo / "benchmarks/results/parity.json").write_text("a row\n")  # an earlier benchmark of the sequence
    (repo / "benchmarks/README.md").write_text("the table\n")
    head, dirty = common.git_state()
    assert head and not dirty
    (repo / "tuner/a.py").write_text("y\n")
    assert common.git_state() == (head, True)


def test_every_benchmark_takes_its_dirty_flag_from_git_state():
    """parity.py ran its own `git diff HEAD -- tuner benchmarks`, so its rows said 'uncommitted changes' for the
    results files run.py had just written; retrain.py wrote dirty: false whatever the tree held."""
    found = []
    for path in sorted(BENCHMARKS.glob("*.py")):
        if path.name in ("common.py", "table.py"):  # git_state, and the staleness check over the same CODE
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.List) and [getattr(e, "value", None) for e in node.elts[:2]] == ["git", "diff"]:
                found.append(f"{path.name}:{node.lineno} runs git diff")
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if getattr(key, "value", None) == "dirty" and isinstance(value, ast.Constant):
                        found.append(f"{path.name}:{node.lineno} writes dirty: {value.value}")
    assert not found, found
