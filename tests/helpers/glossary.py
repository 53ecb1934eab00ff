"""Where a page first uses a glossary term, and whether that use links docs/concepts/glossary.md.

A newcomer meets a term once before it is explained; so on each page the first use in prose (not in code, a
heading, an admonition's title, an image or another link's text) must be a link to the glossary's entry.
`link_first_uses` adds the missing links (run once by hand on a page); a test asserts it finds nothing to add.
"""

from __future__ import annotations

import re

# glossary anchor -> the words that use the term (case-insensitive, whole words)
TERMS: dict[str, str] = {
    "baseline": r"baseline",
    "front": r"front",
    "knee": r"knee",
    "confirmation": r"confirmation",
    "noise-floor": r"noise floor",
    "suspect": r"suspect",
    "parity": r"parity",
    "probes": r"probes",
    "ceiling": r"ceilings?",
    "headroom": r"headroom",
    "goodput": r"goodput",
    "rung": r"rungs?",
    "race": r"race",
    "target": r"target",
    "horizon": r"horizon",
    "busy-machine": r"busy machine|busy",
    "wait-policy": r"wait policy",
}

# what is not prose: code, headings, admonition lines, HTML comments and tags, images and links
_PROTECTED = re.compile(
    r"(?ms)^[ \t]*```.*?^[ \t]*```[^\n]*$"
    r"|`[^`\n]*`"
    r"|(?m:^#{1,6} [^\n]*$)"
    r"|(?m:^[ \t]*!!![^\n]*$)"
    r"|<!--.*?-->"
    r"|<[^>\n]+>"
    r"|!?\[[^\]\n]*\]\([^)\n]*\)"
)
_GLOSSARY_LINK = re.compile(r"\[[^\]\n]*\]\([^)\n]*glossary\.md#([a-z-]+)\)")


def _word(term: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])(?:{term})(?![\w-])", re.IGNORECASE)


def first_uses(text: str) -> dict[str, tuple[int, bool]]:
    """For each term the page uses: the offset of its first use, and whether that use is a link to the glossary."""
    linked: dict[str, int] = {}
    prose: list[tuple[int, int]] = []
    pos = 0
    for m in _PROTECTED.finditer(text):
        prose.append((pos, m.start()))
        pos = m.end()
        g = _GLOSSARY_LINK.fullmatch(m.group(0))
        if g and g.group(1) not in linked:
            linked[g.group(1)] = m.start()
    prose.append((pos, len(text)))
    out: dict[str, tuple[int, bool]] = {}
    for anchor, term in TERMS.items():
        pattern = _word(term)
        plain = next((start + w.start() for start, end in prose for w in pattern.finditer(text[start:end])), None)
        link = linked.get(anchor)
        if plain is None and link is None:
            continue
        if link is not None and (plain is None or link < plain):
            out[anchor] = (link, True)
        else:
            out[anchor] = (plain, False)  # type: ignore[assignment]
    return out


def unlinked(text: str) -> list[str]:
    """The terms whose first use on the page is not a glossary link, with the line it is on."""
    return [f"{anchor} (line {text.count(chr(10), 0, offset) + 1})"
            for anchor, (offset, is_link) in sorted(first_uses(text).items(), key=lambda kv: kv[1][0]) if not is_link]


def link_first_uses(text: str, glossary: str) -> str:
    """The page with each term's first plain use made a link to `glossary#anchor`."""
    for anchor, (offset, is_link) in sorted(first_uses(text).items(), key=lambda kv: -kv[1][0]):
        if is_link:
            continue
        word = _word(TERMS[anchor]).match(text, offset)
        assert word is not None
        text = f"{text[:offset]}[{word.group(0)}]({glossary}#{anchor}){text[word.end():]}"
    return text
