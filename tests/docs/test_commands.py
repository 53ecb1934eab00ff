"""Every `tuner ...` command line on every docs page and the README names a subcommand that exists and only
options that subcommand has, as `tuner.cli.app` defines them (click's introspection of the typer app).

Fenced blocks (bash and the `$ tuner ...` lines of text blocks) and inline code are read alike. Only names are
checked, so commands that need a GPU, a cluster or PostgreSQL (marked `<!-- not-run: ... -->` where they sit in a
bash block) are checked here too; tests/docs/test_pages.py runs the pages' CPU commands for real."""

from __future__ import annotations

import re
import shlex
from functools import cache

import pytest

from tests.helpers.docpages import REPO

PAGES = sorted(["README.md", *(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))])
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)|``([^`\n]+)``")
_FENCE = re.compile(r"^\s*```")
_START = re.compile(r"^(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python -m )?(tuner(?:\s.*)?)$")
_CUT = re.compile(r"\s(?:\||&&|;|>|2>|#)\s|\s#|\s\($")  # a pipe, a chain, a redirect, a comment: the command ends


@cache
def _cli() -> dict[str, set[str]]:
    """Each command path ('search', 'spaces show') -> its option names; '' -> the root's."""
    import typer.main

    from tuner.cli import app

    def walk(cmd, ctx, path: str, out: dict[str, set[str]]) -> None:  # noqa: ANN001 - click objects
        out[path] = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help"}
        for name in getattr(cmd, "commands", {}) or {}:
            sub = cmd.get_command(ctx, name)
            walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True), f"{path} {name}".strip(), out)

    root = typer.main.get_command(app)
    out: dict[str, set[str]] = {}
    walk(root, root.make_context("tuner", [], resilient_parsing=True), "", out)
    return out


def command_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each `tuner ...` command a Markdown text shows."""
    found: list[tuple[int, str]] = []
    lines = text.splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
            i += 1
            continue
        if fenced:
            start = i
            while line.rstrip().endswith("\\") and i + 1 < len(lines):  # a continued line
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            for part in re.split(r"\s&&\s", line.strip()):
                if m := _START.match(part.strip()):
                    found.append((start + 1, m.group(1)))
        else:
            for m in _INLINE.finditer(line):
                code = (m.group(1) or m.group(2)).strip()
                if (s := _START.match(code)) and "`" not in code:
                    found.append((i + 1, s.group(1)))
        i += 1
    return found


def problems(command: str) -> list[str]:
    """What is wrong with one `tuner ...` command line: an unknown subcommand, or options it does not have."""
    command = _CUT.split(command + " ", 1)[0].strip()
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote in prose: words are enough
        words = command.split()
    cli = _cli()
    words = words[1:]
    path = ""
    while words and f"{path} {words[0]}".strip() in cli:
        path = f"{path} {words.pop(0)}".strip()
    if not path:
        first = words[0] if words else ""
        if not first or first.startswith("-"):
            return [o for o in _options(words) if o not in cli[""] | {"--help", "--version"}]
        if not re.fullmatch(r"[a-z][a-z-]*", first):  # a placeholder (`tuner <command>`, `tuner ...`)
            return []
        return [f"no command `tuner {first}`"]
    allowed = cli[path] | cli[""]
    return [f"`tuner {path}` has no option {o}" for o in _options(words) if o not in allowed]


def _options(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", w)]


@pytest.mark.parametrize("page", PAGES)
def test_every_tuner_command_on_the_page_has_its_subcommand_and_options(page):
    text = (REPO / page).read_text()
    bad = [f"{page}:{n}: {cmd}\n    {p}" for n, cmd in command_lines(text) for p in problems(cmd)]
    assert not bad, "\n".join(bad)


def test_the_pages_show_commands_at_all():
    """The reader finds commands on most pages, so a reader that found none would pass vacuously: it must not."""
    total = sum(len(command_lines((REPO / page).read_text())) for page in PAGES)
    assert total > 100


def test_a_misspelled_subcommand_or_option_is_caught():
    page = "\n".join([
        "Run `tuner search --space amp_loader --trails 3` first.",
        "```bash",
        "tuner reprot amp_loader",
        "OMP_WAIT_POLICY=ACTIVE tuner train --config best.yaml \\",
        "    --budget-second 20",
        "pip install -e . && tuner export amp_loader --pick knee --verify",
        "```",
        "```text",
        "$ tuner spaces show amp_loader --format json",
        "tuner: error: --scheduler race races trials to a target",
        "```",
        "`tuner <command> --help`, `tuner report STUDY --trial N`",
    ])
    found = command_lines(page)
    assert [n for n, _ in found] == [1, 3, 4, 6, 9, 12, 12]
    assert [p for _, cmd in found for p in problems(cmd)] == [
        "`tuner search` has no option --trails", "no command `tuner reprot`",
        "`tuner train` has no option --budget-second"]
