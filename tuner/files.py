"""Reading and writing the files tuner keeps: atomic writes, a folder lock, text checks, strict JSON.

One copy of each, used by the study folder, the dataset and FID caches, the export and the benchmarks:
- `atomic_write` goes through a temp file in the same folder and a rename, so a kill never leaves half a file
  and a reader never sees one;
- `locked(folder)` serializes builders of one cache entry across processes (trials of a study on one node);
- `read_text` refuses, with one line naming the file, what is not a readable, non-empty UTF-8 text file, or is
  larger than a limit (1 MiB for YAML), so a binary, truncated or huge file is a user error and never an internal
  one or minutes of parsing;
- `load_yaml_mapping` parses with a safe loader that refuses duplicate keys (silently, the last would win) and
  aliases that would expand past a limit (an alias bomb is refused while it is composed, never expanded);
- `json_safe` turns NaN/inf into null (strict JSON) and paths into strings;
- `check_writable` probes, before anything starts, a folder tuner will write into, and `storage_error` turns an
  OSError of the file system (full, read-only, a file in the way) into one line;
- `fast_exit` ends a process whose work is written without Python's teardown of its modules (~2 s once torch is
  imported), after the exit handlers and with the standard streams flushed; it tells thread pools to stop before
  it joins the threads, and waits for those at most THREADS_WAIT_S (end_threads).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from tuner.errors import ConfigError, StorageError, TunerError


def atomic_write(path: Path, data: str | bytes | Callable[[Path], None], *, parents: bool = True) -> Path:
    """Write `data` (text, bytes, or a function that writes a given temp path) to `path` atomically. `parents`:
    create the missing folders above it; without, a missing folder is a FileNotFoundError (a study folder deleted
    while tuner writes into it must not come back: tuner.study.folder)."""
    path = Path(path)
    if parents:
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


# What the file system says when it cannot take a write, whoever runs tuner: the user's to fix, not a bug.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                            errno.EISDIR, errno.EEXIST, errno.EFBIG, errno.ENAMETOOLONG})
PROBE_BYTES = 4096  # one block: a full disk refuses it


def storage_error(err: OSError) -> StorageError | None:
    """One line for an OSError that the file system raised (full, read-only, a file in the way), naming the path;
    None for any other OSError."""
    if err.errno not in STORAGE_ERRNOS:
        return None
    where = f"{err.filename}: " if err.filename else ""
    fix = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space", errno.EROFS: "pass a writable folder",
           errno.ENOTDIR: "a file is where a folder should be; move it or pass another folder"}
    return StorageError(f"{where}cannot write: {err.strerror or err}; {fix.get(err.errno or 0, 'check the folder')}")


def check_writable(folder: Path, what: str) -> None:
    """Refuse, before anything starts, a folder tuner will write into but cannot: a file in the way, a read-only
    folder or file system, a full disk. The folder (or the nearest one above it that exists: nothing is created)
    gets a one-block probe file, removed at once, so nothing is left behind."""
    folder = Path(os.path.abspath(folder))
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise StorageError(f"{what} {folder}: {existing} is a file, not a folder; move it or pass another folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tuner-probe.", dir=existing)
        try:
            os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError as err:
        fix = "free some space" if err.errno in (errno.ENOSPC, errno.EDQUOT) else "pass a folder you can write to"
        raise StorageError(f"{what} {folder}: cannot write in {existing}: {err.strerror or err}; {fix}") from None


@contextlib.contextmanager
def locked(folder: Path, *, create: bool = True) -> Iterator[None]:
    """An exclusive lock on `folder` (a `.lock` file in it) for the duration; atomic renames alone keep
    readers safe, the lock keeps concurrent builders from doing the same work twice. `create`: make the folder
    if it is missing; without, a missing folder is a FileNotFoundError."""
    folder = Path(folder)
    if create:
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


MAX_YAML_BYTES = 1 << 20  # configs and spaces are a few KiB; PyYAML takes seconds per MiB and far more memory
MAX_JSON_BYTES = 64 << 20  # study.json, result.json: what tuner wrote, but a file can be replaced by anything
# Nodes a YAML document may hold with every alias expanded. A 1 MiB file has at most ~500k nodes of its own; an
# alias bomb (nine aliases of nine aliases ...) reaches billions from a few hundred bytes.
MAX_YAML_NODES = 1_000_000


def _size_text(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


def read_text(path: Path, what: str = "file", error: type[TunerError] = ConfigError,
              max_bytes: int = MAX_JSON_BYTES) -> str:
    """The file's text; `error` (one line naming the file and the fix) when it is missing, a folder or not a
    regular file, unreadable, larger than `max_bytes`, not UTF-8 text, or empty (a UTF-8 byte-order mark is
    dropped)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: no such file (the {what} to read)")
    if path.is_dir():
        raise error(f"{path}: is a folder, not a {what}")
    if not path.is_file():  # a FIFO or a device: reading it could block or never end
        raise error(f"{path}: not a regular file; give the {what} as a UTF-8 text file")
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)  # never more than the limit, whatever stat said
    except OSError as err:
        raise error(f"{path}: cannot read the {what}: {err.strerror or err}") from None
    if len(raw) > max_bytes:
        raise error(f"{path}: the {what} is larger than tuner reads ({_size_text(max_bytes)} at most); is it the "
                    f"right file?")
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

    text = read_text(path, what, error, MAX_YAML_BYTES)
    try:
        data = safe_yaml(text)
    except _DuplicateKey as err:
        raise error(f"{path}: duplicate key {err.key!r} at line {err.line} (the {what} gives it twice); keep "
                    f"one") from None
    except _TooLarge as err:
        raise error(f"{path}: {err}; write the {what} out without those aliases") from None
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


class YamlRefused(Exception):
    """YAML that parses but that tuner will not take (see safe_yaml)."""


class _DuplicateKey(YamlRefused):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(f"duplicate key {key!r} at line {line}")
        self.key, self.line = key, line


class _TooLarge(YamlRefused):
    """A document whose aliases would expand past MAX_YAML_NODES, or an alias inside its own anchor."""


_FLOAT_1_2 = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


def safe_yaml(text: str) -> Any:
    """yaml.safe_load, with a loader that refuses duplicate keys and counts every node as it would be expanded
    (YamlRefused); every YAML tuner reads goes through it."""
    loader = _yaml_loader()(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@functools.cache
def _yaml_loader() -> type:
    """safe_yaml's loader class, built once (yaml imported only when a YAML file is first read)."""
    import yaml
    from yaml.nodes import MappingNode, SequenceNode

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.expanded: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded

        def compose_node(self, parent: Any, index: Any) -> Any:
            alias = self.check_event(yaml.AliasEvent)
            node = super().compose_node(parent, index)
            size = self.expanded.get(id(node))
            if size is None:
                if alias:  # the anchor is still being composed: the alias is inside it (a cycle)
                    raise _TooLarge(f"line {node.start_mark.line + 1}: an alias inside the value it names (a cycle)")
                children = [n for pair in node.value for n in pair] if isinstance(node, MappingNode) else \
                    node.value if isinstance(node, SequenceNode) else []
                size = 1 + sum(self.expanded.get(id(c), 1) for c in children)
                if size > MAX_YAML_NODES:
                    raise _TooLarge(f"line {node.start_mark.line + 1}: its aliases expand to over "
                                    f"{MAX_YAML_NODES:,} values")
                self.expanded[id(node)] = size
            return node

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` overrides on purpose
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        if key in seen:
                            raise _DuplicateKey(key, key_node.start_mark.line + 1)
                        seen.add(key)
                    except TypeError:  # an unhashable key: the base constructor says so
                        pass
            return super().construct_mapping(node, deep=deep)

    # YAML 1.1 (PyYAML) reads `1e-6` and `3e-4` as strings, where a float needs a dot: `-o lr=1e-6` reached a
    # user's factory as '1e-6'. YAML 1.2's float form, as ruamel and the JSON schema read it.
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+0123456789"))
    return Loader


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


THREADS_WAIT_S = 30.0  # how long an exit waits for the threads still running once the thread pools are told to stop


def fast_exit(code: int, last: Callable[[], object] | None = None) -> NoReturn:
    """End this process with `code` the way Python would, minus its teardown of every module's objects: in a
    process that imported torch and torchvision that teardown took ~2 s on a 2-core host (a confirmation re-run's
    child, `tuner search`'s driver at its end) and frees nothing that outlives the process. What an exit must
    still do is done, in Python's order: the thread pools are told to stop and the non-daemon threads joined
    (end_threads), the exit handlers run (atexit: logging's flush, weakref finalizers, Ray's and torch's own), and
    stdout and stderr are flushed. `last` is called then, before the kernel's own teardown of the process."""
    import atexit
    import sys

    end_threads(THREADS_WAIT_S)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing more to say
            stream.flush()
    if last is not None:
        with contextlib.suppress(Exception):
            last()
    os._exit(code)


def end_threads(wait_s: float) -> bool:
    """What Python's exit does before its exit handlers (threading._shutdown), within `wait_s`: threading's own exit
    callbacks first (threading._register_atexit: concurrent.futures' tells each ThreadPoolExecutor's idle workers to
    stop; torch.compile's inductor and many libraries keep such a pool), then a join of every non-daemon thread.
    Joined before those callbacks, a live pool's workers never end (issue 57: `tuner train` of a compiled config
    waited 256 s after printing its result). A thread still running at `wait_s` (a user's thread that never ends,
    a pool's task that does not return) is named on stderr and left: no command waits forever on a thread it does
    not own. Returns whether every thread ended."""
    import sys
    import threading

    def shutdown() -> None:
        threading._SHUTTING_DOWN = True  # type: ignore[attr-defined]  # no pool takes new work, as at Python's exit
        for call in reversed(list(getattr(threading, "_threading_atexits", []))):
            with contextlib.suppress(Exception):  # one failing callback does not keep the others from running
                call()
        while True:  # a thread may start another while it ends: join until none is left
            left = [t for t in threading.enumerate()
                    if t is not threading.main_thread() and t is not threading.current_thread() and not t.daemon]
            if not left:
                return
            for thread in left:
                thread.join()

    ender = threading.Thread(target=shutdown, name="tuner-exit", daemon=True)
    ender.start()
    ender.join(wait_s)
    if not ender.is_alive():
        return True
    names = ", ".join(repr(t.name) for t in threading.enumerate()
                      if t is not threading.main_thread() and t is not ender and not t.daemon and t.is_alive())
    with contextlib.suppress(Exception):
        print(f"tuner: not waiting for thread(s) {names or '(a thread pool)'} still running {wait_s:g} s after the "
              f"work ended", file=sys.stderr, flush=True)
    return False
