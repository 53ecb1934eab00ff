"""The `tuner` command: parses, calls the library, prints. Errors become exit codes here and nowhere else.

Exit codes: 0 done; 1 a bug (one line, --debug for the traceback); 2 bad input (tuner.errors.UserError and Click's
usage errors); 3 a run that did not complete or verify (tuner.errors.RunFailed); 130 interrupted (Ctrl-C); `tuner
search` stopped by another signal 128 + the signal (143 SIGTERM, 129 SIGHUP: tuner.search._stop).
"""

from __future__ import annotations

import sys

import typer

# Each module registers its commands on `app` when imported, once; this order is the order of `tuner --help`.
from tuner.cli import train  # noqa: F401, I001
from tuner.cli import profile  # noqa: F401, I001
from tuner.cli import parity  # noqa: F401, I001
from tuner.cli import search  # noqa: F401, I001
from tuner.cli import report  # noqa: F401, I001
from tuner.cli.app import CliState, app
from tuner.errors import TunerError
from tuner.files import storage_error

try:  # typer >= 0.29 vendors click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import ClickException, NoArgsIsHelpError


__all__ = ["RENAMED", "entry", "main"]

# Flags that were renamed: the old spelling keeps working, with a note on stderr naming the new one.
RENAMED = {"--json": ("--format", "json")}


def _renamed(args: list[str]) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":  # what follows belongs to the user, untouched
            return out + args[i:]
        if arg in RENAMED:
            new = RENAMED[arg]
            print(f"tuner: note: {arg} is now spelled {' '.join(new)}", file=sys.stderr)
            out.extend(new)
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point. User errors: one line on stderr, exit 2. `--debug` (or TUNER_DEBUG=1) shows tracebacks."""
    state = CliState()
    try:
        args = _renamed(list(sys.argv[1:] if argv is None else argv))
        rv = app(args=args, prog_name="tuner", standalone_mode=False, obj=state)
        return rv if isinstance(rv, int) else 0  # without standalone mode, typer.Exit(n) comes back as n
    except TunerError as err:
        if state.debug:
            raise
        print(f"tuner: error: {err}", file=sys.stderr)
        return err.exit_code
    except typer.Exit as err:  # typer.Exit / --help
        return err.exit_code
    except NoArgsIsHelpError as err:  # bare `tuner`: help was asked for, in effect
        err.show()
        return 0
    except ClickException as err:  # usage errors: unknown option, bad choice, missing argument
        if state.debug:
            raise
        ctx = getattr(err, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        print(f"tuner: error: {err.format_message()}{hint}", file=sys.stderr)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        print("tuner: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug, not a user error: say so and how to see more
        if state.debug:
            raise
        if isinstance(err, OSError) and (mapped := storage_error(err)) is not None:  # full, read-only, in the way
            print(f"tuner: error: {mapped}", file=sys.stderr)
            return mapped.exit_code
        print(f"tuner: internal error: {type(err).__name__}: {err} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


def entry() -> None:
    """The `tuner` program (its console script and `python -m tuner`): main(), then end the process without
    Python's teardown of the modules a command imported (tuner.files.fast_exit): ~2 s after `tuner search` had
    printed everything, once torch and Ray were imported. main() itself returns, for callers in a process that
    goes on (the tests)."""
    from tuner.files import fast_exit

    fast_exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
