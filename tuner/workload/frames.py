"""The user's frames in an error: errors in the user's code are theirs, so `user_traceback` keeps their frames and
folds tuner's and libraries', and a file Ray shipped is named by the user's own path (`user_path`)."""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

TUNER_DIR = str(Path(__file__).resolve().parents[1])
LIB_DIRS = tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                    sysconfig.get_paths()["platlib"]) if p})

SHIPPED_ENV = "TUNER_SHIPPED"  # the driver's original paths of what Ray shipped (ship_paths), os.pathsep-joined


def user_path(filename: str) -> str:
    """The user's own path of a file Ray shipped (`.../runtime_resources/.../_ray_pkg_<hash>/mine.py` ->
    `/home/me/mine.py`), so a trial's traceback names the file they edit; any other path as it is."""
    parts = Path(filename).parts
    if "runtime_resources" not in parts:
        return filename
    ship = next((i for i, part in enumerate(parts) if part.startswith("_ray_pkg_")), None)
    if ship is None or ship + 1 >= len(parts):
        return filename
    top, rest = parts[ship + 1], parts[ship + 2:]
    for original in filter(None, os.environ.get(SHIPPED_ENV, "").split(os.pathsep)):
        if Path(original).name == top:
            return str(Path(original).joinpath(*rest))
    return filename


def is_user_frame(filename: str) -> bool:
    """Whether a frame's file is the user's: not tuner's, a library's or the interpreter's."""
    path = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return bool(path) and not path.startswith(TUNER_DIR) and not path.startswith(LIB_DIRS) \
        and not path.startswith("<")


def _library(filename: str) -> str:
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            i = parts.index(marker)
            return parts[i + 1] if i + 1 < len(parts) else marker
    return "tuner" if str(Path(filename).resolve()).startswith(TUNER_DIR) else "the standard library"


def user_traceback(err: BaseException) -> str | None:
    """The traceback with the user's frames in full and tuner's / libraries' frames folded to one line each run.
    None when no frame of the user's code is in it (an error in tuner or a library alone)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not any(is_user_frame(f.filename) for f in frames):
        return None
    lines = ["Traceback (most recent call last):"]
    folded: list[str] = []

    def flush() -> None:
        if folded:
            libs = sorted(set(folded))
            lines.append(f"  ... {len(folded)} frame{'s' if len(folded) > 1 else ''} in {', '.join(libs)}")
            folded.clear()

    for f in frames:
        if is_user_frame(f.filename):
            flush()
            lines.append(f'  File "{user_path(f.filename)}", line {f.lineno}, in {f.name}')
            if f.line:
                lines.append(f"    {f.line.strip()}")
        else:
            folded.append(_library(f.filename))
    flush()
    lines.extend(ln.rstrip("\n") for ln in traceback.format_exception_only(type(err), err))
    return "\n".join(lines)


def user_error_line(err: BaseException) -> str:
    """`Type: first line (at file.py:LINE)`, naming the innermost frame of the user's code when there is one."""
    from tuner.errors import error_line

    frames = [f for f in traceback.extract_tb(err.__traceback__) if is_user_frame(f.filename)]
    if isinstance(err, SyntaxError) and err.filename:
        return f"SyntaxError: {err.msg} (at {user_path(err.filename)}:{err.lineno})"
    where = f" (at {user_path(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return error_line(err)[: 500 - len(where)] + where
