"""Reading and writing the files tuner keeps: atomic writes, a folder lock, text checks, strict JSON.

One copy of each, used by the study folder, the dataset and FID caches, the export and the benchmarks:
- `atomic_write` goes through a temp file in the same folder and a rename, so a kill never leaves half a file
  and a reader never sees one;
- `locked(folder)` serializes builders of one cache entry across processes (trials of a study on one node);
- `read_text` refuses, with one line naming the file, what is not a readable, non-empty UTF-8 text file, so a
  binary or truncated file is a user error and never an internal one;
- `json_safe` turns NaN/inf into null (strict JSON) and paths into strings.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError, TunerError


def atomic_write(path: Path, data: str | bytes | Callable[[Path], None]) -> Path:
    """Write `data` (text, bytes, or a function that writes a given temp path) to `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        elif isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            data(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; tuner's files are as readable as the rest of the user's
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` (a `.lock` file in it) for the duration; atomic renames alone keep
    readers safe, the lock keeps concurrent builders from doing the same work twice."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): atomic writes still keep every file whole
        yield
        return
    with open(folder / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_text(path: Path, what: str = "file", error: type[TunerError] = ConfigError) -> str:
    """The file's text; `error` (one line naming the file and the fix) when it is missing, a folder or not a
    regular file, unreadable, not UTF-8 text, or empty (a UTF-8 byte-order mark is dropped)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: no such file (the {what} to read)")
    if path.is_dir():
        raise error(f"{path}: is a folder, not a {what}")
    if not path.is_file():  # a FIFO or a device: reading it could block or never end
        raise error(f"{path}: not a regular file; give the {what} as a UTF-8 text file")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise error(f"{path}: cannot read the {what}: {err.strerror or err}") from None
    if b"\x00" in raw[:8192]:
        raise error(f"{path}: not a text file (binary content); give the {what} as UTF-8 text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text (byte {err.start}); save the {what} as UTF-8") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise error(f"{path}: the {what} is empty")
    return text


def load_yaml_mapping(path: Path, what: str = "file", error: type[TunerError] = ConfigError) -> dict[str, Any]:
    """A YAML file that must hold a mapping (configs, spaces, exported configs)."""
    import yaml

    text = read_text(path, what, error)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(err, "problem", None) or err).strip().splitlines()[0]
        raise error(f"{path}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise error(f"{path}: not valid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        kind = _kind(data)
        raise error(f"{path}: expected a YAML mapping (key: value lines) but found {kind}")
    return data


def load_json(path: Path, what: str = "file", error: type[TunerError] = ConfigError) -> Any:
    text = read_text(path, what, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{path}: not valid JSON at line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise error(f"{path}: not valid JSON: nested too deeply") from None


def load_json_object(path: Path, what: str = "file", error: type[TunerError] = ConfigError) -> dict[str, Any]:
    """A JSON file that must hold an object (study.json, a trial's result.json)."""
    data = load_json(path, what, error)
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object ({{...}}) but found {_kind(data)}")
    return data


def _kind(data: Any) -> str:
    if data is None:
        return "nothing"
    names = {list: "a list", str: "a single string", bool: "a true/false value", int: "a number", float: "a number"}
    return names.get(type(data), f"a {type(data).__name__}")


def json_safe(value: Any) -> Any:
    """Strict-JSON data: NaN and inf become None, paths and other objects their str()."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def dump_json(value: Any, indent: int | None = 2) -> str:
    return json.dumps(json_safe(value), indent=indent, allow_nan=False)
