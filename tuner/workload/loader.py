"""Finding a workload by name: a built-in (`gan`, `cnn`), `package.module:name` or `path/to/file.py:name`.

The reference is resolved once, where the user typed it (a relative file path against their working folder, a
dotted module with their working folder on sys.path, as uvicorn and gunicorn do), and recorded absolute, so that
every trial process (a Ray worker, maybe on another node) finds the same code. `ship_paths` names what Ray must
carry to other nodes (runtime_env py_modules): the user's file's folder (or the file alone, where the folder is
big), or their package's folder.

Errors in the user's code are theirs: `user_traceback` keeps their frames and folds tuner's and libraries'.

Over 400 lines because finding, shipping and naming a user's files share one notion of where their code lives.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import keyword
import os
import signal
import sys
import sysconfig
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import WorkloadError
from tuner.workload.api import Workload

_TUNER_DIR = str(Path(__file__).resolve().parents[1])
_LIB_DIRS = tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                     sysconfig.get_paths()["platlib"]) if p})


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


# --- importing ---------------------------------------------------------------------------------------------------


def shipped_copy(ref: WorkloadRef) -> Path | None:
    """Inside a Ray worker: the copy of the user's file that Ray shipped with the job (ship_paths; runtime_env
    py_modules puts the folder it unpacks to on sys.path, under Ray's `runtime_resources`): `<entry>/<folder>/<file>`
    where the file's folder was shipped, `<entry>/<file>` where the file alone was. None outside Ray."""
    if ref.file is None:
        return None
    original = Path(ref.file)
    for entry in sys.path:
        if entry and "runtime_resources" in Path(entry).parts:
            for candidate in (Path(entry) / original.parent.name / original.name, Path(entry) / original.name):
                if candidate.is_file():
                    return candidate.resolve()
    return None


def _import_file(ref: WorkloadRef) -> Any:
    """The original file where it exists on this machine (the driver's, one machine or a shared file system), so
    that a workload finding its neighbours by `__file__` (a module beside it, a data file) finds them; Ray's
    shipped copy on another node, beside the copy of its folder where that was shipped (ship_paths)."""
    assert ref.file is not None
    path = Path(ref.file) if Path(ref.file).is_file() else shipped_copy(ref) or Path(ref.file)
    if not path.is_file():  # on another node, not shipped: importable by its name if at all
        return importlib.import_module(ref.module)
    existing = sys.modules.get(ref.module)
    if existing is not None and getattr(existing, "__file__", None) and Path(existing.__file__).resolve() == path:
        return existing
    name = ref.module if existing is None else f"_tuner_workload_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    if name in sys.modules:
        return sys.modules[name]
    folder = str(path.parent)  # so the file can import its neighbours, as `python file.py` would
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def import_factory(ref: WorkloadRef) -> Any:
    """The callable a reference names. Import failures and missing names are WorkloadErrors naming the path."""
    try:
        if ref.file is not None:
            module = _import_file(ref)
        else:
            if ref.path_entry and os.path.isdir(ref.path_entry) and ref.path_entry not in sys.path:
                sys.path.append(ref.path_entry)
            module = importlib.import_module(ref.module)
    except WorkloadError:
        raise
    except SystemExit as err:  # a script's `sys.exit()` at import: without this, tuner exits 0 with no word
        raise WorkloadError(f"workload {ref.text}: {ref.file or ref.module} calls sys.exit() at import"
                            f"{_at(err)}; guard the script's own code with `if __name__ == \"__main__\":`") from None
    except Exception as err:
        raise WorkloadError(f"workload {ref.text}: cannot import {ref.file or ref.module}: {user_error_line(err)}; "
                            f"fix the module (tuner --debug shows the traceback)") from err
    obj: Any = module
    for part in ref.attr.split("."):
        if not hasattr(obj, part):
            raise WorkloadError(f"workload {ref.text}: {ref.file or ref.module} has no attribute {ref.attr!r}; "
                                f"name the function that returns tuner.Workload")
        obj = getattr(obj, part)
    if not callable(obj):
        raise WorkloadError(f"workload {ref.text}: {ref.attr} is a {type(obj).__name__}, not a function; name a "
                            f"function that returns tuner.Workload")
    return obj


PROBE_IMPORT_S = 120.0  # probe_import waits this long for the child's import at most


def probe_import(ref: WorkloadRef) -> None:
    """Import the user's module once in a forked child before this process imports it (the pre-flight), so a
    module that ends the process at import (os._exit(), a crash in native code) is one line naming it, exit 2:
    otherwise tuner vanished with the module's exit status and nothing on stderr (issue 37). What the child prints
    is dropped, and an exception in it is left for this process's own import to report. Skipped for a built-in, a
    module already imported, and where there is no fork."""
    if ref.builtin or not hasattr(os, "fork") or (ref.file is None and ref.module in sys.modules):
        return
    if ref.file is not None and any(getattr(m, "__file__", None) == ref.file for m in list(sys.modules.values())):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: import, and report nothing but how it ended
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            import_factory(ref)
        except BaseException:  # noqa: BLE001 - the parent's own import reports it, with the user's line
            pass
        os._exit(0)
    deadline = time.monotonic() + PROBE_IMPORT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:  # stuck (a lock a thread held at the fork): this process imports it anyway
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return
        time.sleep(0.02)
    if os.WIFSIGNALED(status):
        how = f"was killed by signal {os.WTERMSIG(status)} (a crash in native code?)"
    elif os.WEXITSTATUS(status) != 0:
        how = f"ended the process with exit status {os.WEXITSTATUS(status)} (os._exit() at import?)"
    else:
        return
    raise WorkloadError(f"workload {ref.text}: importing {ref.file or ref.module} {how}; guard the module's own code "
                        f"with `if __name__ == \"__main__\":`, or fix what ends it")


def _at(err: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if _is_user_frame(f.filename)]
    return f" (at {user_path(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def factory_arguments(ref: WorkloadRef, factory: Any, options: dict[str, Any], dataset: str | None) -> dict[str, Any]:
    """The keyword arguments the factory is called with: workload_options, plus `dataset` when one is set.
    Arguments the factory does not accept are a WorkloadError listing what it takes."""
    kwargs = dict(options)
    if dataset is not None:
        if "dataset" in kwargs:
            raise WorkloadError(f"workload {ref.text}: dataset given twice (as dataset and workload_options.dataset); "
                                f"keep one")
        kwargs["dataset"] = dataset
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable: let the call decide
        return kwargs
    try:
        sig.bind(**kwargs)
    except TypeError as err:
        takes = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        what = "--dataset / dataset:" if dataset is not None and "dataset" not in takes else "workload_options"
        raise WorkloadError(f"workload {ref.text}: {what} does not fit {ref.attr}(): {err} (it takes: "
                            f"{', '.join(takes) or 'no arguments'})") from None
    return kwargs


def build(ref: WorkloadRef, options: dict[str, Any] | None = None, dataset: str | None = None) -> Workload:
    """Call the factory. Its own exceptions propagate (a trial records them with the user's traceback); a
    result that is not a Workload is a WorkloadError."""
    factory = import_factory(ref)
    workload = factory(**factory_arguments(ref, factory, dict(options or {}), dataset))
    if not isinstance(workload, Workload):
        raise WorkloadError(f"workload {ref.text}: {ref.attr}() returned a {type(workload).__name__}, not a "
                            f"tuner.Workload; return tuner.Workload(models=..., datasets=..., loss=...)")
    return workload


SHIP_FOLDER_MAX_BYTES = 5 * 2**20  # a file workload's folder travels with it up to this size (its source, small data)
SHIP_EXCLUDES = (".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache",
                 ".pytest_cache", ".ruff_cache", ".tox", ".ipynb_checkpoints", "*.pyc")  # never shipped (runtime_env)


@dataclass(frozen=True)
class Shipment:
    """What Ray carries to other nodes for a workload (runtime_env py_modules), and a note for the user when a
    file's folder is too big to go with it."""

    paths: list[str]
    note: str | None = None


def _excluded(name: str) -> bool:
    return any(name.endswith(pattern[1:]) if pattern.startswith("*") else name == pattern for pattern in SHIP_EXCLUDES)


def importable_sources(folder: Path) -> list[Path]:
    """The .py files a module in `folder` can import beside it: the folder's own, and its packages' (subfolders
    with an __init__.py, recursively), less what is never shipped (SHIP_EXCLUDES); never a data folder's. What
    tells a workload's source apart (a parity verdict's cache key, tuner.parity)."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _excluded(d) and (Path(root) / d / "__init__.py").is_file())
        out.extend(Path(root) / f for f in files if f.endswith(".py") and not _excluded(f))
    return out


def _folder_fits(folder: Path, limit: int) -> bool:
    """Whether the folder's files (less SHIP_EXCLUDES) come to `limit` bytes at most; the walk stops past it, so a
    home folder costs no more than a small one."""
    total = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not _excluded(d)]
        for name in files:
            if _excluded(name):
                continue
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > limit:
                return False
    return True


def shipment(ref: WorkloadRef) -> Shipment:
    """What Ray must carry to other nodes for this workload: a file's folder (so the file finds the modules and
    data beside it by `__file__` there too) when it comes to SHIP_FOLDER_MAX_BYTES at most, else the file alone,
    with a note; a package's top-level folder when it is not installed (site-packages) there too. Built-ins travel
    with tuner."""
    if ref.builtin:
        return Shipment([])
    if ref.file is not None:
        folder = Path(ref.file).parent
        if _folder_fits(folder, SHIP_FOLDER_MAX_BYTES):
            return Shipment([str(folder)])
        mb = SHIP_FOLDER_MAX_BYTES // 2**20
        return Shipment([ref.file], f"{folder} is over {mb} MB, so only {Path(ref.file).name} is shipped to the "
                                    f"cluster's other nodes: what it reads beside itself must be there at the same "
                                    f"path (a shared file system) or installed")
    top = ref.module.split(".")[0]
    spec = importlib.util.find_spec(top)
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or origin in ("built-in", "frozen"):
        return Shipment([])
    origin_path = Path(origin).resolve()
    if str(origin_path).startswith(_LIB_DIRS):
        return Shipment([])  # installed: the cluster's nodes need it installed as well
    return Shipment([str(origin_path.parent if origin_path.name == "__init__.py" else origin_path)])


def ship_paths(ref: WorkloadRef) -> list[str]:
    """The paths of `shipment`."""
    return shipment(ref).paths


# --- the user's frames -------------------------------------------------------------------------------------------

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



def _is_user_frame(filename: str) -> bool:
    path = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return bool(path) and not path.startswith(_TUNER_DIR) and not path.startswith(_LIB_DIRS) \
        and not path.startswith("<")


def _library(filename: str) -> str:
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            i = parts.index(marker)
            return parts[i + 1] if i + 1 < len(parts) else marker
    return "tuner" if str(Path(filename).resolve()).startswith(_TUNER_DIR) else "the standard library"


def user_traceback(err: BaseException) -> str | None:
    """The traceback with the user's frames in full and tuner's / libraries' frames folded to one line each run.
    None when no frame of the user's code is in it (an error in tuner or a library alone)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not any(_is_user_frame(f.filename) for f in frames):
        return None
    lines = ["Traceback (most recent call last):"]
    folded: list[str] = []

    def flush() -> None:
        if folded:
            libs = sorted(set(folded))
            lines.append(f"  ... {len(folded)} frame{'s' if len(folded) > 1 else ''} in {', '.join(libs)}")
            folded.clear()

    for f in frames:
        if _is_user_frame(f.filename):
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

    frames = [f for f in traceback.extract_tb(err.__traceback__) if _is_user_frame(f.filename)]
    if isinstance(err, SyntaxError) and err.filename:
        return f"SyntaxError: {err.msg} (at {user_path(err.filename)}:{err.lineno})"
    where = f" (at {user_path(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return error_line(err)[: 500 - len(where)] + where
