"""The set-up most search tests share: write a space YAML, run `tuner search` on it (the `space_search` fixture)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, NamedTuple


class Searched(NamedTuple):
    """What one in-process `tuner search` left: its exit code, its stdout and stderr, the space and reports dir."""

    code: int
    out: str
    err: str
    space: Path
    reports: Path


class SpaceSearch:
    """`run`: in-process (`tuner.cli.main`), its output read from capsys; `start`: in its own process
    (tests/helpers/searchproc.py's `search`). Both write the space under tmp_path and pass --reports-dir."""

    def __init__(self, tmp_path: Path, capsys: Any) -> None:
        self.tmp_path = tmp_path
        self.capsys = capsys

    def write(self, text: str, name: str = "space.yaml") -> Path:
        space = self.tmp_path / name
        space.write_text(text)
        return space

    def run(self, text: str, *flags: str, name: str = "space.yaml", reports: Path | None = None) -> Searched:
        from tuner.cli import main

        space = self.write(text, name)
        reports = self.tmp_path / "reports" if reports is None else reports
        code = main(["search", "--space", str(space), *flags, "--reports-dir", str(reports)])
        out, err = self.capsys.readouterr()
        return Searched(code, out, err, space, reports)

    def start(self, text: str, *flags: str, name: str = "space.yaml") -> tuple[subprocess.Popen, Path]:
        """The search's process and its reports dir (tmp_path/reports)."""
        from tests.helpers.searchproc import search

        reports = self.tmp_path / "reports"
        return search(["--space", str(self.write(text, name)), *flags], reports), reports
