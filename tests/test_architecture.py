"""The package's shape, read from its source (ARCHITECTURE.md says why): no import circle (edges into a package's
face, its __init__, count), no import from a lower package to a higher one (imports written as strings included),
imports across packages through the package's public names, and no module over MAX_LINES lines without a one-line
reason in its docstring that states its real size. Each check is a function of a source tree, so the tests below
also plant each gap in a temporary tree and show the check finds it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tuner"
MAX_LINES = 400
SIZE_TOLERANCE = 0.15  # a size reason's N may be this far (a fraction of the real count) from the real count
# Low to high, as ARCHITECTURE.md lists them: a module may import its own package and the ones before it. The root
# module `tuner` (the public face: the Workload contract and __version__) stands with `workload`.
LAYERS = ["errors", "files", "knobs", "device", "config", "workload", "study", "target", "data", "models", "measure",
          "builtin", "train", "analysis", "space", "schedule", "parity", "search", "report", "cli"]
# Imports across packages that reach past the package's public names, each with why it cannot go through them.
# (module imported, the module that imports it) -> why. Keep it short: fixing the import is the usual answer.
ALLOWED_INTERNAL: dict[tuple[str, str], str] = {}
# Benchmarks that reach a private tuner module, (benchmark, module) -> why. A benchmark that simulates an internal
# policy judges the shipped functions themselves; exporting them would widen the public API for a benchmark's sake.
BENCH_INTERNAL: dict[tuple[str, str], str] = {
    ("benchmarks/stability_sim.py", "tuner.search._confirm"):
        "simulates the confirmation RerunSearcher runs (which trials to re-run), judged through its own functions",
}
# A string naming a tuner module (`importlib.import_module("tuner.x.y")`, a `tuner.x.y:make` reference).
STRING_REF = re.compile(r"tuner(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_][\w.]*)?")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted((root / "tuner").rglob("*.py"))}


def _known(mod: str, known: dict[str, Path] | set[str]) -> str:
    """The longest prefix of dotted `mod` that is a module of the tree (`tuner.x.y.attr` -> `tuner.x.y`)."""
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return mod


def string_refs(tree: ast.AST) -> set[str]:
    """The tuner modules named in string constants: a whole string that is a module path or a `module:attr`
    reference, and an f-string that starts with one (`f"tuner.data.{kind}"` names a module of tuner.data, written
    `tuner.data.*`)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and STRING_REF.fullmatch(node.value):
            found.add(node.value.split(":")[0])
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            head = str(node.values[0].value)
            m = re.match(r"(tuner(?:\.[A-Za-z_]\w*)*)\.?", head)
            if m and head.startswith("tuner.") and len(node.values) > 1:
                found.add(m.group(1) + ".*")
    for node in ast.walk(tree):  # a docstring is prose, never an import
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found.discard(doc)
    return found


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The tuner modules `path` imports anywhere (top level, functions, TYPE_CHECKING blocks, and strings that name
    a module): `from pkg import x` counts as importing pkg.x when that is a module, else pkg."""
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tuner")
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node, name, is_pkg)
            if mod.split(".")[0] != "tuner":
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                found.add(sub if sub in known else mod)
    for ref in string_refs(tree):
        if ref.endswith(".*"):  # some module of that package: one of its own package's is no edge to its face
            ref = ref[:-2]
            if (name + ".").startswith(ref + ".") or (path.name != "__init__.py" and name.rsplit(".", 1)[0] == ref):
                continue
        found.add(_known(ref, known))
    return {m for m in found if m != name}


def _absolute(node: ast.ImportFrom, name: str, is_pkg: bool) -> str:
    if node.level:  # relative: resolve against this module's package
        base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports_of(path, name, known) for name, path in known.items()}


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return LAYERS.index("workload")
    if parts[1] == "__main__":
        return LAYERS.index("cli")
    return LAYERS.index(parts[1])


def upward(g: dict[str, set[str]]) -> list[str]:
    return [f"{src} imports {dst}" for src, dsts in g.items() for dst in sorted(dsts) if layer(dst) > layer(src)]


def test_every_package_has_a_place_in_the_order():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem not in
                                                                    ("__init__", "__main__"))}
    assert tops <= set(LAYERS), f"add {sorted(tops - set(LAYERS))} to LAYERS and to ARCHITECTURE.md"
    text = (ROOT / "ARCHITECTURE.md").read_text()
    order = [m.group(1) for m in re.finditer(r"^\d+\. `(\w+)`", text, re.M)]
    assert order == LAYERS, "ARCHITECTURE.md's numbered order and LAYERS differ"


def test_no_import_runs_up_the_order():
    found = upward(graph())
    assert not found, "imports from a lower package to a higher one (see ARCHITECTURE.md):\n" + "\n".join(found)


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `g` (Tarjan's strongly connected components of more than one module). An edge into a
    package's __init__ is an edge like any other: a module that imports its own package's face while that face
    imports it is a circle (it works only while the partly initialised package happens to hold the name)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_circle_check_finds_a_planted_circle():
    planted = {"tuner.search": {"tuner.search.a"}, "tuner.search.a": {"tuner.search.b"},
               "tuner.search.b": {"tuner.search.a", "tuner.search"}}
    assert len(circles(planted)) == 1 and {"tuner.search.a", "tuner.search.b"} <= set(circles(planted)[0])


def test_the_circle_check_counts_edges_into_a_package_face():
    """Gap (a): a circle that closes through a package's __init__ (its face) is a circle."""
    assert circles({"tuner.search": {"tuner.search.a"}, "tuner.search.a": {"tuner.search"}}) == [
        ["tuner.search", "tuner.search.a"]]
    through_faces = {"tuner.study": {"tuner.study.folder"}, "tuner.study.folder": {"tuner.analysis"},
                     "tuner.analysis": {"tuner.analysis.stats"}, "tuner.analysis.stats": {"tuner.study"}}
    assert circles(through_faces) == [sorted(through_faces)]


def size_reason(path: Path) -> str | None:
    """Why `path` fails the size rule, or None: over MAX_LINES lines, its docstring must say why in one line
    ("Over N lines because ..." or "Why one module of ~N lines ...") with N its real size, within SIZE_TOLERANCE."""
    text = path.read_text()
    lines = len(text.splitlines())
    if lines <= MAX_LINES:
        return None
    doc = ast.get_docstring(ast.parse(text)) or ""
    m = re.search(r"^(?:Why|Over)\b[^\n]*?~?(\d[\d,]*) lines", doc, re.M | re.I)
    if m is None:
        return (f"has {lines} lines (over {MAX_LINES}): split it, or say why in one line of its docstring starting "
                f"'Why one module of ~N lines' or 'Over N lines because'")
    stated = int(m.group(1).replace(",", ""))
    if abs(stated - lines) > SIZE_TOLERANCE * lines:
        return (f"says {stated} lines in its docstring's reason but has {lines}: state its real size (within "
                f"{SIZE_TOLERANCE:.0%}), or split it")
    return None


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_long_module_says_why_in_its_docstring(path):
    why = size_reason(path)
    assert why is None, f"{path.relative_to(ROOT)} {why}"


def test_the_size_check_reads_the_stated_size(tmp_path):
    """Gap (c): a reason that states a size the module is far past fails; one that states the real size passes."""
    body = "\n".join(f"x{i} = {i}" for i in range(620))
    stale = tmp_path / "stale.py"
    stale.write_text('"""A module.\n\nOver 350 lines because it is one table.\n"""\n' + body + "\n")
    assert "says 350 lines" in (size_reason(stale) or "")
    honest = tmp_path / "honest.py"
    honest.write_text('"""A module.\n\nOver 600 lines because it is one table.\n"""\n' + body + "\n")
    assert size_reason(honest) is None
    silent = tmp_path / "silent.py"
    silent.write_text('"""A module."""\n' + body + "\n")
    assert "split it, or say why" in (size_reason(silent) or "")


def public_names(init: Path) -> set[str]:
    """The names a package's __init__ lists in __all__."""
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}  # type: ignore[attr-defined]
    return set()


def past_the_face(root: Path = ROOT) -> list[str]:
    """Imports across packages (written as import statements) that do not go through the imported package's public
    names: `from tuner.P.mod import x` from outside P is one unless P lists `mod` in its __all__ (a package that
    publishes its modules: measure, report), and `from tuner.P import x` is one unless x is in P's __all__."""
    pkg_dir = root / "tuner"
    faces = {p.parent.name: public_names(p) for p in pkg_dir.glob("*/__init__.py")}
    found = []
    for name, path in modules(root).items():
        parts = name.split(".")
        own = parts[1] if len(parts) > 1 and (path.name == "__init__.py" or len(parts) > 2) else None
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                targets = [(_absolute(node, name, is_pkg), [a.name for a in node.names])]
            elif isinstance(node, ast.Import):
                targets = [(a.name, []) for a in node.names]
            else:
                continue
            for mod, names in targets:
                mp = mod.split(".")
                if mp[0] != "tuner" or len(mp) < 2 or mp[1] not in faces or mp[1] == own:
                    continue
                face = faces[mp[1]]
                if len(mp) > 2:
                    bad = [] if mp[2] in face else [mod]
                else:
                    bad = [f"{mod}.{n}" for n in names if n not in face]
                if (mod, name) in ALLOWED_INTERNAL:
                    continue
                found += [f"{name}:{node.lineno} imports {b}, past tuner.{mp[1]}'s public names" for b in bad]
    return found


def test_imports_across_packages_go_through_public_names():
    found = past_the_face()
    assert not found, ("import the package's public names (`from tuner.study import X`; add X to its __all__), "
                       "or say in ALLOWED_INTERNAL why it cannot:\n" + "\n".join(found))


def test_every_allowed_internal_import_is_still_there():
    """The allow-list names only imports that exist (a fixed one leaves it)."""
    imports = {(f"{mod}", src) for src, mods in graph().items() for mod in mods}
    stale = [f"{mod} from {src}" for mod, src in ALLOWED_INTERNAL if (mod, src) not in imports]
    assert not stale, f"ALLOWED_INTERNAL entries no module needs: {stale}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_order_check_reads_imports_written_as_strings(tmp_path):
    """Gap (b): a module that names a higher layer's module in a string (a `module:attr` reference, an
    importlib.import_module argument, an f-string's head) runs up the order like an import statement."""
    root = _tree(tmp_path, {
        "tuner/__init__.py": "",
        "tuner/workload/__init__.py": "__all__ = []\n",
        "tuner/workload/loader.py": 'BUILTINS = {"gan": "tuner.builtin.gan:make"}\n',
        "tuner/workload/dyn.py": 'import importlib\n\ndef f():\n    return importlib.import_module("tuner.train.x")\n',
        "tuner/workload/fmt.py": 'def f(k):\n    return f"tuner.search.{k}"\n',
        "tuner/workload/prose.py": '"""Names tuner.builtin.gan in prose."""\n',
        "tuner/builtin/__init__.py": "__all__ = []\n",
        "tuner/builtin/gan.py": "def make():\n    pass\n",
        "tuner/train/__init__.py": "__all__ = []\n",
        "tuner/train/x.py": "",
        "tuner/search/__init__.py": "__all__ = []\n",
    })
    assert upward(graph(root)) == ["tuner.workload.dyn imports tuner.train.x",
                                   "tuner.workload.fmt imports tuner.search",
                                   "tuner.workload.loader imports tuner.builtin.gan"]


def test_the_public_names_check_finds_an_import_past_a_face(tmp_path):
    """Gap (d): from outside a package, its modules and its names not in __all__ are internal."""
    root = _tree(tmp_path, {
        "tuner/__init__.py": "",
        "tuner/study/__init__.py": 'from tuner.study.folder import StudyFolder\n\n__all__ = ["StudyFolder"]\n',
        "tuner/study/folder.py": "class StudyFolder:\n    pass\n\n\nSECRET = 1\n",
        "tuner/measure/__init__.py": '__all__ = ["timing"]\n',
        "tuner/measure/timing.py": "def summarize():\n    pass\n",
        "tuner/search/__init__.py": "__all__ = []\n",
        "tuner/search/a.py": ("from tuner.study import StudyFolder\nfrom tuner.study.folder import StudyFolder as F\n"
                              "from tuner.study import SECRET\nfrom tuner.measure.timing import summarize\n"),
        "tuner/study/lock.py": "from tuner.study.folder import SECRET\n",  # its own package: fine
    })
    assert past_the_face(root) == ["tuner.search.a:2 imports tuner.study.folder, past tuner.study's public names",
                                   "tuner.search.a:3 imports tuner.study.SECRET, past tuner.study's public names"]


def _benchmark_imports():
    """(path, node) for every import statement in benchmarks/."""
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield path, node


def test_benchmarks_import_only_public_names():
    """benchmarks/ use what tuner offers (no `_private` module or name), so they measure the library as shipped."""
    bad = []
    for path, node in _benchmark_imports():
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tuner"):
            names = [a.name for a in node.names]
            private = any(part.startswith("_") for part in node.module.split(".")) or any(
                n.startswith("_") for n in names)
            if private and (str(path.relative_to(ROOT)), node.module) not in BENCH_INTERNAL:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} import {a.name}" for a in node.names
                    if a.name.startswith("tuner") and any(p.startswith("_") for p in a.name.split("."))]
    assert not bad, "benchmarks import private tuner modules or names:\n" + "\n".join(bad)


def test_every_package_names_its_public_face():
    missing = [str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("__init__.py"))
               if "__all__" not in {t.id for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Assign)
                                    for t in n.targets if isinstance(t, ast.Name)}]
    assert not missing, f"packages without __all__: {missing}"


RECORD_FILES = ("result.json",)  # a trial's record: only tuner/study spells it (StudyFolder reads and writes it)


def record_file_names(root: Path = ROOT) -> list[str]:
    """`module:line` for each string constant outside tuner/study that names a record file."""
    found = []
    for name, path in modules(root).items():
        if name == "tuner.study" or name.startswith("tuner.study."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in RECORD_FILES:
                found.append(f"{name}:{node.lineno}")
    return found


def test_only_the_study_names_the_record_files(tmp_path):
    """The record is read and written through tuner/study (issue 53 item 4): a scheduler that read result.json by
    its name would break on the next layout change. A planted one is found."""
    assert record_file_names() == []
    root = _tree(tmp_path, {"tuner/schedule/x.py": 'path = "result.json"\n',
                            "tuner/study/folder.py": 'RESULT_FILE = "result.json"\n'})
    assert record_file_names(root) == ["tuner.schedule.x:1"]


FOLDER_WRITES = ("write_result", "write_csv", "write_csv_row")  # StudyFolder's own writes, behind tuner.study's writer
WRITES = ("atomic_write", "dump_json", "write_text", "write_bytes", "open")  # how a module writes a file


def record_writes(root: Path = ROOT) -> list[str]:
    """`module:line` for each write of the record outside tuner/study: a call of StudyFolder's own writes (the
    record goes through tuner.study.writer, which puts trials.csv's row beside result.json), and any file write or
    `write_` function in tuner.analysis (the judge only reads and derives)."""
    found = []
    for name, path in modules(root).items():
        if name == "tuner.study" or name.startswith("tuner.study."):
            continue
        judge = name == "tuner.analysis" or name.startswith("tuner.analysis.")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else \
                    node.func.id if isinstance(node.func, ast.Name) else ""
                if called in FOLDER_WRITES or (judge and called in WRITES):
                    found.append(f"{name}:{node.lineno}")
            elif judge and isinstance(node, ast.FunctionDef) and node.name.startswith("write_"):
                found.append(f"{name}:{node.lineno}")
    return found


def test_the_record_is_written_through_the_study_alone(tmp_path):
    """tuner/study writes the record (issue 53 item 4): the searcher keeps a trial through tuner.study's writer,
    which takes trials.csv's derived columns from the judge, and tuner.analysis writes nothing. A search module
    writing result.json past the writer, and a writer back in the judge, are found."""
    assert record_writes() == []
    root = _tree(tmp_path, {"tuner/search/_storage.py": "def keep(folder, rec):\n    folder.write_result(rec)\n",
                            "tuner/analysis/trials.py": "def write_record(folder, rec):\n    pass\n",
                            "tuner/study/writer.py": "def write_record(folder, rec):\n    folder.write_result(rec)\n"})
    assert record_writes(root) == ["tuner.analysis.trials:1", "tuner.search._storage:2"]


PRODUCERS = ("measure", "train")  # what makes a trial's figures; the judge (tuner.analysis) reads them
JUDGE = "analysis"


def producer_imports_of_judge(g: dict[str, set[str]]) -> list[str]:
    """Each import (a function's own and one written as a string included: `graph` reads them) from a producer
    package into tuner.analysis. The order already puts analysis above them; this names the rule itself, so a
    reordering that put the judge back below would not let a producer reach it again."""
    return [f"{src} imports {dst}" for src, dsts in g.items() for dst in sorted(dsts)
            if src.split(".")[1:2] and src.split(".")[1] in PRODUCERS
            and dst.split(".")[1:2] == [JUDGE]]


def test_producers_never_import_the_judge(tmp_path):
    """The producers (tuner.measure, tuner.train) know nothing of tuner.analysis (issue 53 item 4): what they share
    with it (the ceiling cache's keys, the readings a trial stores) lives below both. A planted import, at the top
    or inside a function, is found."""
    found = producer_imports_of_judge(graph())
    assert not found, "a producer imports the judge (see ARCHITECTURE.md):\n" + "\n".join(found)
    root = _tree(tmp_path, {
        "tuner/__init__.py": "",
        "tuner/analysis/__init__.py": "__all__ = []\n",
        "tuner/analysis/headroom.py": "def assess():\n    pass\n",
        "tuner/measure/__init__.py": "__all__ = []\n",
        "tuner/measure/ceiling.py": "from tuner.analysis import headroom\n",
        "tuner/train/__init__.py": "__all__ = []\n",
        "tuner/train/trial.py": "def verdict():\n    from tuner.analysis.headroom import assess\n    return assess()\n",
        "tuner/train/ok.py": "from tuner.measure import ceiling\n",
    })
    assert producer_imports_of_judge(graph(root)) == ["tuner.measure.ceiling imports tuner.analysis.headroom",
                                                      "tuner.train.trial imports tuner.analysis.headroom"]


def scheduler_option_uses(options: list[tuple[str, str]], root: Path = ROOT) -> list[str]:
    """`module:line` for each place outside tuner/schedule that names a scheduler's option (`options`: its key and
    flag, as `Scheduler.options` declares them): its flag or key as a string, its key as a keyword or an
    attribute. The CLI's flags, SearchOptions and the plan read them from the registry (issue 53 item 2), so a
    scheduler with an option is its own file and its registry line; an option named by hand elsewhere is a second
    place to change."""
    keys, flags = {key for key, _ in options}, {flag for _, flag in options}
    found = []
    for name, path in modules(root).items():
        if name == "tuner.schedule" or name.startswith("tuner.schedule."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            named = (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys | flags) \
                or (isinstance(node, ast.keyword) and node.arg in keys) \
                or (isinstance(node, ast.Attribute) and node.attr in keys)
            if named:
                found.append(f"{name}:{node.lineno}")
    return sorted(set(found))


def test_a_schedulers_options_are_named_in_its_own_module_alone(tmp_path):
    """Each registered scheduler's options (asha's --min-budget and --eta, the race's --race-margin) are named
    nowhere outside tuner/schedule: tests/schedule/test_registry.py plants a scheduler with an option of its own,
    registered in the test, and it reaches the flags, the plan and study.json with no other file changed. A flag
    written into the CLI by hand, and an option read off the options by name, are found."""
    from tuner.schedule import scheduler_options

    assert scheduler_option_uses([(o.key, o.flag) for o in scheduler_options()]) == []
    root = _tree(tmp_path, {"tuner/cli/search.py": 'margin = typer.Option(None, "--race-margin")\n',
                            "tuner/search/_plan.py": "def plan(opts):\n    return opts.margin\n",
                            "tuner/schedule/race.py": 'FLAG = "--race-margin"\n'})
    assert scheduler_option_uses([("margin", "--race-margin")], root) == ["tuner.cli.search:1",
                                                                          "tuner.search._plan:2"]


def test_every_allowed_benchmark_import_is_still_made():
    """An allowance outlives its reason silently: each BENCH_INTERNAL entry must name an import the benchmark makes."""
    made = {(str(path.relative_to(ROOT)), node.module) for path, node in _benchmark_imports()
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tuner")}
    assert set(BENCH_INTERNAL) <= made, f"allowed but not imported: {sorted(set(BENCH_INTERNAL) - made)}"
