"""Importing a workload's factory from its reference and calling it (`build`), where every trial process does: the
user's own file where it exists on this machine, Ray's shipped copy on another node (shipping.py). A module that
fails at import, ends the process or names no function is one WorkloadError naming its path (`probe_import` tries
the import in a forked child first)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from collections.abc import Callable
from typing import Any

from tuner.errors import WorkloadError
from tuner.workload.api import Workload
from tuner.workload.frames import is_user_frame, user_error_line, user_path
from tuner.workload.reference import WorkloadRef
from tuner.workload.shipping import shipped_copy


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


_OUTLIVED: set[str] = set()  # workload references whose import a fork of this process (or its parent) outlived


def outlived_import(ref: WorkloadRef) -> None:
    """Note that a forked import of `ref` returned or raised: probe_import need not fork to show it again."""
    _OUTLIVED.add(ref.text)


def probe_import(ref: WorkloadRef) -> None:
    """Import the user's module once in a forked child before this process imports it (the pre-flight), so a
    module that ends the process at import (os._exit(), with status 0 too; a crash in native code) is one line
    naming it, exit 2: otherwise tuner vanished with the module's status and nothing on stderr (issue 37). What
    the child prints is dropped, and an exception in it is left for this process's own import to report. Skipped
    for a built-in, a module already imported, and where there is no fork."""
    if ref.builtin or not hasattr(os, "fork") or (ref.file is None and ref.module in sys.modules):
        return
    if ref.text in _OUTLIVED:  # a fork's import returned or raised already (tuner.workload.preimport)
        return
    if ref.file is not None and any(getattr(m, "__file__", None) == ref.file for m in list(sys.modules.values())):
        return
    read, write = os.pipe()

    def imported() -> int:  # in the fork: say on the pipe that the process outlived the import (os._exit(0) can't)
        os.close(read)
        try:
            import_factory(ref)
        except BaseException:  # noqa: BLE001 - the parent's own import reports it, with the user's line
            pass
        os.write(write, b"1")
        return 0

    try:
        code = _in_fork(imported, PROBE_IMPORT_S)  # None: stuck (a lock a thread held at the fork); imported anyway
    finally:
        os.close(write)
    said = said_on(read, 1)
    if code is None or said:
        return
    how = (f"was killed by signal {-code} (a crash in native code?)" if code < 0 else
           f"ended the process with exit status {code} (os._exit() at import?)")
    raise WorkloadError(f"workload {ref.text}: importing {ref.file or ref.module} {how}; guard the module's own code "
                        f"with `if __name__ == \"__main__\":`, or fix what ends it")


def _in_fork(fn: Callable[[], int], seconds: float) -> int | None:
    """`fn()` in a throw-away fork of this process, its output dropped: the exit code it returns (1 where it
    raised), or None (and the fork killed) if it has not ended within `seconds`."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            code = fn()
        finally:
            os._exit(code)
    deadline = time.monotonic() + seconds
    while True:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            kill_process(pid)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def said_on(read: int, size: int) -> bytes:
    """What an ended fork wrote on the pipe `read` (b"" if nothing), without waiting for its end of file: a process
    the user's import forked may hold the pipe open for as long as it runs. Closes `read`."""
    try:
        os.set_blocking(read, False)
        return os.read(read, size)
    except BlockingIOError:
        return b""
    finally:
        os.close(read)


def kill_process(pid: int) -> None:
    """SIGKILL `pid`, if it still runs."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _at(err: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if is_user_frame(f.filename)]
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
    sig = _signature(factory)
    if sig is None:  # a builtin or C callable: let the call decide
        return kwargs
    try:
        sig.bind(**kwargs)
    except TypeError as err:
        takes = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        what = "--dataset / dataset:" if dataset is not None and "dataset" not in takes else "workload_options"
        raise WorkloadError(f"workload {ref.text}: {what} does not fit {ref.attr}(): {err} (it takes: "
                            f"{', '.join(takes) or 'no arguments'})") from None
    for name, value in list(kwargs.items()):
        param = sig.parameters.get(name)
        if param is not None and (text := _as_text(param, value)) is not None:
            kwargs[name] = value = text
        wrong = _mistyped(param, value) if param is not None else None
        if wrong is not None:
            raise WorkloadError(f"workload {ref.text}: option {name}={_shown(value)} is {wrong}, as {ref.attr}() "
                                f"declares {name}; give one{_example(param)}")  # type: ignore[arg-type]
    return kwargs


_NAMES = {bool: "bool (true or false)", int: "whole number", float: "number", str: "string"}


def _signature(factory: Any) -> inspect.Signature | None:
    """The factory's signature, its string annotations (`from __future__ import annotations`) resolved where they
    can be (else left as strings: the default's type decides, _declared); None for a callable without one."""
    try:
        plain = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable
        return None
    if not any(isinstance(p.annotation, str) for p in plain.parameters.values()):
        return plain
    try:
        return inspect.signature(factory, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate (a name the module does not define)
        return plain


def _declared(param: inspect.Parameter) -> tuple[type, bool] | None:
    """The one scalar type (bool, int, float, str) a factory's parameter declares, by its annotation or else its
    default's type, and whether None is allowed; None where it declares none of these (a list, a union, Any)."""
    import types
    import typing

    ann, none_ok = param.annotation, param.default is None
    if ann is inspect.Parameter.empty:
        kind = type(param.default)
        return (kind, none_ok) if kind in _NAMES else None
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        none_ok = none_ok or len(args) < len(typing.get_args(ann))
        ann = args[0] if len(args) == 1 else None
    return (ann, none_ok) if ann in _NAMES else None


def _as_text(param: inspect.Parameter, value: Any) -> str | None:
    """A number or bool that YAML read for a parameter declared `str`, as the text it was written as (`-o tag=2024`
    is the string '2024', as the factory declares; YAML's own reading would hand it an int): None where nothing is
    turned. YAML has read the text by then, so a form it normalizes (010, 1_000) arrives as its value's text."""
    declared = _declared(param)
    if declared is None or declared[0] is not str or value is None or not isinstance(value, (bool, int, float)):
        return None
    return _shown(value) if isinstance(value, bool) else repr(value) if isinstance(value, float) else str(value)


def _mistyped(param: inspect.Parameter, value: Any) -> str | None:
    """What is wrong with `value` for `param` (`a string, not a whole number`), or None where it fits or the
    parameter declares no scalar type. A `--option` value is read as YAML, so `image_size=abc` arrives as the string
    'abc': refused here in one line, not as the model's own TypeError deep in its first call (a new user's run on
    examples/resnet.py). A whole number fits a float; a string parameter's number or bool is its text (_as_text)."""
    declared = _declared(param)
    if declared is None or declared[0] is str:
        return None
    kind, none_ok = declared
    if value is None:
        return None if none_ok else f"empty, not a {_NAMES[kind]}"
    if isinstance(value, bool):
        fits = kind is bool
    else:
        fits = kind is not bool and isinstance(value, (int, float) if kind is float else int)
    if fits:
        return None
    got = {int: "a whole number", float: "a decimal number", str: "a string", bool: "a bool"}.get(type(value),
                                                                                         f"a {type(value).__name__}")
    return f"{got}, not a {_NAMES[kind]}"


def _example(param: inspect.Parameter) -> str:
    """`, e.g. image_size=32 (its default)`; empty without a default to show."""
    default = param.default
    if default is inspect.Parameter.empty or default is None:
        return ""
    return f", e.g. {param.name}={_shown(default)} (its default)"


def _shown(value: Any) -> str:
    """A value as an option is written: true, 32, 'abc'."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)


def build(ref: WorkloadRef, options: dict[str, Any] | None = None, dataset: str | None = None) -> Workload:
    """Call the factory. Its own exceptions propagate (a trial records them with the user's traceback); a
    result that is not a Workload is a WorkloadError."""
    factory = import_factory(ref)
    workload = factory(**factory_arguments(ref, factory, dict(options or {}), dataset))
    if not isinstance(workload, Workload):
        raise WorkloadError(f"workload {ref.text}: {ref.attr}() returned a {type(workload).__name__}, not a "
                            f"tuner.Workload; return tuner.Workload(models=..., datasets=..., loss=...)")
    return workload
