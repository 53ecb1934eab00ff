"""The package's shape, read from its source (ARCHITECTURE.md says why): no import circle, no import from a lower
package to a higher one, and no module over MAX_LINES lines without a one-line reason in its docstring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tuner"
MAX_LINES = 400
# Low to high, as ARCHITECTURE.md lists them: a module may import its own package and the ones before it. The root
# module `tuner` (the public face: the Workload contract and __version__) stands with `workload`.
LAYERS = ["errors", "files", "knobs", "device", "config", "workload", "study", "analysis", "data", "models",
          "measure", "builtin", "train", "space", "schedule", "search", "report", "cli"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The tuner modules `path` imports anywhere (top level, functions, TYPE_CHECKING blocks): `from pkg import x`
    counts as importing pkg.x when that is a module, else pkg."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tuner")
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "tuner":
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                found.add(sub if sub in known else mod)
    return {m for m in found if m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, name, known) for name, path in known.items()}


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return LAYERS.index("workload")
    if parts[1] == "__main__":
        return LAYERS.index("cli")
    return LAYERS.index(parts[1])


def test_every_package_has_a_place_in_the_order():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem not in
                                                                    ("__init__", "__main__"))}
    assert tops <= set(LAYERS), f"add {sorted(tops - set(LAYERS))} to LAYERS and to ARCHITECTURE.md"
    text = (ROOT / "ARCHITECTURE.md").read_text()
    order = [m.group(1) for m in re.finditer(r"^\d+\. `(\w+)`", text, re.M)]
    assert order == LAYERS, "ARCHITECTURE.md's numbered order and LAYERS differ"


def test_no_import_runs_up_the_order():
    upward = [f"{src} imports {dst}" for src, dsts in graph().items() for dst in sorted(dsts)
              if layer(dst) > layer(src)]
    assert not upward, "imports from a lower package to a higher one (see ARCHITECTURE.md):\n" + "\n".join(upward)


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `g` (Tarjan's strongly connected components of more than one module). A package's
    __init__ importing its own modules while one of them imports the package is not one: the package is one unit
    there; any circle that stays once edges into __init__ modules are left out is."""
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
    return [c for c in found if _beyond_init(c, g)]


def test_no_import_circle():
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_circle_check_finds_a_planted_circle():
    planted = {"tuner.search": {"tuner.search.a"}, "tuner.search.a": {"tuner.search.b"},
               "tuner.search.b": {"tuner.search.a", "tuner.search"}}
    assert len(circles(planted)) == 1 and {"tuner.search.a", "tuner.search.b"} <= set(circles(planted)[0])
    assert circles({"tuner.search": {"tuner.search.a"}, "tuner.search.a": {"tuner.search"}}) == []


def _beyond_init(component: list[str], g: dict[str, set[str]]) -> bool:
    """Whether the component stays a circle once edges into package __init__ modules are left out."""
    members = set(component)
    inits = {m for m in members if any(d.startswith(m + ".") for d in members)}  # a package: its modules are here
    sub = {m: {d for d in g[m] if d in members and d not in inits} for m in members if m not in inits}
    seen: dict[str, int] = {}

    def cyclic(v: str) -> bool:
        seen[v] = 1
        for w in sub.get(v, ()):
            if seen.get(w) == 1 or (w not in seen and cyclic(w)):
                return True
        seen[v] = 2
        return False

    return any(v not in seen and cyclic(v) for v in sub)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_long_module_says_why_in_its_docstring(path):
    lines = len(path.read_text().splitlines())
    if lines <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert re.search(r"^(Why|Over) [^\n]*\d+ lines", doc, re.M | re.I), (
        f"{path.relative_to(ROOT)} has {lines} lines (over {MAX_LINES}): split it, or say why in one line of its "
        f"docstring starting 'Why one module of ~N lines' or 'Over N lines because'")


def test_benchmarks_import_only_public_names():
    """benchmarks/ use what tuner offers (no `_private` module or name), so they measure the library as shipped."""
    bad = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tuner"):
                names = [a.name for a in node.names]
                if any(part.startswith("_") for part in node.module.split(".")) or any(n.startswith("_") for n in names):
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
