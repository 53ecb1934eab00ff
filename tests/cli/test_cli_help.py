"""`tuner search --help` in an 80-column terminal: the options come in panels by topic, each only as wide as its own
flags, so the help text keeps room to be read (one table of 38 options left it 20 columns, a new user's note)."""

from __future__ import annotations

from typer.testing import CliRunner

from tuner.cli import app


def _help(width: int) -> str:
    result = CliRunner().invoke(app, ["search", "--help"], terminal_width=width)
    assert result.exit_code == 0, result.output
    return result.output


def test_search_help_is_grouped_by_topic_and_readable_at_80_columns():
    out = _help(80)
    for panel in ("What to search", "Budget", "Sampler and scheduler", "Time to target", "Confirmation and checks",
                  "Machine and Ray", "Output"):
        assert f"─ {panel} ─" in out, panel
    # a short help text fits on its option's line, and no line of the help is wider than the terminal
    assert any("--budget-seconds" in line and "Train each trial this many seconds." in line for line in out.splitlines())
    assert max(len(line) for line in out.splitlines()) <= 80
    # every scheduler's own flag lands in the scheduler's panel
    scheduler_panel = out.split("─ Sampler and scheduler ─")[1].split("╰")[0]
    assert all(flag in scheduler_panel for flag in ("--min-budget", "--eta", "--race-margin"))


def test_export_help_is_grouped_and_fits_80_columns():
    result = CliRunner().invoke(app, ["export", "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    out = result.output
    for panel in ("What to export", "The file", "Checks"):
        assert f"─ {panel} ─" in out, panel
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "knee (the default)" in out  # the pick's rules are listed in its help, its metavar short
