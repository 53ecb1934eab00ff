"""Does the study's speed-up hold when the user trains longer? (issue 51 item 7: the horizon check, measured)

`python benchmarks/horizon.py [--quick] [--seeds 4] [--only lm,vae] [--out benchmarks/results]` runs, for each
workload and each study seed, what a user runs, each command a fresh process through the CLI:

    tuner search --space SPACE --workload W --target baseline --eval-every-samples K --seed S   (time to target)
    tuner export STUDY --horizon 10xBUDGETsamples --horizon-seeds 2

and reads the study folder's horizon.json through its reader (tuner.study.read_horizon): the study's time-to-target
ratio of the pick over the baseline (the baseline's time over the pick's, above 1: the pick is sooner) with its
interval, and the horizon check's ratio at 10x the trial budget with its interval and its word (holds / shrinks /
reverses). The workloads are the examples after models nobody here wrote, each with an `evaluate()` that scores its
whole validation split: examples/charlm.py (nanoGPT's char GPT, its own AdamW groups; examples/charlm.yaml's size)
and examples/vae.py (Kingma and Welling's VAE on digits, its own Adam); examples/resnet.py was left out: a
ResNet-18 step takes about a second on 2 cores, and its horizon alone would take the whole budget.

The study's space is time_to_target.py's (effective batch 16-128 split into batch_size x accumulation_steps, lr_scale
1-4x, loader and precision fixed, short measurement windows) scored on time to target alone, the target derived by
the study (`--target baseline`: the baseline's quality after a third of a trial), the default TPE sampler, seed S,
no probes, the default confirmation. Budgets are in samples, so the reference run, K and the horizon do not move
with the machine's load; K is given, since the pace the pre-flight reads on a busy machine set K past the whole
reference run (charlm, 2026-11-29). The horizon check runs the export's default seeds of each side (tuner.config
HORIZON_SEEDS, 3; 2 until 2026-11-30, when one check's interval read 0.46-7.82x: a 2-seed check's point ratio
is too loose to land inside a study's interval, and a user's check runs 3).

Rows (benchmarks/table.py schema) in <out>/horizon.json:
- hz-lm, hz-vae: the median over study seeds of the horizon ratio; target >= 1.3 (the pick reaches the horizon's
  target at least 1.3x sooner than the baseline). A study that picked the baseline itself counts 1.0 (the user gets
  no speed-up), a seed whose study or check failed is left out and named in the note.
- hz-inside: of every study (both workloads, every seed) with a reading, how many have the horizon ratio inside the
  study's interval; target: most of them (share > 0.5). A study that picked the baseline has no interval: not inside.

Sizes (full): charlm trials of 1,280 samples (K 64), horizon 12,800 samples; vae trials of 6,400 samples (K 192),
horizon 64,000 samples; 5 trials a study, 4 study seeds a workload (8 studies; 2 until 2026-11-30, when hz-inside
had read 4 of 4, 1 of 4 and 2 of 4 in three runs: a share of 4 studies moves by a quarter with one draw). A study
and its check took about a minute on 2 quiet cores (4 studies in 4 min, 2026-11-30), longer under load.
--quick (vae only, 1 seed, 3 trials of 3,200 samples, horizon 32,000 samples; about 3 min quiet) validates the script
and writes under reports/benchmarks/horizon/, not benchmarks/results. Seen 2026-11-29 at load 10-27 on 2 cores: the
quick study took 3 min and picked its baseline (the knee: "no difference beyond the noise between trials 0 and 2",
1.9 vs 5.14 s to target, "picked 0 for less memory"), so no check ran; `tuner export --trial 2 --horizon
6400samples` of that study then read "holds", 1.74x (0.35-8.57x) against the study's 2.71x (1.17-6.25x), in 5.5
min at that load (a vae run ~20x slower than quiet). A loaded machine stretches every figure above.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tuner.config import HORIZON_SEEDS  # noqa: E402 - the export's default seeds a side, after the path fix

NEED = 1.3  # row (a): the pick reaches the horizon target at least this much sooner
HORIZON_X = 10  # the horizon: this many times the trial budget


@dataclass(frozen=True)
class Case:
    """One workload and its sizes (samples: load-independent)."""

    key: str  # lm | vae
    workload: str
    options: tuple[str, ...]  # -o KEY=VALUE
    budget_samples: int
    eval_every: int  # K
    trials: int


CASES = {
    "full": {"lm": Case("lm", "examples/charlm.py:make", ("block_size=32", "n_layer=2", "n_head=4", "n_embd=64"),
                        1280, 64, 5),
             "vae": Case("vae", "examples/vae.py:make", (), 6400, 192, 5)},
    "quick": {"vae": Case("vae", "examples/vae.py:make", (), 3200, 128, 3)},
}
NAMES = {"lm": "charlm", "vae": "vae"}
SPACE: dict[str, Any] = {
    "effective_batch": {"type": "int", "low": 16, "high": 128, "log": True},
    "params": {"batch_size": {"type": "int", "low": 16, "high": 128, "log": True},
               "lr_scale": {"type": "float", "low": 1.0, "high": 4.0, "log": True},
               "num_workers": 0, "precision": "fp32"},
    "trial": {"measure": {"warmup_steps": 1, "warmup_max_steps": 5, "windows": 3, "min_windows": 2,
                          "window_min_steps": 2, "window_min_seconds": 0, "ceiling_seconds": 0}},
}


# --- the pure part: rows from readings (tests/benchmarks/test_horizon.py plants them) --------------------------


@dataclass(frozen=True)
class Reading:
    """One study and its horizon check, as horizon.json holds them; `skipped`: why there is no check (the study
    picked its baseline: ratio 1.0, no interval), `failed`: why there is no reading at all."""

    workload: str
    seed: int
    ratio: float | None = None  # the horizon check's, baseline / pick
    low: float | None = None
    high: float | None = None
    word: str | None = None
    study_ratio: float | None = None
    study_low: float | None = None
    study_high: float | None = None
    key: str | None = None
    target: str | None = None  # the horizon's target, as the check says it
    skipped: str | None = None
    failed: str | None = None
    verdict: str = ""  # the study's verdict, as `tuner search --format json` printed it
    study_s: float = 0.0
    horizon_s: float = 0.0

    @property
    def counted(self) -> float | None:
        """What row (a) counts: the check's ratio, 1.0 where the study picked its baseline, None on a failure."""
        if self.failed:
            return None
        return 1.0 if self.skipped else self.ratio

    @property
    def inside(self) -> bool:
        """The horizon ratio inside the study's interval (a study without an interval: no)."""
        return (self.ratio is not None and self.study_low is not None and self.study_high is not None
                and self.study_low <= self.ratio <= self.study_high)


def _iv(lo: float | None, hi: float | None) -> str:
    return "no interval" if lo is None or hi is None else f"{lo:.2f}-{hi:.2f}"


def describe(r: Reading) -> str:
    if r.failed:
        return f"seed {r.seed}: no reading ({r.failed})"
    if r.skipped:
        return f"seed {r.seed}: no check, counted 1.0 ({r.skipped}: {r.verdict[:200] or 'no verdict'})"
    study = "no study ratio" if r.study_ratio is None else \
        f"study {r.study_ratio:.2f}x ({_iv(r.study_low, r.study_high)})"
    horizon = "no horizon ratio" if r.ratio is None else f"horizon {r.ratio:.2f}x ({_iv(r.low, r.high)}) {r.word}"
    return f"seed {r.seed}: {study}, {horizon}, {'inside' if r.inside else 'outside'}"


def rows(readings: list[Reading], sizes: dict[str, Case]) -> list[dict[str, Any]]:
    """hz-<workload> for each workload with readings, and hz-inside over all of them."""
    from benchmarks.table import target

    out = []
    for key, case in sizes.items():
        mine = [r for r in readings if r.workload == key]
        counted = [r.counted for r in mine if r.counted is not None]
        studies = [r.study_ratio for r in mine if r.study_ratio is not None]
        figure = statistics.median(counted) if counted else None
        out.append({
            "id": f"hz-{key}", "benchmark": "horizon",
            "name": f"{NAMES[key]}: the pick vs the baseline at {HORIZON_X}x the trial budget (time to the "
                    f"horizon's target)",
            "figure": figure, "unit": "x sooner", "baseline": statistics.median(studies) if studies else None,
            "ratio": figure,
            "target": target(f"ratio >= {NEED:g}: the pick reaches the horizon target at least {NEED:g}x sooner",
                             ("ratio", ">=", NEED)).to_json(),
            "note": (f"Median over {len(counted)} study seed(s) of the horizon check's ratio (the baseline's time to "
                     f"the target over the pick's; the baseline column: the studies' own ratio at their derived "
                     f"target). Trials of {case.budget_samples:,} samples (K {case.eval_every}), horizon "
                     f"{HORIZON_X * case.budget_samples:,} samples, {HORIZON_SEEDS} seeds a side: "
                     + "; ".join(describe(r) for r in mine) + "."),
            "details": {"readings": [asdict(r) for r in mine], "case": asdict(case), "horizon_x": HORIZON_X,
                        "horizon_seeds": HORIZON_SEEDS},
        })
    judged = [r for r in readings if not r.failed]
    n_in = sum(r.inside for r in judged)
    share = n_in / len(judged) if judged else None
    out.append({
        "id": "hz-inside", "benchmark": "horizon",
        "name": "the horizon ratio inside the study's interval: share of studies (charlm and vae, every seed)",
        "figure": share, "unit": "share", "baseline": float(len(judged)) if judged else None, "ratio": None,
        "target": target("> 0.5: inside in most seeds", ("figure", ">", 0.5)).to_json(),
        "note": (f"{n_in} of {len(judged)} studies (the baseline column) have the horizon check's ratio inside the "
                 f"study's interval of its own ratio (a study that picked its baseline has none: counted outside); "
                 + "; ".join(f"{NAMES.get(r.workload, r.workload)} {describe(r)}" for r in readings) + "."),
        "details": {"inside": n_in, "studies": len(judged), "failed": len(readings) - len(judged)},
    })
    return out


# --- running what a user runs ------------------------------------------------------------------------------------


def log(t0: float, msg: str) -> None:
    print(f"[horizon {time.perf_counter() - t0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def tuner(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """A fresh `python -m tuner ...` process, and its wall time."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tuner", *args], cwd=REPO, env=env, capture_output=True, text=True)
    return proc, time.perf_counter() - t


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:400] if lines else "no message"


def space_file(case: Case, work: Path) -> Path:
    doc = {"description": f"horizon benchmark, {NAMES[case.key]}: time to the baseline's target",
           "defaults": {"budget": {"samples": case.budget_samples}, "trials": case.trials},
           "objectives": ["time_to_target"], **SPACE}
    path = work / f"{case.key}-space.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_case(case: Case, seed: int, work: Path, t0: float) -> Reading:
    """One study and its horizon check; what horizon.json says, or why there is none."""
    reports, study = work / "reports", f"{case.key}-s{seed}"
    args = ["search", "--space", str(space_file(case, work)), "--workload", case.workload, "--study", study,
            "--reports-dir", str(reports), "--target", "baseline", "--eval-every-samples", str(case.eval_every),
            "--no-probe", "--seed", str(seed), "--format", "json"]
    for o in case.options:
        args += ["-o", o]
    log(t0, f"{NAMES[case.key]} seed {seed}: tuner search ({case.trials} trials of {case.budget_samples:,} samples)")
    proc, study_s = tuner(*args)
    if proc.returncode != 0:
        return Reading(case.key, seed, failed=f"search exited {proc.returncode}: {last_line(proc.stderr)}",
                       study_s=study_s)
    try:
        said = json.loads(proc.stdout).get("verdict") or {}
    except ValueError:
        said = {}
    verdict = str(said.get("text", ""))
    if said.get("trial") is not None and said.get("trial") == said.get("baseline"):
        return Reading(case.key, seed, skipped="the study picked its baseline", verdict=verdict, study_s=study_s)
    horizon = f"{HORIZON_X * case.budget_samples}samples"
    log(t0, f"{NAMES[case.key]} seed {seed}: study {study_s:.0f} s; tuner export --horizon {horizon}")
    proc, horizon_s = tuner("export", study, "--horizon", horizon, "--horizon-seeds", str(HORIZON_SEEDS),
                            "--reports-dir", str(reports), "--out", str(work / f"{study}-best.yaml"))
    if proc.returncode != 0:
        why = last_line(proc.stderr)
        return Reading(case.key, seed, failed=f"export --horizon exited {proc.returncode}: {why}", verdict=verdict,
                       study_s=study_s, horizon_s=horizon_s)
    return from_folder(reports / study, case.key, seed, verdict, study_s, horizon_s)


def from_folder(study_dir: Path, key: str, seed: int, verdict: str = "", study_s: float = 0.0,
                horizon_s: float = 0.0) -> Reading:
    """The reading of a study's horizon check, from its folder's horizon.json (tuner.study.read_horizon)."""
    from tuner.study import read_horizon

    check = read_horizon(study_dir)
    if check is None:
        return Reading(key, seed, failed="export --horizon wrote no horizon.json", verdict=verdict, study_s=study_s,
                       horizon_s=horizon_s)
    return Reading(key, seed, ratio=check.ratio, low=check.low, high=check.high, word=check.word,
                   study_ratio=check.study_ratio, study_low=check.study_low, study_high=check.study_high,
                   key=check.key, verdict=verdict, target=f"{check.metric} {check.target:.4g} ({check.target_source})",
                   study_s=study_s, horizon_s=horizon_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="vae only, 1 seed, tiny budgets (~3 min): a smoke test")
    ap.add_argument("--seeds", type=int, default=None, help="study seeds a workload (default 4; 1 with --quick)")
    ap.add_argument("--only", default=None, help="comma-separated workloads of: lm, vae")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (the studies) and say where")
    ap.add_argument("--out", type=Path, default=None,
                    help="default benchmarks/results (reports/benchmarks/horizon with --quick)")
    args = ap.parse_args()
    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA
    from tuner.files import json_safe

    mode = "quick" if args.quick else "full"
    sizes = CASES[mode]
    if args.only:
        sizes = {k: sizes[k] for k in args.only.split(",") if k in sizes}
    seeds = args.seeds or (1 if args.quick else 4)
    out_dir = args.out or (REPO / ("reports/benchmarks/horizon" if args.quick else "benchmarks/results"))
    t0 = time.perf_counter()
    load0 = _loadavg() or []
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    commit, dirty = git_state()
    work = Path(tempfile.mkdtemp(prefix="tuner-horizon-bench-"))
    readings: list[Reading] = []
    try:
        for seed in range(seeds):  # seed-major: a drift in the machine's load touches both workloads alike
            for case in sizes.values():
                try:
                    readings.append(run_case(case, seed, work, t0))
                except Exception as err:  # noqa: BLE001 - a case that cannot run is a reading that says why
                    readings.append(Reading(case.key, seed, failed=f"{type(err).__name__}: {err}"))
                log(t0, describe(readings[-1]))
    finally:
        if args.keep:
            log(t0, f"kept the studies under {work / 'reports'}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    found = rows(readings, sizes)
    machine = f"{cpu_model()} ({os.cpu_count()} cores, no GPU)"
    for r in found:
        r.update({"commit": commit, "dirty": dirty, "date": date, "machine": machine,
                  "load": load0 + (_loadavg() or [])})
    doc = {"schema": SCHEMA, "quick": args.quick, "seeds": seeds, "rows": found, "date": date, "machine": machine,
           "seconds": round(time.perf_counter() - t0, 1)}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "horizon.json"
    path.write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    for r in found:
        print(f"{r['id']}: {r['figure']} (target {r['target']['text']}); {r['note']}")
    log(t0, f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
