"""The benchmark table, generated from the results files committed under benchmarks/results/ and nothing else.

`python benchmarks/table.py` prints it; the docs site's Benchmarks page is built from `render_markdown`. A row's
result is computed here from its figures and its target (a list of conditions that can fail), never copied from a
stored verdict; a row measured at a commit whose code differs from HEAD says **stale** (the code its own process
ran: code_of; a stand-alone script's change stales only its own rows; a change to comments or docstrings alone
does not: only_prose_changed); an expected row without a
results file says **not measured**. A results file is a JSON object with a `rows` list, each row:

    {"id": "2", "benchmark": "overhead", "name": "...", "figure": 27.0, "unit": "s", "baseline": 276.0,
     "ratio": 0.097, "target": {"text": "ratio <= 0.10", "all": [{"on": "ratio", "op": "<=", "value": 0.10}]},
     "target_history": [{"was": "ratio < 0.05", "why": "..."}], "commit": "<sha>", "dirty": false,
     "date": "...", "machine": "...", "load": [1.0, 1.2, 1.1], "note": "...", "details": {...}}

`on` names a row field (figure, baseline, ratio) or a dotted path into `details`; an entry `{"any": [...]}` of
`all` holds when one of its conditions does.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import operator
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path("benchmarks") / "results"
SCHEMA = "tuner-benchmark-rows/1"
# Code whose change makes an earlier measurement stale: what the benchmarks run, not their results or prose.
# The GPU proof (issue 38: gpu.sh runs gpu.py on a GPU machine, with its workloads, space and plain loop) is imported
# by no row's benchmark, and its own results file carries its commit: a change to it leaves every row current.
GPU_PROOF = ("benchmarks/gpu.py", "benchmarks/gpu.sh", "benchmarks/gpu_plain.py", "benchmarks/gpu_space.yaml",
             "benchmarks/gpu_workloads.py", "benchmarks/GPU.md")
CODE = ("tuner", "benchmarks", "search_spaces", ":(exclude)benchmarks/results", ":(exclude)benchmarks/README.md",
        ":(exclude)benchmarks/table.py", *(f":(exclude){path}" for path in GPU_PROOF))
# Stand-alone benchmark scripts, each run in a process of its own: a change to one of them leaves the other
# benchmarks' rows current (it cannot change what they measured). A row such a process measured depends on the
# modules it imports (code_of); a row of run-full.json on every shared module (common.py, run.py and what it runs,
# all in one process). The benchmark name a row carries maps to its script.
STANDALONE = {"parity": "benchmarks/parity.py", "noise_scale": "benchmarks/noise_scale.py",
              "time_to_target": "benchmarks/time_to_target.py", "fixed_batch": "benchmarks/fixed_batch.py",
              "retrain": "benchmarks/retrain.py", "ttt_choices": "benchmarks/ttt_choices.py",
              "goodput_rank": "benchmarks/goodput_rank.py", "roles": "benchmarks/roles.py",
              "environment": "benchmarks/environment.py", "quality_rank": "benchmarks/quality_rank.py",
              "horizon": "benchmarks/horizon.py", "stability_sim": "benchmarks/stability_sim.py",
              "multifidelity": "benchmarks/multifidelity.py", "live_scheduler": "benchmarks/live_scheduler.py",
              "contention": "benchmarks/contention.py", "levers": "benchmarks/levers.py"}
# A stand-alone script another one imports from: its rows depend on that script too (fixed_batch.py runs its
# rounds in levers.py's order, levers.schedule; contention.py reads its median's interval as time_to_target.py does).
USES = {"fixed_batch": ("benchmarks/levers.py",), "contention": ("benchmarks/time_to_target.py",)}
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


@dataclass(frozen=True)
class Condition:
    """One failable comparison: the value found at `on` against `value`."""

    on: str
    op: str
    value: float

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown operator {self.op!r}; one of {', '.join(OPS)}")


@dataclass(frozen=True)
class AnyOf:
    """Alternatives: holds when one of its conditions holds ("with > without, or both 100%")."""

    any: tuple[Condition, ...]


@dataclass(frozen=True)
class Target:
    """What a row must show to pass: every condition (or group of alternatives) holds. Its text is what the table
    prints."""

    text: str
    all: tuple[Condition | AnyOf, ...]

    def __post_init__(self) -> None:
        if not self.all or any(isinstance(c, AnyOf) and not c.any for c in self.all):
            raise ValueError(f"target {self.text!r} has no condition: a target must be able to fail")

    def to_json(self) -> dict[str, Any]:
        def one(c: Condition) -> dict[str, Any]:
            return {"on": c.on, "op": c.op, "value": c.value}

        return {"text": self.text,
                "all": [{"any": [one(a) for a in c.any]} if isinstance(c, AnyOf) else one(c) for c in self.all]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Target:
        def one(c: dict[str, Any]) -> Condition:
            return Condition(str(c["on"]), str(c["op"]), float(c["value"]))

        return cls(str(d["text"]), tuple(AnyOf(tuple(one(a) for a in c["any"])) if "any" in c else one(c)
                                         for c in d["all"]))

    def verdict(self, value: Any) -> str:
        """pass / MISSED / not measured, with `value(on)` reading the figures (None: not there)."""
        missing = False
        for group in self.all:
            alternatives = group.any if isinstance(group, AnyOf) else (group,)
            held = False
            for cond in alternatives:
                v = value(cond.on)
                if v is None:
                    missing = True
                elif OPS[cond.op](v, cond.value):
                    held = True
            if not held:
                return "not measured" if missing else "MISSED"
        return "pass"


def target(text: str, *conditions: tuple[str, str, float] | list[tuple[str, str, float]]) -> Target:
    """`target("ratio <= 0.10", ("ratio", "<=", 0.10))`: the short way to write one; a list is alternatives."""
    def one(c: tuple[str, str, float]) -> Condition:
        return Condition(c[0], c[1], float(c[2]))

    return Target(text, tuple(AnyOf(tuple(one(a) for a in c)) if isinstance(c, list) else one(c)
                              for c in conditions))


@dataclass(frozen=True)
class ExpectedRow:
    """A row the table always shows, measured or not."""

    id: str
    benchmark: str
    name: str


# The rows the benchmarks publish, in the table's order. A new figure lands here and in its benchmark's code.
EXPECTED: tuple[ExpectedRow, ...] = (
    ExpectedRow("1", "overhead", "per-trial overhead vs bare Ray Tune"),
    ExpectedRow("1b", "overhead", "100 tiny trials at --concurrency 2: study span vs bare Ray Tune"),
    ExpectedRow("1c", "overhead", "400 tiny trials at --concurrency 2: study span vs bare Ray Tune"),
    ExpectedRow("2", "overhead", "default amp_loader study: total overhead"),
    ExpectedRow("2b", "overhead", "a first study on a new machine: wall time vs a warm one"),
    ExpectedRow("2c", "overhead", "default study: the summary's overhead share"),
    ExpectedRow("3", "overhead", "default study: confirmation phase / search phase"),
    ExpectedRow("4", "fidelity", "reported vs independent throughput"),
    ExpectedRow("5", "efficiency", "probe-first: trials to reach 95% of best throughput"),
    ExpectedRow("6", "efficiency", "trials to reach 95% of best throughput"),
    ExpectedRow("7", "efficiency", "hypervolume after L trials"),
    ExpectedRow("8a", "speedup", "exported vs the workload's own settings (the baseline)"),
    ExpectedRow("8b", "speedup", "exported vs a textbook config sized for the machine"),
    ExpectedRow("9", "stability", "winner is the re-measured winner"),
    ExpectedRow("10", "stability", "winner's throughput error vs re-measurement"),
    ExpectedRow("11", "ceilings", "best config vs its compute ceiling"),
    ExpectedRow("12", "ceilings", "best config vs the best input ceiling found"),
    ExpectedRow("13", "retrain", "export re-trained inside its exported one-run interval"),
    ExpectedRow("14", "noise_scale", "cheap noise-scale estimate vs brute force (CNN, digits)"),
    ExpectedRow("15", "parity", "planted numerics defects caught (drifts or diverged)"),
    ExpectedRow("16", "parity", "a change of seed judged as a knob: false drifts"),
    ExpectedRow("17a", "fixed_batch", "no batch statistics: splits of 64 within seed noise (CNN)"),
    ExpectedRow("17b", "fixed_batch", "BatchNorm: the split found a learning knob (built-in CNN)"),
    ExpectedRow("17c", "fixed_batch", "throughput varies with the split of 64 (built-in CNN)"),
    ExpectedRow("tt-cnn", "time_to_target", "cnn: time to target of the time-to-target pick vs the knee and the baseline"),
    ExpectedRow("tt-gan", "time_to_target", "gan: time to target of the time-to-target pick vs the knee and the baseline"),
    ExpectedRow("tt-lm", "time_to_target", "lm: time to target of the time-to-target pick vs the knee and the baseline"),
    ExpectedRow("tt-int-cnn", "time_to_target",
                "cnn: pick's re-runs' samples to target vs its export's one-run prediction"),
    ExpectedRow("tt-int-gan", "time_to_target",
                "gan: pick's re-runs' samples to target vs its export's one-run prediction"),
    ExpectedRow("tt-int-lm", "time_to_target",
                "lm: pick's re-runs' samples to target vs its export's one-run prediction"),
    ExpectedRow("tt-race", "time_to_target", "race vs fixed budgets: study wall time, same pick"),
    ExpectedRow("tt-race-tpe", "time_to_target", "race vs fixed budgets: study wall time, same pick (TPE)"),
    ExpectedRow("ttc-k-evals", "ttt_choices", "default K: evaluations before the baseline's target"),
    ExpectedRow("ttc-k-cost", "ttt_choices", "default K: evaluation time over training time"),
    ExpectedRow("ttc-n-spread", "ttt_choices", "default smoothing: seed spread of a derived target vs N=1"),
    ExpectedRow("ttc-n-luck", "ttt_choices", "default smoothing: other seeds reach a seed's derived target"),
    ExpectedRow("ttc-runs", "ttt_choices", "runs a config: the fewest that resolve the reported speed-ups"),
    ExpectedRow("ttc-seeds-spread", "ttt_choices", "a derived target from 3 seeds: its seed spread vs one seed's"),
    ExpectedRow("ttc-seeds-luck", "ttt_choices", "a derived target from 3 seeds: a fresh seed reaches it"),
    ExpectedRow("gp-rank", "goodput_rank",
                "goodput's predicted samples to target ranks 3 effective batches as measured (CNN, digits)"),
    ExpectedRow("gp-ratio", "goodput_rank",
                "goodput's predicted samples to target within 2x of measured (CNN, digits)"),
    ExpectedRow("roles-lm", "roles",
                "speed and numerics knobs without learning knobs (charlm): study wall time, roles / every knob by trials"),
    ExpectedRow("roles-lm-pick", "roles", "the roles pick's throughput / the best trial's of --no-probe (charlm)"),
    ExpectedRow("roles-default", "roles", "default study (gan, amp_loader): wall time, roles / every knob by trials"),
    ExpectedRow("qr-false", "quality_rank",
                "equal-quality studies (6-24 trials, FID CV 10-30%) called rankable: the worst cell"),
    ExpectedRow("qr-power", "quality_rank",
                "a 10x FID spread, re-runs 10% apart, called rankable: the worst of 6/12/24 trials"),
    ExpectedRow("ss-holds", "stability_sim",
                "simulated: the pick holds (the knee of its trials' truths) with confirmation vs without: the worst cell"),
    ExpectedRow("ss-error", "stability_sim",
                "simulated: the pick's throughput error, with confirmation / without: the worst cell"),
    ExpectedRow("env-policy", "environment",
                "the study's wait policy vs the fastest policy for its pick (tuner train, interleaved)"),
    ExpectedRow("env-fidelity", "environment",
                "tuner train vs an independent plain loop, each a fresh process with nothing set"),
    ExpectedRow("env-busy", "environment",
                "a study beside a CPU-bound process: said busy; its pick re-measured quietly vs its baseline"),
    ExpectedRow("hz-lm", "horizon",
                "charlm: the pick vs the baseline at 10x the trial budget (time to the horizon's target)"),
    ExpectedRow("hz-vae", "horizon",
                "vae: the pick vs the baseline at 10x the trial budget (time to the horizon's target)"),
    ExpectedRow("hz-inside", "horizon",
                "the horizon ratio inside the study's interval: share of studies (charlm and vae, every seed)"),
    ExpectedRow("mf-t90-cnn", "multifidelity",
                "cnn grid: ASHA vs FIFO, wall time to 90% of the top-rung hypervolume (median over seeds)"),
    ExpectedRow("mf-hv-cnn", "multifidelity",
                "cnn grid: seeds where ASHA's hypervolume >= FIFO's at FIFO's wall time for its trials"),
    ExpectedRow("mf-t90-gan", "multifidelity",
                "gan grid: ASHA vs FIFO, wall time to 90% of the top-rung hypervolume (median over seeds)"),
    ExpectedRow("mf-hv-gan", "multifidelity",
                "gan grid: seeds where ASHA's hypervolume >= FIFO's at FIFO's wall time for its trials"),
    ExpectedRow("live-asha", "live_scheduler",
                "default study, the same wall time: asha's front hypervolume vs fifo's (one run each)"),
    ExpectedRow("levers-cl-gan", "levers", "gan: channels_last vs eager"),
    ExpectedRow("ctn-load", "contention",
                "tuner train vs a plain loop, fresh processes with busy neighbours: median pair ratio"),
)


@dataclass
class Row:
    """One measured row, read from a results file."""

    id: str
    benchmark: str
    name: str
    figure: float | None
    unit: str
    baseline: float | None
    ratio: float | None
    target: Target
    source: str
    commit: str | None = None
    dirty: bool = False
    date: str = ""
    machine: str = ""
    load: list[float] = field(default_factory=list)
    note: str = ""
    target_history: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: dict[str, Any], source: str) -> Row:
        return cls(id=str(d["id"]), benchmark=str(d["benchmark"]), name=str(d["name"]), figure=_num(d.get("figure")),
                   unit=str(d.get("unit", "")), baseline=_num(d.get("baseline")), ratio=_num(d.get("ratio")),
                   target=Target.from_json(d["target"]), source=source, commit=d.get("commit"),
                   dirty=bool(d.get("dirty", False)), date=str(d.get("date", "")), machine=str(d.get("machine", "")),
                   load=list(d.get("load") or []), note=str(d.get("note", "")),
                   target_history=list(d.get("target_history") or []), details=dict(d.get("details") or {}))

    def value(self, on: str) -> float | None:
        return value_at(on, {"figure": self.figure, "baseline": self.baseline, "ratio": self.ratio}, self.details)

    def verdict(self) -> str:
        """pass, MISSED, or not measured (a value the target needs is missing): from the figures, every time."""
        return self.target.verdict(self.value)


def value_at(on: str, fields: dict[str, Any], details: dict[str, Any]) -> float | None:
    """What a target's condition reads: a row field (figure, baseline, ratio) or a dotted path into its details;
    None where it is missing or not a finite number."""
    if on in fields:
        return _num(fields[on])
    node: Any = details
    for key in on.removeprefix("details.").split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return _num(node)


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def load_rows(repo: Path = REPO) -> list[Row]:
    """Every row of every results file of the rows schema (other files hold raw evidence: grids, notes)."""
    rows: list[Row] = []
    for path in sorted((repo / RESULTS).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON ({err})") from err
        if isinstance(data, dict) and data.get("schema") == SCHEMA:
            rows.extend(Row.from_json(r, str(path.relative_to(repo))) for r in data["rows"])
    return rows


def code_of(benchmark: str, source: str = "", repo: Path = REPO) -> tuple[str, ...]:
    """The paths whose change makes a row of `benchmark`, read from the results file `source`, stale.

    The tuner package, the search spaces, and the benchmark modules the row's process ran before the row was
    measured, followed through their `benchmarks.*` imports at HEAD (table.py aside): for a stand-alone script's
    results file, that script; for run-full-NAME.json (`run.py --only NAME`), run.py and NAME's modules; for
    run-full.json, run.py and its benchmarks in their order up to the row's own (common.BENCHMARKS), so a change to
    benchmarks/stability.py stales neither time_to_target.py's rows nor overhead's, measured before it ran. Where a
    module cannot be read at HEAD: CODE, less the other stand-alone scripts."""
    wide = (*CODE, *(f":(exclude){path}" for name, path in STANDALONE.items()
                     if name != benchmark and path not in USES.get(benchmark, ())))
    name = Path(source).name
    head = _head(repo)
    order = run_order(repo, head)
    if name.startswith("run-full-") and name.endswith(".json"):
        entries = [RUN_PY, *(f"benchmarks/{m}.py" for m in name[len("run-full-"):-len(".json")].split("-"))]
    elif name == "run-full.json" and benchmark in order:
        entries = [RUN_PY, *(f"benchmarks/{m}.py" for m in order[:order.index(benchmark) + 1])]
    elif benchmark in STANDALONE and not name.startswith("run-full"):
        entries = [STANDALONE[benchmark]]
    else:
        return wide
    files = imported_modules(entries, repo, head)
    if files is None:
        return wide
    return ("tuner", "search_spaces", "benchmarks/__init__.py", *sorted(files - {"benchmarks/table.py"}))


RUN_PY = "benchmarks/run.py"


def imported_modules(entries: list[str], repo: Path = REPO, head: str = "HEAD") -> set[str] | None:
    """`entries` and every benchmarks/ module they import, directly or through each other, as HEAD has them;
    None when one cannot be read there. Read as text, not as a syntax tree: an import inside a function, or inside
    the source of a child process (environment.py's plain loop imports benchmarks.fidelity), counts too."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        text = _show(repo, head, path)
        if text is None:
            return None
        seen.add(path)
        todo += [f"benchmarks/{m}.py" for m in IMPORT.findall(text)]
    return seen


def run_order(repo: Path = REPO, head: str = "HEAD") -> list[str]:
    """run.py's benchmarks in the order one run.py process runs them (common.BENCHMARKS at HEAD); [] unread."""
    text = _show(repo, head, "benchmarks/common.py") or ""
    m = re.search(r"^BENCHMARKS = \(([^)]*)\)", text, re.M)
    return re.findall(r"[\"']([a-z_]+)[\"']", m.group(1)) if m else []


def _head(repo: Path) -> str:
    """HEAD's commit id, so each file is read once per commit (_show), not once per row; "HEAD" unread."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip() or "HEAD"
    except (OSError, subprocess.SubprocessError):
        return "HEAD"


def _show(repo: Path, commit: str, path: str) -> str | None:
    """`path` at `commit` (None: not there); read once per commit id, which names one content for good."""
    return _git_show(repo, commit, path) if commit == "HEAD" else _show_cached(repo, commit, path)


def _git_show(repo: Path, commit: str, path: str) -> str | None:
    try:
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, text=True,
                              timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


_show_cached = functools.lru_cache(maxsize=None)(_git_show)


IMPORT = re.compile(r"\b(?:from|import)\s+benchmarks\.(\w+)")


def freshness(row: Row, repo: Path = REPO) -> str:
    """'current', 'stale: measured at abc1234', or 'commit unknown': was it measured on the code HEAD has?"""
    if not row.commit:
        return "commit unknown"
    short = row.commit[:7]
    try:
        done = subprocess.run(["git", "diff", "--name-only", row.commit, "HEAD", "--",
                               *code_of(row.benchmark, row.source, repo)], cwd=repo, capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return f"commit unknown ({short})"
    if done.returncode != 0:
        return f"commit unknown ({short})"
    changed = done.stdout.split()
    if not changed:
        return "current" + (f" (uncommitted changes at {short})" if row.dirty else "")
    if only_prose_changed(row.commit, changed, repo):
        return f"current (measured at {short}; only comments and docstrings changed since)"
    return f"stale: measured at {short}"


def only_prose_changed(commit: str, changed: list[str], repo: Path = REPO) -> bool:
    """Whether every file in `changed` (the code that differs between `commit` and HEAD) is Python with the same
    syntax tree once docstrings are left out: a comment or a docstring cannot move a figure, so mending one need not
    send every row back to hours of re-reading. Any other change (a string a message prints, an added or removed
    file, a YAML space) is code."""
    head = _head(repo)
    for name in changed:
        if not name.endswith(".py"):
            return False
        old, new = _code_tree(_show(repo, commit, name)), _code_tree(_show(repo, head, name))
        if old is None or old != new:
            return False
    return bool(changed)


def _code_tree(text: str | None) -> str | None:
    """The syntax tree of Python source, docstrings removed (comments never reach it); None: absent or unparsable."""
    if text is None:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
                and isinstance(node.body[0].value.value, str)):
            node.body = node.body[1:]
    return ast.dump(tree)


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    text = f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{text} {unit}".strip()


def render_markdown(repo: Path = REPO) -> str:
    """The table, then one note per row: what it compared, when and where it was measured, targets it changed."""
    rows = load_rows(repo)
    by_id: dict[str, Row] = {}
    for row in rows:  # the newest measurement of a row wins when several files hold it
        if row.id not in by_id or row.date > by_id[row.id].date:
            by_id[row.id] = row
    order = [e.id for e in EXPECTED] + sorted(set(by_id) - {e.id for e in EXPECTED})
    names = {e.id: e for e in EXPECTED}
    lines = ["| # | benchmark | figure | baseline (same run) | ratio | target | result | measured |",
             "|---|---|---|---|---|---|---|---|"]
    notes = []
    for rid in order:
        row = by_id.get(rid)
        if row is None:
            e = names[rid]
            lines.append(f"| {rid} | {e.benchmark}: {e.name} | - | - | - | - | **not measured** | no results file |")
            continue
        verdict = row.verdict()
        shown = "pass" if verdict == "pass" else f"**{verdict}**"
        fresh = freshness(row, repo)
        if not fresh.startswith("current"):
            shown += f" ({fresh.split(':')[0]})"
        lines.append(f"| {rid} | {row.benchmark}: {row.name} | {_fmt(row.figure, row.unit)} | "
                     f"{_fmt(row.baseline, row.unit)} | {_fmt(row.ratio)} | {row.target.text} | {shown} | "
                     f"{row.date[:16].replace('T', ' ')} ({fresh}; `{row.source}`) |")
        bits = [row.note.strip()] if row.note.strip() else []
        if row.machine or row.load:
            load = ", ".join(f"{x:.1f}" for x in row.load)
            bits.append(f"Machine: {row.machine}" + (f"; load average {load}" if load else "") + ".")
        for change in row.target_history:
            bits.append(f"Target changed from `{change.get('was', '?')}`: {change.get('why', 'no reason given')}.")
        if bits:
            notes.append(f"{rid}. " + " ".join(bits))
    out = "\n".join(lines) + "\n"
    if notes:
        out += "\n" + "\n".join(notes) + "\n"
    return out


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
