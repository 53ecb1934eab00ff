"""The Typer app and what every command shares: the --debug flag, the --format choices, consoles, JSON output.

Commands register on `app` when their module is imported (tuner.cli imports each once). `--debug` (or
TUNER_DEBUG=1) is an ordinary option of the root and of every command; its callback records the choice on the
run's state object, which `tuner.cli.main` reads when it turns an exception into an exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="tuner",
    help="Find PyTorch training settings that train fast without training worse.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass
class CliState:
    """Per-invocation state handed to Click as `obj`."""

    debug: bool = False


def _set_debug(ctx: typer.Context, value: bool) -> bool:
    if value and isinstance(ctx.obj, CliState):
        ctx.obj.debug = True
    return value


Debug = Annotated[bool, typer.Option("--debug", help="Show the traceback instead of a one-line error.",
                                     callback=_set_debug, is_eager=True, envvar="TUNER_DEBUG")]


class Format(str, Enum):
    """What a command prints on stdout: a table for people, or exactly one JSON document for machines."""

    table = "table"
    json = "json"


FormatOption = Annotated[Format, typer.Option("--format", help="table (for people) or json (one JSON document "
                                                                 "on stdout).")]


@app.callback()
def _root(debug: Debug = False) -> None:
    """Find PyTorch training settings that train fast without training worse.

    Add --debug to any command to see tracebacks."""


def stdout_console() -> Any:
    from rich.console import Console

    # Piped output gets a wide console, so tables with many params are not squeezed into 80 columns.
    return Console(highlight=False) if sys.stdout.isatty() else Console(width=240, soft_wrap=False, highlight=False)


def print_table(console: Any, table: Any) -> None:
    """Print a table; where stdout is not a terminal (a file, a pipe, a CI log), at the table's natural width, so
    each row stays one line a reader can grep rather than cells folded over several lines (a study's table of
    23 columns squeezed into 240 wrapped its throughput cells over six)."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.measure import Measurement

    needed = Measurement.get(console, console.options.update(max_width=10_000), table).maximum
    width = console.width
    console.width = max(width, needed)
    try:
        console.print(table)
    finally:
        console.width = width


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(doc: Any) -> None:
    from tuner.files import dump_json

    print(dump_json(doc))


@contextlib.contextmanager
def stdout_to_stderr(active: bool = True) -> Iterator[None]:
    """With --format json, stdout is the one JSON document: whatever else would go there meanwhile (Ray's status
    tables, its workers' output, libraries' prints) goes to stderr, at the file-descriptor level, so processes
    started inside (Ray's) inherit it too."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved, python_stdout = os.dup(1), sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout = python_stdout


def user_output() -> Any:
    """While the workload's code runs in this process: what it prints (a model's constructor reporting its size)
    goes to stderr, so stdout stays the one table or JSON document the command writes."""
    import contextlib

    return contextlib.redirect_stdout(sys.stderr)


def apply_run_env(run_env: dict[str, str] | None, env: Any = None) -> None:
    """A config's `env` (the variables its trial ran under, tuner.config.SPEED_ENV), set before torch loads so
    the run reads what the trial read. A different value this shell had gives way, with a note naming both. tuner
    itself sets nothing else: a command runs in the environment the user's own training runs in."""
    env = os.environ if env is None else env
    for key, value in (run_env or {}).items():
        had = env.get(key)
        if had is not None and had != value:
            note(f"{key}={value} from the config's env: (its trial ran under it), not {had} as set here; drop "
                 f"{key} from env: to keep yours")
        env[key] = value
    if env is os.environ:  # glibc read its malloc thresholds at python's start: set them the way it takes them now
        from tuner.knobs import apply_malloc

        apply_malloc(run_env or {})


def busy_line(environment: Any) -> str | None:
    """What other processes took of the run's CPUs while it trained, where that reached BUSY_SHARE (issue 58):
    said beside its figures, since they move with that load."""
    if environment is None or not environment.busy:
        return None
    load = f", load average {environment.load1:.1f}" if environment.load1 is not None else ""
    return (f"note: the machine was busy: other processes took {environment.others_share:.0%} of this run's CPUs "
            f"while it trained ({environment.others_cpus:.1f} CPUs busy with their work{load}); its throughput "
            f"moves with that load")


def note(text: str) -> None:
    """Progress and hints: stderr, so stdout stays the result."""
    print(text, file=sys.stderr)


__all__ = ["CliState", "Debug", "Format", "FormatOption", "app", "apply_run_env", "busy_line", "json", "note",
           "print_json", "print_table",
           "stderr_console", "stdout_console", "stdout_to_stderr", "user_output"]
