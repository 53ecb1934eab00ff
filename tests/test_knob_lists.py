"""No hand-written list of knobs outside the role table (tuner.knobs): a list that names knobs by hand forgets the
next knob, as the ceiling keys once did. Code asks the table instead (`probed("input")`, `heavy_knobs()`,
`numerics_knobs()`, `Params.defaults(...)`); using one knob's own field (`params.num_workers`) is fine.

Read from the sources' syntax: a tuple, list or set literal, or a dict literal's keys, holding two or more knob
names as strings. The `run` knobs (device, seed) name the run, and as keys they mostly hold something else (a
device's description beside a cached figure): they are not counted."""

import ast
from pathlib import Path

import tuner
from tuner.knobs import KNOBS

TUNER = Path(tuner.__file__).parent
TABLE = {TUNER / "knobs.py"}  # the table itself; tuner/config.py's Params fields are annotations, not strings
TUNED = {k.name for k in KNOBS.values() if k.role != "run"}


def hand_lists(root: Path, skip: set[Path] = frozenset()) -> list[str]:
    """`path:line: names` for each literal collection of 2+ knob names in the Python files under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path in skip:
            continue
        nodes = sorted(ast.walk(ast.parse(path.read_text(), filename=str(path))),
                       key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        for node in nodes:
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None]  # None: a `**mapping` entry
            else:
                continue
            names = [e.value for e in items if isinstance(e, ast.Constant) and e.value in TUNED]
            if len(names) >= 2:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {', '.join(names)}")
    return found


def test_no_module_lists_knobs_by_hand():
    found = hand_lists(TUNER, TABLE)
    assert not found, ("knob names listed by hand (derive them from tuner.knobs: a query on the table, or add one "
                       "there):\n" + "\n".join(found))


def test_a_planted_hand_list_is_found_and_a_single_knob_is_not(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "clean.py").write_text(
        "from tuner.knobs import probed\n"
        "LOADER = probed('input')\n"
        "def f(params, point):\n"
        "    return params.num_workers, point.get('pin_memory'), {'num_workers': 0, 'shuffle': True}\n"
        "PLAIN = {'device': 'cpu', 'seed': 0, 'batch_size': 8}  # run knobs are not counted\n")
    assert hand_lists(pkg) == []
    (pkg / "planted.py").write_text(
        "LOADER = ('num_workers', 'prefetch_factor', 'pin_memory')\n"
        "def plain(p):\n"
        "    return p.model_copy(update={'batch_size': 1, 'accumulation_steps': 1})\n"
        "HEAVY = ['batch_size', 'accumulation_steps']\n"
        "SEEN = {'tf32', 'precision'}\n")
    assert hand_lists(pkg) == ["planted.py:1: num_workers, prefetch_factor, pin_memory",
                               "planted.py:3: batch_size, accumulation_steps",
                               "planted.py:4: batch_size, accumulation_steps",
                               "planted.py:5: tf32, precision"]
