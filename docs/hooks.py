"""MkDocs hooks: pages whose content is generated from the code, so they cannot drift from it.

A page asks for a generated block with a marker line:
- `<!-- generated: cli -->`: every `tuner` command, its usage and its options, read from the typer app itself;
- `<!-- generated: benchmarks -->`: the benchmark table, from the results files under benchmarks/results/
  (`benchmarks.table.render_markdown`);
- `<!-- generated: knobs -->`: the knob table (`tuner.knobs.readme_table`), the same one the README shows.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _command_docs(cmd, ctx, path: str, depth: int) -> list[str]:  # noqa: ANN001 - click objects of typer's vendored click
    """One command's section: its help, its usage line, a table of its arguments and options."""
    lines = [f"{'#' * depth} `{path}`", ""]
    text = (cmd.help or cmd.short_help or "").strip()
    if text:
        lines += [text.replace("\b\n", ""), ""]
    pieces = " ".join(cmd.collect_usage_pieces(ctx))
    lines += ["```text", f"{path} {pieces}".rstrip(), "```", ""]
    rows = []
    for param in cmd.params:
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        help_text = " ".join(help_text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| `{names}` | {help_text} |")  # a pipe inside backticks does not split the cell
    if rows:
        lines += ["| argument / option | what it does |", "| --- | --- |", *rows, ""]
    subcommands = getattr(cmd, "commands", None)
    if subcommands:
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
            lines += _command_docs(sub, sub_ctx, f"{path} {name}", min(depth + 1, 4))
    return lines


def cli_reference() -> str:
    """The whole CLI, in `tuner --help`'s order, as Markdown."""
    import typer.main

    from tuner.cli import app

    root = typer.main.get_command(app)
    ctx = root.make_context("tuner", [], resilient_parsing=True)
    lines: list[str] = []
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        if cmd is None or getattr(cmd, "hidden", False):
            continue
        sub_ctx = cmd.make_context(name, [], parent=ctx, resilient_parsing=True)
        lines += _command_docs(cmd, sub_ctx, f"tuner {name}", 2)
    return "\n".join(lines).rstrip() + "\n"


def benchmark_table() -> str:
    if str(REPO) not in sys.path:  # the benchmarks package sits beside tuner/ in the checkout, not installed
        sys.path.insert(0, str(REPO))  # (MkDocs restores sys.path after loading a hook, so this is done here)
    from benchmarks.table import render_markdown

    return render_markdown(REPO)


def knob_table() -> str:
    from tuner.knobs import readme_table

    return readme_table()


GENERATORS = {"cli": cli_reference, "benchmarks": benchmark_table, "knobs": knob_table}


def expand(markdown: str) -> str:
    """Replace each `<!-- generated: NAME -->` line with what NAME's generator writes."""
    out = []
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("<!-- generated:") and stripped.endswith("-->"):
            name = stripped[len("<!-- generated:"):-3].strip()
            if name not in GENERATORS:
                raise ValueError(f"unknown generated block {name!r}; known: {', '.join(GENERATORS)}")
            out.append(GENERATORS[name]())
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001, ARG001 - MkDocs' hook signature
    return expand(markdown)
