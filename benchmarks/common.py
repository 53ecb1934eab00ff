"""What every benchmark shares: the result record, the run context (settings per mode and device, progress lines,
work folders) and the writers for results.json / results.md.

Each figure is a ratio against a baseline measured in the same run: these machines are noisy and absolute times
do not carry over from one machine (or one hour) to the next.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.table import CODE, SCHEMA, Target, value_at
from tuner.files import json_safe
from tuner.analysis import read_records

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = ("overhead", "fidelity", "efficiency", "speedup", "stability", "ceilings", "levers")


@dataclass
class BenchResult:
    """One line of the results table. `pass_` is None when the figure could not be measured (error).

    A published row (`row`: its id in benchmarks/table.py's EXPECTED) carries `rule`, its target as conditions
    that can fail; `pass_` is then computed from the figures by that rule, the same way the generated table does,
    so the two cannot disagree. `target_history`: [{"was": old target, "why": reason}] where the target changed.
    """

    name: str
    benchmark: str  # one of BENCHMARKS
    figure: float | None
    unit: str
    baseline: float | None
    ratio: float | None
    target: str
    pass_: bool | None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    row: str = ""
    rule: Target | None = None
    target_history: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rule is not None:
            self.target = self.rule.text
            verdict = self.rule.verdict(self._value)
            self.pass_ = None if verdict == "not measured" else verdict == "pass"

    def _value(self, on: str) -> float | None:
        return value_at(on, {"figure": self.figure, "baseline": self.baseline, "ratio": self.ratio}, self.details)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("pass_")
        d["rule"] = self.rule.to_json() if self.rule is not None else None
        return json_safe(d)


def git_state() -> tuple[str | None, bool]:
    """(HEAD's commit, whether the tree has uncommitted changes to code): which code a measurement ran."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=30).stdout.strip() or None
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *CODE], cwd=REPO,
                               capture_output=True, timeout=60).returncode != 0
    except (OSError, subprocess.TimeoutExpired):
        return None, False
    return head, dirty


def write_rows(results: list[BenchResult], meta: dict[str, Any], path: Path) -> Path | None:
    """The published rows of a run, in benchmarks/table.py's schema, into a committed results file."""
    commit, dirty = git_state()
    machine = meta.get("machine") or {}
    where = f"{machine.get('cpu', '?')} ({machine.get('cores', '?')} cores" + \
        (f", {machine['gpu']})" if machine.get("gpu") else ", no GPU)")
    rows = []
    for r in results:
        if not r.row or r.rule is None:
            continue
        rows.append({"id": r.row, "benchmark": r.benchmark, "name": r.name, "figure": r.figure, "unit": r.unit,
                     "baseline": r.baseline, "ratio": r.ratio, "target": r.rule.to_json(),
                     "target_history": r.target_history, "commit": commit, "dirty": dirty,
                     "date": meta.get("date", now_iso()), "machine": where,
                     "load": machine.get("load_average_at_start") or [], "note": r.note, "details": r.details})
    if not rows:
        return None
    doc = {"schema": SCHEMA, "mode": meta.get("mode"), "versions": meta.get("versions"), "seconds": meta.get("seconds"),
           "load_average_at_end": machine.get("load_average_at_end"), "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic(path, json.dumps(json_safe(doc), indent=1) + "\n")
    return path


def error_result(benchmark: str, name: str, err: BaseException, target: str) -> BenchResult:
    """A benchmark that crashed still gets its line, marked as not measured, with the error."""
    text = str(err).strip().splitlines()
    line = f"{type(err).__name__}: {text[0] if text else ''}"[:300]
    return BenchResult(name, benchmark, None, "", None, None, target, None, note=f"not measured: {line}")


# --- settings ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """Sizes of every benchmark for one mode on one kind of device. Code paths are the same for all of them."""

    mode: str  # "quick" | "full"
    cuda: bool
    # 1. overhead
    overhead_trials: int
    overhead_budget_samples: int
    default_study_args: tuple[str, ...]  # extra `tuner search` arguments ((): the true default study)
    # 2. fidelity: (workload, params, warmup_steps); timed steps are calibrated to about fidelity_run_s per run
    fidelity_configs: tuple[tuple[str, dict[str, Any], int], ...]
    fidelity_repeats: int
    fidelity_run_s: float
    fidelity_max_steps: int
    # 3. efficiency
    grid_axes: tuple[tuple[str, tuple[Any, ...]], ...]
    grid_budget_s: float
    search_trials: int  # study length L at which hypervolumes are compared
    search_seeds: int
    # 4. speedup
    speedup_repeats: int
    # 5. stability: per seed, a study of stability_trials without confirmation against one of
    # stability_trials - (confirm + 1) * repeats trials plus the confirmation phase (about the same training time)
    stability_seeds: int
    stability_trials: int
    stability_budget_s: float
    stability_confirm: int  # K (front trials re-run)
    stability_repeats: int  # R (re-runs of each, and of the baseline)
    stability_top: int  # top configs of each study re-measured afterwards
    stability_remeasure: int  # M: independent re-measurements of each
    # the whole run: speedup (last, and the least predictable: it trains whatever the study exported) drops
    # repeats beyond 2 that would end after this many seconds
    deadline_s: float
    probe_seconds: float = 0.75  # per ceiling, in the efficiency benchmark's loader probes
    # 7. levers: eager / compiled / channels_last trials of this many seconds each, in this many interleaved rounds
    levers_rounds: int = 3
    levers_budget_s: float = 2.5
    levers_batch: int = 64
    # 1b. scale: a study of this many tiny trials at --concurrency 2 against bare Ray Tune over the same trials
    scale_trials: int = 100

    @property
    def grid_size(self) -> int:
        return math.prod(len(v) for _, v in self.grid_axes)


def make_settings(quick: bool, cuda: bool) -> Settings:
    """CPU sizes fit a 2-core machine in < 10 min (quick) / < 30 min (full); a GPU gets larger batches."""
    k = 4 if cuda else 1  # batch-size multiplier on a GPU
    w = 2 if cuda else 1  # loader-worker multiplier on a GPU machine (it has more cores)
    warm = 2 if quick else 3
    fidelity: tuple[tuple[str, dict[str, Any], int], ...] = (
        ("gan", {"batch_size": 64 * k, "num_workers": 0}, warm),
        ("gan", {"batch_size": 128 * k, "num_workers": 1 * w, "prefetch_factor": 2}, warm),
        ("gan", {"batch_size": 32 * k, "accumulation_steps": 2}, warm),
        ("cnn", {"batch_size": 64 * k, "num_workers": 1 * w}, warm),
        ("gan", {"batch_size": 32 * k, "precision": "bf16"}, 1),
    )
    if quick:  # four configs still vary batch, workers 0/1, accumulation and precision
        fidelity = (
            fidelity[0], fidelity[1],
            ("cnn", {"batch_size": 64 * k, "num_workers": 1 * w, "accumulation_steps": 2}, warm),
            fidelity[4],
        )
        grid = (("batch_size", (32 * k, 128 * k)), ("num_workers", (0, 1 * w)), ("precision", ("fp32", "bf16")))
        return Settings(
            mode="quick", cuda=cuda, overhead_trials=8, overhead_budget_samples=256 * k,
            default_study_args=("--workload", "cnn", "--trials", "3", "--budget-seconds", "2"),
            fidelity_configs=fidelity, fidelity_repeats=2, fidelity_run_s=1.2, fidelity_max_steps=400,
            grid_axes=grid, grid_budget_s=1.5, search_trials=4, search_seeds=5, probe_seconds=0.4,
            speedup_repeats=2, stability_seeds=2, stability_trials=6, stability_budget_s=1.0, stability_confirm=1,
            stability_repeats=2, stability_top=2, stability_remeasure=2, deadline_s=270.0,
            levers_rounds=3, levers_budget_s=2.5, levers_batch=64 * k, scale_trials=20,
        )
    grid = (("batch_size", (16 * k, 32 * k, 64 * k, 128 * k)), ("num_workers", (0, 1 * w, 2 * w)),
            ("precision", ("fp32", "bf16")))
    return Settings(
        mode="full", cuda=cuda, overhead_trials=20, overhead_budget_samples=512 * k,
        default_study_args=(),
        fidelity_configs=fidelity, fidelity_repeats=3, fidelity_run_s=2.5, fidelity_max_steps=2000,
        grid_axes=grid, grid_budget_s=3.0, search_trials=12, search_seeds=10,
        speedup_repeats=3, stability_seeds=3, stability_trials=12, stability_budget_s=2.0, stability_confirm=2,
        stability_repeats=2, stability_top=3, stability_remeasure=3, deadline_s=28 * 60.0,
        levers_rounds=5, levers_budget_s=6.0, levers_batch=64 * k,
    )


# --- run context ---------------------------------------------------------------------------------------------


@dataclass
class Context:
    """Settings plus where things go, the clock of the whole run and a progress printer (stderr)."""

    settings: Settings
    out_dir: Path  # reports/benchmarks
    work_dir: Path  # studies and scratch: <out_dir>/work
    t0: float = field(default_factory=time.perf_counter)
    shared: dict[str, Any] = field(default_factory=dict)  # results one benchmark hands to another

    @property
    def cache_dir(self) -> Path:
        """The cache a `tuner search --reports-dir <work_dir>` uses too (datasets, FID classifier)."""
        return self.work_dir / ".cache"

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.t0:7.1f}s] {message}", file=sys.stderr, flush=True)


# --- small statistics ----------------------------------------------------------------------------------------


def median(values: Iterable[float]) -> float | None:
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.median(vals) if vals else None


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


# --- machine and versions -----------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average_at_start": _loadavg(),
    }
    return info


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("torch", "ray", "optuna"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # a missing library is reported, not fatal to the table
            out[mod] = "missing"
    return out


# --- writers -------------------------------------------------------------------------------------------------


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def _pass_cell(value: bool | None) -> str:
    return "not measured" if value is None else ("**pass**" if value else "**MISSED**")


def markdown_table(results: list[BenchResult], meta: dict[str, Any]) -> str:
    """The table README.md shows: machine, date, versions and mode above; one row per figure; notes below."""
    m, v = meta["machine"], meta["versions"]
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ", no GPU"
    lines = [
        f"Mode **{meta['mode']}**, {meta['date']}, {m['cpu']} ({m['cores']} cores{gpu}); "
        f"torch {v.get('torch')}, ray {v.get('ray')}, optuna {v.get('optuna')}, python {v.get('python')}; "
        f"run took {meta['seconds']:.0f} s; load average {m.get('load_average_at_start')} at start"
        + (f", {m['load_average_at_end']} at end." if m.get("load_average_at_end") else "."),
        "",
        "| # | benchmark | figure | baseline (same run) | ratio | target | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(results, 1):
        cells = [str(i), f"{r.benchmark}: {r.name}", _fmt(r.figure, r.unit), _fmt(r.baseline, r.unit), _fmt(r.ratio),
                 r.target, _pass_cell(r.pass_)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    for i, r in enumerate(results, 1):
        if r.note:
            lines.append(f"{i}. {r.note}")
    return "\n".join(lines) + "\n"


def write_results(results: list[BenchResult], meta: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """results.json (a list of entries), run.json (machine, date, mode, versions) and results.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "results.json", out_dir / "results.md"
    _atomic(json_path, json.dumps([r.to_json() for r in results], indent=2) + "\n")
    _atomic(out_dir / "run.json", json.dumps(json_safe(meta), indent=2) + "\n")
    _atomic(md_path, markdown_table(results, meta))
    return json_path, md_path


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def study_records(study_dir: Path) -> list[dict[str, Any]]:
    """A study's trial records as plain JSON (what result.json holds), through tuner's public study API."""
    from tuner.study import StudyFolder

    return [r.to_json() for r in read_records(StudyFolder(study_dir))]


def _seconds(iso: str | None) -> float | None:
    return dt.datetime.fromisoformat(iso).timestamp() if iso else None


def phase_times(study_dir: Path) -> dict[str, Any]:
    """The search phase and the confirmation phase of a finished study, from what its folder records (one-second
    timestamps): the search runs from study.json's `created` (written as the trials are about to start) to the end
    of its last trial; the confirmation from there to the end of its last re-run (trials/NNNN/confirm/KK.json), so
    it includes the phase's own Ray Tune start-up. Also the training work of each phase (train_seconds +
    quality_seconds of the trials, of the re-runs)."""
    from tuner.study import StudyFolder

    folder = StudyFolder(study_dir)
    meta = folder.read_meta()
    records = read_records(folder)
    reruns = [rr for r in records for rr in folder.reruns(r.trial)]
    start = _seconds(meta.created)
    ends = [t for r in records if (t := _seconds(r.ended)) is not None]
    search_end = max(ends) if ends else None
    rerun_ends = [t for rr in reruns if (t := _seconds(rr.ended)) is not None]

    def work(items: list[Any]) -> float:
        return sum(v for it in items for k in ("train_seconds", "quality_seconds") if (v := it.value(k)) is not None)

    search_s = search_end - start if start is not None and search_end is not None else None
    confirm_s = max(rerun_ends) - search_end if rerun_ends and search_end is not None else 0.0
    repeats = int((meta.confirm or {}).get("repeats") or 0)
    # Why each re-run ran (tuner.search._confirm): round 0's first R repeats are the planned ones, its later
    # repeats the tie passes, and a later round a moved knee's (its re-runs and the baseline read beside them).
    why = {"planned": 0, "tie_pass": 0, "moved_knee": 0}
    for rr in reruns:
        why["moved_knee" if (rr.round or 0) > 0 else "tie_pass" if rr.repeat >= repeats else "planned"] += 1
    return {"search_s": search_s, "confirm_s": confirm_s, "trials": len(records), "reruns": len(reruns),
            "search_work_s": work(records), "confirm_work_s": work(reruns),
            "confirm": dict(meta.confirm), "reruns_by_why": why}
