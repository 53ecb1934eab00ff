"""Live benchmark (issue 20): the default study with `--scheduler fifo` and with `--scheduler asha`, the same
wall-time allowance (`--study-seconds`), one run each, one after the other, as a user runs them (a fresh
`tuner search` process each).

Figures, side by side: trials started / stopped / complete, both fronts' hypervolume against one common
reference (the union of both studies' complete top-rung trials, normalised together: throughput up, quality
down; the reference point 10% beyond the union's worst on each axis, as in benchmarks/metrics.py), and the
exported config's (the knee pick's) confirmed throughput and quality. The load average is sampled while each study
runs: on a shared machine a single run says what happened in that run, not what would happen on a quiet one.

    python benchmarks/live_scheduler.py                        # ~2 x (420 s + margin); caches built first
    python benchmarks/live_scheduler.py --study-seconds 300 --reports-dir /tmp/live
Writes benchmarks/results/live-scheduler.{json,md} (or --out DIR). Row live-asha (benchmarks/table.py schema, in
the same JSON with the commit it ran at): asha's front hypervolume over fifo's in the same allowance, target >= 0.9
(the scheduler's stops cost the front nothing beyond one run's noise), and at least one trial stopped (else the
pair compared two fifo studies).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python benchmarks/live_scheduler.py` from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks.metrics import REF, Normalizer, hypervolume_2d  # noqa: E402 - after the path fix above

RESULTS = REPO / "benchmarks" / "results"
SCHEDULERS = ("fifo", "asha")
# The default study (12 trials of 15 s, probes, 4 confirmation re-runs) takes about 300 s on a quiet 2-core
# machine; 420 s holds it with room under load, and lets asha start as many more trials as its stops free.
STUDY_SECONDS = 420.0
HV_FLOOR = 0.9  # live-asha: asha's front hypervolume at least 0.9x fifo's at the same wall time


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def prewarm(cache_dir: Path) -> float:
    """Build the one-time caches (digits PNGs, the FID classifier and real-image statistics) outside the timed
    studies, so the first study does not pay for them."""
    from tuner.config import parse_config
    from tuner.train import run_trial

    t = time.perf_counter()
    cfg = parse_config({"workload": "gan", "dataset": "digits", "budget": {"samples": 64},
                        "params": {"batch_size": 16}, "measure": {"warmup_steps": 0, "windows": 1}}, "prewarm")
    run_trial(cfg, cache_dir=cache_dir)
    return time.perf_counter() - t


def run_study(scheduler: str, seconds: float, reports: Path, extra: list[str]) -> dict[str, Any]:
    """One `tuner search --space amp_loader --scheduler S --study-seconds T` in a fresh process, the load average
    sampled every 10 s while it runs."""
    study = f"live-{scheduler}-{time.strftime('%Y%m%d-%H%M%S')}"
    args = ["--space", "amp_loader", "--study", study, "--scheduler", scheduler, "--study-seconds", f"{seconds:g}",
            "--reports-dir", str(reports), "--format", "json", *extra]
    log(f"tuner search {' '.join(args)}")
    loads = [os.getloadavg()[0]]
    start = time.perf_counter()
    with open(reports / f"{study}.stderr", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tuner", "search", *args], stdout=subprocess.PIPE,
                                stderr=err, text=True, env=_env(), cwd=REPO)
        while True:
            try:
                out, _ = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                loads.append(os.getloadavg()[0])
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (reports / f"{study}.stderr").read_text().strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"study {study} failed (exit {proc.returncode}): {tail[0]}")
    summary = json.loads(out)
    log(f"  {study}: {wall:.0f} s, load {min(loads):.1f}-{max(loads):.1f}")
    return {"study": study, "scheduler": scheduler, "wall_s": round(wall, 1), "summary": summary,
            "load": {"mean": round(sum(loads) / len(loads), 2), "min": round(min(loads), 2),
                     "max": round(max(loads), 2), "samples": len(loads)}}


def study_figures(run: dict[str, Any], reports: Path) -> dict[str, Any]:
    """What one study did, from its folder (tuner.study's public API): trial counts, its complete top-rung
    points, the allowance study.json recorded, and the exported (knee) trial's confirmed figures."""
    from tuner.study import StudyFolder
    from tuner.analysis import Study

    study = Study.load(StudyFolder(reports / run["study"]))
    thr, quality = study.objectives[0], study.objectives[1]
    states = study.state_counts()
    points = [(r.trial, r.value(thr.metric), r.value(quality.metric)) for r in study.records if r.complete]
    points = [(n, x, y) for n, x, y in points if x is not None and y is not None]
    verdict = run["summary"].get("verdict") or {}
    pick = next((r for r in study.records if r.trial == verdict.get("trial")), None)
    exported: dict[str, Any] | None = None
    if pick is not None:
        exported = {"trial": pick.trial, "params": pick.params, "confirmed": pick.confirmed is not None,
                    "search": {thr.metric: pick.value(thr.metric), quality.metric: pick.value(quality.metric)}}
        if pick.confirmed is not None:
            exported["confirmed_figures"] = {
                m: {"centre": f.centre, "low": f.low, "high": f.high, "runs": len(f.values)}
                for m, f in pick.confirmed.figures.items() if m in (thr.metric, quality.metric)}
        exported["vs_baseline"] = verdict.get("ratio")
    return {"study": run["study"], "scheduler": run["scheduler"], "wall_s": run["wall_s"], "load": run["load"],
            "allowance": study.meta.allowance, "started": len(study.records),
            "stopped": states.get("stopped", 0), "complete": states.get("complete", 0), "states": states,
            "reruns": sum(len(study.folder.reruns(r.trial)) for r in study.records),
            "metrics": [thr.metric, quality.metric], "minimize_quality": not quality.maximize,
            "points": [{"trial": n, thr.metric: x, quality.metric: y} for n, x, y in points], "exported": exported}


def hypervolumes(studies: list[dict[str, Any]]) -> None:
    """Each study's front hypervolume, normalised over the union of both studies' complete points (one common
    reference), also as a fraction of the union's own hypervolume."""
    thr, q = studies[0]["metrics"]
    union = [(p[thr], p[q]) for s in studies for p in s["points"]]
    if not union:
        for s in studies:
            s["hv"] = s["hv_fraction"] = None
        return
    norm = Normalizer(union, minimize_second=studies[0]["minimize_quality"])
    total = hypervolume_2d([norm(p) for p in union], REF)
    for s in studies:
        hv = hypervolume_2d([norm((p[thr], p[q])) for p in s["points"]], REF)
        s["hv"] = round(hv, 4)
        s["hv_fraction"] = round(hv / total, 3) if total > 0 else None


def _fig(e: dict[str, Any] | None, metric: str, digits: int) -> str:
    if e is None:
        return "-"
    c = (e.get("confirmed_figures") or {}).get(metric)
    if c is not None and c.get("low") is not None and c.get("high") is not None:
        return f"{c['centre']:.{digits}f} ({c['low']:.{digits}f}-{c['high']:.{digits}f})"
    if c is not None:
        return f"{c['centre']:.{digits}f} ({c['runs']} re-run{'s' if c['runs'] != 1 else ''})"
    v = e["search"].get(metric)
    return "-" if v is None else f"{v:.{digits}f} (one reading)"


def markdown(doc: dict[str, Any]) -> str:
    thr, q = doc["studies"][0]["metrics"]
    lines = [f"# Live scheduler benchmark: the default study, fifo vs asha, {doc['study_seconds']:g} s each",
             "", f"Measured {doc['date']} on {doc['machine']}; one run each, one after the other.", "",
             f"| scheduler | wall s | load avg (min-max) | trials started | stopped | complete | hypervolume (common ref) "
             f"| share of union HV | exported trial | its confirmed {thr} | its confirmed {q} |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in doc["studies"]:
        e = s["exported"]
        lines.append(f"| {s['scheduler']} | {s['wall_s']:.0f} | {s['load']['mean']:.1f} ({s['load']['min']:.1f}-"
                     f"{s['load']['max']:.1f}) | {s['started']} | {s['stopped']} | {s['complete']} | "
                     f"{s['hv'] if s['hv'] is not None else '-'} | {s['hv_fraction'] if s['hv_fraction'] is not None else '-'} | "
                     f"{e['trial'] if e else '-'} | {_fig(e, thr, 0)} | {_fig(e, q, 2)} |")
    lines += ["", doc["reading"], ""]
    return "\n".join(lines)


def reading(studies: list[dict[str, Any]]) -> str:
    """One sentence: which scheduler this run favours, on which figure."""
    by = {s["scheduler"]: s for s in studies}
    f, a = by.get("fifo"), by.get("asha")
    if f is None or a is None or f["hv"] is None or a["hv"] is None:
        return "Not both studies produced complete trials: no comparison."
    hv = "higher" if a["hv"] > f["hv"] else "lower" if a["hv"] < f["hv"] else "equal"
    return (f"asha started {a['started']} trials ({a['stopped']} stopped, {a['complete']} complete) against fifo's "
            f"{f['started']} ({f['complete']} complete) in the same allowance; its front's hypervolume is {hv} "
            f"({a['hv']} vs {f['hv']}, common reference). One run each on a shared machine: a direction, not a rate.")


def rows(studies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The published row (benchmarks/table.py schema) from both studies' figures: live-asha, asha's front
    hypervolume over fifo's (one common reference) in the same allowance, and the trials asha stopped."""
    from benchmarks.table import target

    by = {s["scheduler"]: s for s in studies}
    f, a = by.get("fifo"), by.get("asha")
    if f is None or a is None:
        return []
    hv_a, hv_f = a.get("hv"), f.get("hv")
    return [{
        "id": "live-asha", "benchmark": "live_scheduler",
        "name": "default study, the same wall time: asha's front hypervolume vs fifo's (one run each)",
        "figure": hv_a, "unit": "HV", "baseline": hv_f, "ratio": hv_a / hv_f if hv_a is not None and hv_f else None,
        "target": target(f"ratio >= {HV_FLOOR:g} and asha stopped >= 1 trial", ("ratio", ">=", HV_FLOOR),
                         ("stopped", ">=", 1)).to_json(),
        "note": reading(studies) + (f" Wall time fifo {f['wall_s']:.0f} s (load {f['load']['mean']:.1f}), asha "
                                    f"{a['wall_s']:.0f} s (load {a['load']['mean']:.1f})."),
        "details": {"stopped": a.get("stopped"), "started": {"fifo": f.get("started"), "asha": a.get("started")},
                    "hv_fraction": {"fifo": f.get("hv_fraction"), "asha": a.get("hv_fraction")}},
    }]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study-seconds", type=float, default=STUDY_SECONDS)
    ap.add_argument("--reports-dir", type=Path, default=REPO / "reports" / "benchmarks" / "live")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where live-scheduler.{json,md} go")
    ap.add_argument("--only", choices=SCHEDULERS, action="append", help="run one scheduler (repeatable)")
    ap.add_argument("extra", nargs="*", help="more `tuner search` arguments after --, e.g. -- --seed 1")
    args = ap.parse_args(argv)
    reports = args.reports_dir.resolve()
    reports.mkdir(parents=True, exist_ok=True)
    log(f"caches: {prewarm(reports / '.cache'):.1f} s (one-time per machine)")
    runs = [run_study(s, args.study_seconds, reports, args.extra) for s in (args.only or SCHEDULERS)]
    studies = [study_figures(r, reports) for r in runs]
    hypervolumes(studies)
    import datetime as dt
    import platform

    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA

    commit, dirty = git_state()
    found = rows(studies)
    for r in found:
        r.update({"commit": commit, "dirty": dirty, "load": _loadavg() or [],
                  "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  "machine": f"{cpu_model()} ({os.cpu_count()} cores)"})
    doc = {"schema": SCHEMA, "benchmark": "live-scheduler", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "study_seconds": args.study_seconds,
           "commit": commit, "dirty": dirty, "studies": studies, "reading": reading(studies), "rows": found}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "live-scheduler.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (args.out / "live-scheduler.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
