"""The README and the docs site say only what works: their commands run, their Python runs, their links resolve,
and the site builds with no warning (`mkdocs build --strict`)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers.docpages import (FIT, FIT_TRAIN, PAGES, REPO, RUNS, Block, blocks, commands, failures, python_source,
                                    run, scratch)


def _read(page: str) -> str:
    path = REPO / page
    assert path.is_file(), f"{page} is missing: the docs promise it"
    return path.read_text()


# --- how a page is read -----------------------------------------------------------------------------------------


def test_blocks_keep_their_markers_and_commands_are_fitted():
    text = "\n".join([
        "Intro.",
        "```bash",
        "pip install -e . && tuner search --space amp_loader   # the default study",
        "tuner report amp_loader \\",
        "    --format json",
        "tuner train --config best.yaml",
        "```",
        "<!-- not-run: needs a GPU -->",
        "```bash",
        "tuner search --space amp_loader --gpus-per-trial 1",
        "```",
        "<!-- expect-exit: 2 -->",
        "```bash",
        "tuner report no_such_study",
        "```",
        "```text",
        "tuner search output, not a command",
        "```",
    ])
    found = blocks(text, "page.md")
    assert [b.lang for b in found] == ["bash", "bash", "bash", "text"]
    assert commands(found[0]) == [f"tuner search --space amp_loader {FIT}", "tuner report amp_loader --format json",
                                  f"tuner train --config best.yaml {FIT_TRAIN}"]
    assert not found[1].runs and found[1].mark == ("not-run", "needs a GPU")
    assert found[2].runs and found[2].expected_exit == 2


def test_the_test_suite_does_not_run_itself():
    block = Block("README.md", 1, "bash", ('pip install -e ".[test]" && python -m pytest -q',))
    assert commands(block) == []


def test_a_planted_typo_in_a_readme_command_fails(tmp_path):
    """The check has teeth: the README's own `tuner report` line with its subcommand misspelled is caught."""
    readme = _read("README.md")
    line = next(ln for b in blocks(readme, "README.md") if b.lang == "bash" and b.runs
                for ln in commands(b) if ln.startswith("tuner report"))
    typo = line.replace("tuner report", "tuner reprot", 1)
    page = f"```bash\n{typo}\n```\n"
    bad = failures(page, "README.md (planted typo)", tmp_path)
    assert len(bad) == 1 and "reprot" in bad[0]


def test_python_snippets_read_the_files_they_name():
    block = Block("p.md", 1, "python", ('--8<-- "examples/charlm.py"',))
    assert python_source(block) == (REPO / "examples" / "charlm.py").read_text() + "\n"


# --- the README ---------------------------------------------------------------------------------------------------


def test_readme_is_short_and_starts_with_the_default_study_the_quick_look_and_the_tests():
    readme = _read("README.md")
    assert len(readme.splitlines()) <= 200, "README.md is the face: keep it to 200 lines, the rest goes in docs/"
    first_two = [b for b in blocks(readme, "README.md") if b.lang == "bash"][:2]
    # the two commands a fresh machine runs: install + the default study, install + the tests
    assert first_two[0].lines[0].startswith("pip install") and \
        first_two[0].lines[0].endswith("tuner search --space amp_loader")
    assert "python -m pytest" in first_two[1].lines[0]
    before = readme[:readme.index("```bash")]
    assert "tuner search --space quick" in before  # the first look, named before the default study's command


def test_ci_runs_the_readmes_test_command():
    readme = _read("README.md")
    second = [b for b in blocks(readme, "README.md") if b.lang == "bash"][1].lines[0]
    ci = (REPO / ".ci" / "run").read_text()
    for part in (p.strip() for p in second.split("&&")):
        assert part in ci, f".ci/run must run the README's test command; missing: {part}"


def test_readme_links_resolve():
    readme = re.sub(r"(?ms)^\s*```.*?^\s*```", "", _read("README.md"))  # code is not prose: `m["net"](x)` is no link
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"


# --- the pages, run ---------------------------------------------------------------------------------------------


def test_a_command_an_earlier_page_ran_in_the_folder_runs_once_and_every_page_is_run(tmp_path):
    first = "```bash\necho a >> log\n```\n"
    second = "```bash\necho a >> log\necho b >> log\n```\n<!-- expect-exit: 3 -->\n```bash\necho a >> log\n```\n"
    done: set[tuple[str, int]] = set()
    assert failures(first, "one.md", tmp_path, done) == []
    bad = failures(second, "two.md", tmp_path, done)
    assert (tmp_path / "log").read_text() == "a\nb\na\n"  # the same command expecting another exit status runs
    assert len(bad) == 1 and "two.md:6" in bad[0] and "exited 0 (expected 3)" in bad[0]
    assert sorted(page for pages in RUNS for page in pages) == sorted(PAGES)


@pytest.mark.parametrize("pages", RUNS, ids="+".join)
def test_every_command_on_the_page_runs(pages, tmp_path):
    cwd, done = scratch(tmp_path), set()
    bad = [line for page in pages for line in failures(_read(page), page, cwd, done)]
    assert not bad, "\n\n".join(bad)


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_on_the_page_runs(page, tmp_path):
    cwd = scratch(tmp_path)
    for block in blocks(_read(page), page):
        if block.lang != "python" or not block.runs:
            continue
        script = tmp_path / f"block_{block.line}.py"
        script.write_text(python_source(block))
        ran = run(f"{sys.executable} {script}", cwd, timeout=300)
        assert ran.code == block.expected_exit, f"{page}:{block.line}: python block exited {ran.code}:\n{ran.output}"


def test_the_site_builds_with_no_warning(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "tuner search" in cli and "--study-seconds" in cli  # generated from the typer app, not written by hand
    bench = (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    assert "<table>" in bench
