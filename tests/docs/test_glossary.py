"""The glossary: every term a newcomer meets is defined on one page, and linked there where a page first uses it."""

from __future__ import annotations

import re

import pytest

from tests.helpers.docpages import REPO
from tests.helpers.glossary import TERMS, link_first_uses, unlinked

CONCEPTS = sorted(p.name for p in (REPO / "docs" / "concepts").glob("*.md") if p.name != "glossary.md")
PAGES = sorted(str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")
               if p.name != "glossary.md" and p.parent.name != "concepts")


def _readme_section() -> str:
    readme = (REPO / "README.md").read_text()
    return readme[readme.index("## What it does for you"):readme.index("## A tour")]


def test_the_glossary_defines_every_term_and_is_in_the_nav():
    glossary = (REPO / "docs" / "concepts" / "glossary.md").read_text()
    anchors = {re.sub(r"[^a-z0-9]+", "-", h.lower()).strip("-") for h in re.findall(r"(?m)^## (.+)$", glossary)}
    assert set(TERMS) <= anchors, f"glossary.md lacks {sorted(set(TERMS) - anchors)}"
    assert "concepts/glossary.md" in (REPO / "mkdocs.yml").read_text()


def test_the_horizon_entry_says_whether_the_check_exists():
    """The entry must not promise a check the CLI lacks (nor deny one it has)."""
    from typer.testing import CliRunner

    from tuner.cli import app

    help_text = CliRunner().invoke(app, ["export", "--help"], terminal_width=200).output
    entry = (REPO / "docs" / "concepts" / "glossary.md").read_text().split("## Horizon", 1)[1].split("\n## ", 1)[0]
    assert ("--horizon" in help_text) != ("Not built yet" in entry)


@pytest.mark.parametrize("page", CONCEPTS)
def test_each_concept_page_links_each_term_at_its_first_use(page):
    text = (REPO / "docs" / "concepts" / page).read_text()
    assert not unlinked(text), f"docs/concepts/{page}: first use not linked to glossary.md: {unlinked(text)}"


@pytest.mark.parametrize("page", PAGES)
def test_every_other_page_links_each_term_at_its_first_use(page):
    """How-to, reference, the FAQ and the rest too: a newcomer may land on any page first (issue 54 item 1)."""
    text = (REPO / "docs" / page).read_text()
    assert not unlinked(text), f"docs/{page}: first use not linked to glossary.md: {unlinked(text)}"


def test_the_readmes_what_it_does_links_each_term_at_its_first_use():
    assert not unlinked(_readme_section())


def test_an_unlinked_first_use_is_caught_and_code_is_not_prose():
    page = "Use `--pick knee`.\n\n```text\nknee: trial 6\n```\n\n## The knee\n\nThe knee is picked; the knee again.\n"
    assert unlinked(page) == ["knee (line 9)"]
    fixed = link_first_uses(page, "glossary.md")
    assert "The [knee](glossary.md#knee) is picked; the knee again." in fixed and not unlinked(fixed)
