"""The `tuner` command: parses, calls the library, prints. Errors become exit codes here and nowhere else.

Each command group lives in its own module with a `register(app)` function.
"""

from __future__ import annotations

import os
import sys

import typer

from tuner.errors import TunerError

try:  # typer >= 0.29 vendors click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import ClickException, NoArgsIsHelpError

app = typer.Typer(
    name="tuner",
    help="Find PyTorch training settings that train fast without training worse.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Find PyTorch training settings that train fast without training worse.

    Add --debug to any command to see tracebacks."""


def _register_commands() -> None:
    from tuner.cli import report, search, train

    for module in (train, search, report):
        module.register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point. User errors: one line on stderr, exit 2. `--debug` (or TUNER_DEBUG=1) shows tracebacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("TUNER_DEBUG") == "1"
    args = [a for a in args if a != "--debug"]
    _register_commands()
    try:
        rv = app(args=args, prog_name="tuner", standalone_mode=False)
        return rv if isinstance(rv, int) else 0  # without standalone mode, typer.Exit(n) comes back as n
    except TunerError as err:
        if debug:
            raise
        print(f"tuner: error: {err}", file=sys.stderr)
        return err.exit_code
    except typer.Exit as err:  # typer.Exit / --help
        return err.exit_code
    except NoArgsIsHelpError as err:  # bare `tuner`: help was asked for, in effect
        err.show()
        return 0
    except ClickException as err:  # usage errors: unknown option, bad choice, missing argument
        if debug:
            raise
        hint = ""
        ctx = getattr(err, "ctx", None)
        if ctx is not None:
            hint = f" (see `{ctx.command_path} --help`)"
        print(f"tuner: error: {err.format_message()}{hint}", file=sys.stderr)
        return 2
    except typer.Abort:
        print("tuner: aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("tuner: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug, not a user error: say so and how to see more
        if debug:
            raise
        print(f"tuner: internal error: {type(err).__name__}: {err} (rerun with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
