"""A workload reference: a built-in (`gan`, `cnn`), `package.module:name` or `path/to/file.py:name`.

The reference is resolved once, where the user typed it (a relative file path against their working folder, a
dotted module with their working folder on sys.path, as uvicorn and gunicorn do), and recorded absolute, so that
every trial process (a Ray worker, maybe on another node) finds the same code (loader.py imports it there).
"""

from __future__ import annotations

import keyword
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import WorkloadError


@dataclass(frozen=True)
class WorkloadRef:
    """A resolved workload reference."""

    text: str  # canonical: a built-in's name, "pkg.mod:attr", or "/abs/file.py:attr"
    module: str  # what to import
    attr: str  # attribute path in the module (dots allowed)
    file: str | None = None  # a file reference's absolute path
    path_entry: str | None = None  # folder to put on sys.path before importing
    builtin: bool = False  # one of the names the caller's `named` table gave (tuner's own workloads)


def _identifiers(dotted: str) -> bool:
    return bool(dotted) and all(p.isidentifier() and not keyword.iskeyword(p) for p in dotted.split("."))


def parse_ref(text: str, base: Path | None = None, named: Mapping[str, str] | None = None) -> WorkloadRef:
    """Resolve a workload reference; a malformed one, or a file that is not there, is a WorkloadError. `named`
    maps short names to `module:function` references (tuner's own workloads: tuner.builtin.resolve_workload passes
    them; this layer knows no workload of its own)."""
    raw = str(text).strip()
    named = named or {}
    if raw in named:
        module, attr = named[raw].split(":")
        return WorkloadRef(raw, module, attr, builtin=True)
    hint = (f"use {'a built-in (' + ', '.join(named) + '), ' if named else ''}package.module:function, or "
            f"path/to/file.py:function (a function that returns tuner.Workload)")
    where, sep, attr = raw.rpartition(":")
    if not sep or not where:
        raise WorkloadError(f"unknown workload {raw!r}; {hint}")
    if not _identifiers(attr):
        raise WorkloadError(f"workload {raw!r}: {attr!r} is not a Python name; {hint}")
    if where.endswith(".py") or "/" in where or os.sep in where:
        path = Path(where).expanduser()
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        path = path.resolve()
        if not path.is_file():
            where_from = (f"{base.resolve()}, the folder of the file that names it" if base is not None else
                          "the folder you run tuner in")
            raise WorkloadError(f"workload {raw!r}: no such file {path}; check the path (relative paths are read from "
                                f"{where_from})")
        if path.suffix != ".py":
            raise WorkloadError(f"workload {raw!r}: {path} is not a .py file; {hint}")
        if not path.stem.isidentifier():
            raise WorkloadError(f"workload {raw!r}: {path.name} cannot be imported as a module (the name must be a "
                                f"Python identifier); rename the file")
        return WorkloadRef(f"{path}:{attr}", path.stem, attr, file=str(path), path_entry=str(path.parent))
    if not _identifiers(where):
        raise WorkloadError(f"workload {raw!r}: {where!r} is not a module path; {hint}")
    return WorkloadRef(f"{where}:{attr}", where, attr, path_entry=str((base or Path.cwd()).resolve()))
