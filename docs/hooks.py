"""MkDocs hooks: pages whose content is generated from the code, so they cannot drift from it.

A page asks for a generated block with a marker line:
- `<!-- generated: cli -->`: every `tuner` command, its usage and its options, read from the typer app itself;
- `<!-- generated: benchmarks -->`: the benchmark table, from the results files under benchmarks/results/
  (`benchmarks.table.render_markdown`);
- `<!-- generated: knobs -->`: the knob table (`tuner.knobs.readme_table`), the same one the README shows;
- `<!-- generated: metrics -->`: the metrics a trial records (`tuner.study.metrics.METRICS`);
- `<!-- generated: config-KEY -->`: the keys of a config file's part (`top`, `params`, `budget`, `measure`,
  `quality`, `target`), read from the pydantic models of `tuner.config` with their defaults and bounds.
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


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def metrics_table() -> str:
    """Every metric a trial can record, its column heading in `tuner report` and what it is."""
    from tuner.study.metrics import METRICS

    rows = [f"| `{m.key}` | {_cell(m.label)} | {_cell(m.help)} |" for m in METRICS]
    return "\n".join(["| key | column | what it is |", "| --- | --- | --- |", *rows]) + "\n"


def _default(field) -> str:  # noqa: ANN001 - a pydantic FieldInfo
    from pydantic import BaseModel

    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        dumped = value.model_dump(exclude_none=True)
        return "see below" if len(dumped) > 2 else "`{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}"
                                                                   for k, v in dumped.items()) + "}`"
    if value == "":
        return '`""`'
    if value is None or value == {}:
        return "none" if value is None else "`{}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value.__class__.__name__ == "PydanticUndefinedType":
        return "required"
    return f"`{value}`"


def _allowed(field) -> str:  # noqa: ANN001 - a pydantic FieldInfo
    import typing

    import annotated_types as at

    parts = []
    args = (field.annotation,) if typing.get_origin(field.annotation) is typing.Literal else \
        typing.get_args(field.annotation)  # a Literal, or an Optional one
    choices = [a for arg in args if typing.get_origin(arg) is typing.Literal for a in typing.get_args(arg)]
    if choices:
        parts.append(", ".join(f"`{c}`" for c in choices))
    for m in field.metadata:
        for cls, attr, op in ((at.Ge, "ge", ">="), (at.Gt, "gt", ">"), (at.Le, "le", "<="), (at.Lt, "lt", "<")):
            if isinstance(m, cls):
                bound = getattr(m, attr)
                parts.append(f"{op} {bound:g}" if isinstance(bound, float) or bound >= 10**6 else f"{op} {bound}")
    return ", ".join(parts)


CONFIG_PARTS = {"top": "TrialConfig", "params": "Params", "budget": "Budget", "measure": "Measure",
                "quality": "Quality", "target": "Target"}


def config_table(part: str) -> str:
    """One part of a config file: each key, its default, what it admits and what it is, from `tuner.config`."""
    import tuner.config as config

    model = getattr(config, CONFIG_PARTS[part])
    rows = []
    for name, field in model.model_fields.items():
        what = _cell(field.description or "")
        allowed = _allowed(field)
        rows.append(f"| `{name}` | {_default(field)} | {allowed} | {what} |")
    return "\n".join(["| key | default | allowed | what it is |", "| --- | --- | --- | --- |", *rows]) + "\n"


GENERATORS = {"cli": cli_reference, "benchmarks": benchmark_table, "knobs": knob_table, "metrics": metrics_table,
              **{f"config-{part}": (lambda part=part: config_table(part)) for part in CONFIG_PARTS}}


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
