"""Reading the commands and Python blocks out of the docs' Markdown, and running them as a reader would.

Rules a page follows (docs/contributing.md says them too):
- every line of a ```bash (or ```sh) block is a command that runs on a CPU-only machine, in order; a line ending in
  a backslash continues on the next; `# ...` comments are dropped;
- a block whose preceding line is `<!-- not-run: why -->` is not run (a GPU, a cluster, a server, your own path);
  `<!-- expect-exit: N -->` runs it and expects exit status N (an error a page shows on purpose);
- `pip install ...` parts of a `&&` chain are skipped (the test runs in the installed checkout), and so is
  `python -m pytest` (the suite would run itself);
- `tuner search` gets a small budget appended (`FIT`), and `tuner train` a samples budget where it names none
  (`FIT_TRAIN`): the command is checked, not the study's length;
- ```python blocks run as scripts; a line `--8<-- "path"` is replaced by that file, as the site's snippets do;
- everything runs under a passive OpenMP wait policy unless the environment sets one (`env`);
- pages run in one folder one after another (`RUNS`) run a command once: the same command with the same expected
  exit status, already run there by an earlier page, is not run again (its outcome is that page's).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/getting-started.md", "docs/own-model.md")
# The pages whose commands run in one folder, in this order: the README's quick tour (the default study, its
# report, export, re-train and profile) is getting-started's, command for command, so it runs after that page where
# its study already is, and only what getting-started has not run (the classifier study) runs again (`failures`).
RUNS = (("docs/getting-started.md", "README.md"), ("docs/own-model.md",))
# A study small enough for a test, whatever the page asks: two trials of a fixed sample count (not seconds, which
# the pre-flight would judge against this machine's speed), no confirmation re-runs, no numerics parity check (four
# runs of 100 steps: half the default study's minute on a bf16 CPU; tests/search checks it inside real studies).
FIT = "--trials 2 --budget-samples 640 --confirm 0 --parity-seconds 0"
FIT_TRAIN = "--budget-samples 640"  # `tuner train` of a config: its own budget is seconds a test need not spend

_FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*(not-run|expect-exit)\s*:\s*(.*?)\s*-->\s*$")
_SNIPPET = re.compile(r'^\s*--8<--\s*"([^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, its lines, the line it starts on, and its marker if any."""

    page: str
    line: int
    lang: str
    lines: tuple[str, ...]
    mark: tuple[str, str] | None = None  # ("not-run", why) | ("expect-exit", "2")

    @property
    def runs(self) -> bool:
        return self.mark is None or self.mark[0] != "not-run"

    @property
    def expected_exit(self) -> int:
        return int(self.mark[1]) if self.mark and self.mark[0] == "expect-exit" else 0


def blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a Markdown text, with the marker comment right before it."""
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not m.group(2) and not _opens(lines, i):
            i += 1
            continue
        lang, start = m.group(2).lower(), i
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.match(prev)
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        out.append(Block(page, start + 1, lang, tuple(body), (mark.group(1), mark.group(2)) if mark else None))
        i += 1
    return out


def _opens(lines: list[str], i: int) -> bool:
    """A bare ``` opens a block when an even number of fences came before it."""
    return sum(1 for line in lines[:i] if line.strip().startswith("```")) % 2 == 0


def _strip_comment(line: str) -> str:
    """The line without a trailing `# comment` that is outside quotes."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip()
    return line.rstrip()


def commands(block: Block) -> list[str]:
    """The shell commands a bash block runs, fitted for a test (see the module's rules)."""
    joined: list[str] = []
    pending = ""
    for raw in block.lines:
        line = raw.rstrip()
        if pending:
            line = line.lstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    out = []
    for line in joined:
        line = _strip_comment(line).strip()
        if not line:
            continue
        parts = []
        for part in (p.strip() for p in line.split("&&")):
            words = part.split()
            if words[:2] == ["pip", "install"] or words[:3] == ["python", "-m", "pytest"]:
                continue
            if words[:2] == ["tuner", "search"]:
                part = f"{part} {FIT}"
            elif words[:2] == ["tuner", "train"] and "--budget-" not in part:
                part = f"{part} {FIT_TRAIN}"
            parts.append(part)
        if parts:
            out.append(" && ".join(parts))
    return out


def python_source(block: Block) -> str:
    """A python block's code, its snippet lines replaced by the files they name."""
    out = []
    for line in block.lines:
        m = _SNIPPET.match(line)
        out.append((REPO / m.group(1)).read_text() if m else line)
    return "\n".join(out) + "\n"


def scratch(tmp: Path) -> Path:
    """A folder a reader runs the pages in: the repository's examples and spaces, nothing of any earlier study."""
    for name in ("examples", "search_spaces"):
        shutil.copytree(REPO / name, tmp / name, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp


def env() -> dict[str, str]:
    """The reader's environment: this checkout's tuner, Ray quiet and local, and a passive OpenMP wait policy unless
    the environment sets one. The suite's other worker shares these cores: beside it the pages' commands took 180-190
    s a page under libgomp's spinning default and 94-101 s under a passive policy (lab notes, sixty-ninth session).
    Their studies are too short to probe an environment knob either way (a quick study keeps the user's), so the
    policy changes no path they check, only the line that says why the knob was kept."""
    e = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), e.get("PYTHONPATH", "")) if p)
    e.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    bindir = str(Path(sys.executable).parent)  # the `tuner` script installed beside this Python
    e["PATH"] = os.pathsep.join([bindir, e.get("PATH", "")])
    return e


@dataclass(frozen=True)
class Ran:
    command: str
    code: int
    output: str


def run(command: str, cwd: Path, timeout: float = 900) -> Ran:
    """One command through bash, as typed at a prompt; its output's last lines kept for the failure message."""
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
    return Ran(command, done.returncode, tail)


def failures(page_text: str, page: str, cwd: Path, done: set[tuple[str, int]] | None = None) -> list[str]:
    """Run a page's bash blocks in order; each command whose exit status is not the expected one, explained.
    `done`: the (command, expected exit) pairs earlier pages ran in `cwd`, skipped here and added to."""
    bad = []
    done = set() if done is None else done
    for block in blocks(page_text, page):
        if block.lang not in ("bash", "sh", "shell") or not block.runs:
            continue
        for command in commands(block):
            if (command, block.expected_exit) in done:
                continue
            done.add((command, block.expected_exit))
            ran = run(command, cwd)
            if ran.code != block.expected_exit:
                bad.append(f"{page}:{block.line}: `{command}` exited {ran.code} "
                           f"(expected {block.expected_exit}):\n{ran.output}")
    return bad
