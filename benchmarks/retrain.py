"""Do a study's numbers hold when its export is re-trained? (issue 18, "Done when")

`python benchmarks/retrain.py [--cases charlm,resnet,gan64] [--trials 3] [--out DIR]` runs, for each model, what a
user runs, each command a fresh process through the CLI:

    tuner search --workload W --trials 3 --budget-seconds B     (amp_loader, or loader for SGD; --confirm 1)
    tuner export STUDY --out best.yaml
    tuner train --config best.yaml --format json

and records (1) whether the re-trained throughput lies inside the exported trial's confirmed interval (of the
mean) and inside the interval for one run (the prediction interval the export's header gives), (2) each
trial's wall time against its budget plus the stated margin (budget + 10% + 2 steps; a study that refused names
the budget it needs instead), (3) whether the baseline trained with the workload's own declared optimizer
settings, and (4) whether the exported trial is a confirmed one. The models are the examples written after
models nobody here wrote: examples/charlm.py (nanoGPT's GPT, its own AdamW groups), examples/resnet.py (torchvision's
resnet18 at 32x32) and the built-in GAN at pytorch/examples' DCGAN size (64x64, width 64). Prints one JSON document
and writes retrain.json / retrain.md under --out (default benchmarks/results). Run it on a quiet machine: a
confirmed interval is only as narrow as the machine is steady.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python benchmarks/retrain.py` from a checkout: its row goes through benchmarks.table
    sys.path.insert(0, str(REPO))

# name: (workload, options, per-trial budget in seconds, space: resnet's SGD has no betas for amp_loader to search)
CASES: dict[str, tuple[str, list[str], float, str]] = {
    "charlm": ("examples/charlm.py:make", ["block_size=64", "n_layer=4", "n_head=4", "n_embd=128"], 20.0, "amp_loader"),
    "resnet": ("examples/resnet.py:make", [], 30.0, "amp_loader without betas"),
    "gan64": ("gan", ["image_size=64", "width=32"], 30.0, "amp_loader"),
    "gan": ("gan", [], 5.0, "amp_loader"),  # the built-in at 32x32: a quick check of the script itself
}


def tuner(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tuner", *args], cwd=REPO, env=env, capture_output=True,
                          text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"tuner {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    return proc


def load_average() -> float:
    return os.getloadavg()[0]


def space_arg(space: str, reports: Path) -> str:
    """A bundled space's name, or "amp_loader without betas": the default space less Adam's betas, for a workload
    whose own optimizer has none (resnet's SGD), written as a YAML file the way a user would."""
    if space != "amp_loader without betas":
        return space
    doc = yaml.safe_load((REPO / "search_spaces" / "amp_loader.yaml").read_text())
    for name in ("beta1", "beta2"):
        doc["params"].pop(name, None)
    doc["description"] = "amp_loader without Adam's betas (an SGD workload)"
    path = reports / "amp_loader_sgd.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def run_case(name: str, trials: int, reports: Path) -> dict[str, Any]:
    workload, options, budget, space = CASES[name]
    opts = [x for o in options for x in ("-o", o)]
    out: dict[str, Any] = {"case": name, "workload": workload, "options": options, "budget_seconds": budget, "space": space,
                           "load_before": load_average()}
    t0 = time.perf_counter()
    search = tuner("search", "--space", space_arg(space, reports), "--workload", workload, *opts, "--trials", str(trials),
                   "--budget-seconds", str(budget), "--study", name, "--reports-dir", str(reports),
                   "--format", "json", check=False)
    out["search_seconds"] = time.perf_counter() - t0
    if search.returncode != 0:  # a refusal names the budget it needs: that is an answer too
        out.update(search_exit=search.returncode, search_refusal=search.stderr.strip().splitlines()[-1:])
        return out
    report = tuner("report", name, "--reports-dir", str(reports), "--format", "json")
    trials_json = json.loads(report.stdout)["trials"]
    best = reports / f"{name}.yaml"
    tuner("export", name, "--reports-dir", str(reports), "--out", str(best))
    picked = int(yaml.safe_load(best.read_text())["provenance"]["trial"])
    t1 = time.perf_counter()
    proc = tuner("train", "--config", str(best), "--reports-dir", str(reports), "--format", "json", check=False)
    out["train_seconds_wall"] = time.perf_counter() - t1
    out["load_after"] = load_average()
    if proc.returncode != 0:
        out.update(picked_trial=picked, train_exit=proc.returncode, train_refusal=proc.stderr.strip().splitlines()[-1:])
        return out
    train = json.loads(proc.stdout)

    walls = []
    for t in trials_json:
        m = t.get("metrics") or t
        wall, step = m.get("wall_seconds"), m.get("step_seconds") or 0.0
        if wall is None:
            continue
        limit = budget * 1.10 + 2 * step + float(m.get("compile_seconds") or 0.0)
        walls.append({"trial": t["trial"], "state": t["state"], "wall_seconds": wall, "limit": limit,
                      "within": wall <= limit})
    base = next((t for t in trials_json if t["trial"] == 0), None)
    pick = next(t for t in trials_json if t["trial"] == picked)
    conf = (pick.get("confirmed") or {}).get("figures", {}).get("throughput")
    got = train.get("throughput") if "throughput" in train else (train.get("metrics") or {}).get("throughput")
    out.update(
        picked_trial=picked, picked_confirmed=conf is not None,
        confirmed_throughput=conf and {k: conf.get(k) for k in ("centre", "low", "high", "rerun_low", "rerun_high")},
        retrained_throughput=got,
        retrained_inside=bool(conf and got is not None and conf["low"] <= got <= conf["high"]),
        retrained_inside_one_run=bool(conf and got is not None and conf.get("rerun_low") is not None
                                      and conf["rerun_low"] <= got <= conf["rerun_high"]),
        walls=walls, walls_within=all(w["within"] for w in walls),
        baseline_optimizer=base and base.get("optimizer"),
    )
    return out


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# Re-training the export ({doc['when']}, load average {doc['load_start']:.1f} at start)", "",
             "| model | budget | pick | confirmed mean, 95% (samples/s) | one run, 95% | re-trained | inside (mean / one run) "
             "| trials within budget + margin |",
             "|---|---|---|---|---|---|---|---|"]
    for c in doc["cases"]:
        refusal = c.get("search_refusal") or c.get("train_refusal")
        if refusal:
            which = "search" if "search_refusal" in c else "train"
            lines.append(f"| {c['case']} | {c['budget_seconds']:g} s | {which} refused: {' '.join(refusal)} | | | | |")
            continue
        ci = c["confirmed_throughput"]
        iv = f"{ci['centre']:.0f} [{ci['low']:.0f}, {ci['high']:.0f}]" if ci else "not confirmed"
        one = f"[{ci['rerun_low']:.0f}, {ci['rerun_high']:.0f}]" if ci and ci.get("rerun_low") else "-"
        got = c["retrained_throughput"]
        within = sum(w["within"] for w in c["walls"])
        worst = max((w["wall_seconds"] / c["budget_seconds"] for w in c["walls"]), default=0.0)
        lines.append(f"| {c['case']} | {c['budget_seconds']:g} s | trial {c['picked_trial']} | {iv} | {one} | "
                     f"{got:.0f} | {'yes' if c['retrained_inside'] else 'NO'} / "
                     f"{'yes' if c.get('retrained_inside_one_run') else 'NO'} | {within}/{len(c['walls'])} "
                     f"(longest {worst:.2f}x the budget) |")
    return "\n".join(lines) + "\n"


def all_cases(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every re-training the file records: this run's cases and those of earlier runs kept beside them."""
    found = list(doc.get("cases") or [])
    for value in doc.values():
        if isinstance(value, dict) and isinstance(value.get("cases"), list):
            found += all_cases(value)
    return found


def rows(doc: dict[str, Any], commit: str | None, date: str, dirty: bool = False) -> dict[str, Any]:
    """Row 13 of the table, over every re-training in the file (not its first run only)."""
    from benchmarks.table import SCHEMA, target

    cases = [c for c in all_cases(doc) if c.get("retrained_throughput") is not None]
    one_run = sum(1 for c in cases if c.get("retrained_inside_one_run"))
    mean = sum(1 for c in cases if c.get("retrained_inside"))
    text = "ratio >= 0.8: at least 4 in 5 re-trainings inside the exported one-run interval"
    return {"schema": SCHEMA, "rows": [{
        "id": "13", "benchmark": "retrain", "name": "export re-trained inside its exported one-run interval",
        "figure": one_run, "unit": "re-trainings", "baseline": len(cases),
        "ratio": one_run / len(cases) if cases else None,
        "target": target(text, ("ratio", ">=", 0.8)).to_json(), "commit": commit, "dirty": dirty, "date": date,
        "machine": "", "load": [], "details": {"inside_confirmed_mean": mean, "cases": len(cases)},
        "note": (f"{len(cases)} re-trainings of exported configs (charlm, resnet, gan64; every run in "
                 f"benchmarks/results/retrain.json, not its first only): {one_run} inside the one-run (prediction) "
                 f"interval the export's header promises, {mean} inside the confirmed mean's interval (narrower: "
                 f"one re-training is one run, not a mean).")}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="charlm,resnet,gan64")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--merge", action="store_true", help="keep the other cases of an earlier retrain.json in --out")
    ap.add_argument("--keep", type=Path, default=None, help="keep the studies and exports in this folder")
    args = ap.parse_args()
    doc: dict[str, Any] = {"when": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                           "load_start": load_average(), "cases": []}
    with tempfile.TemporaryDirectory(prefix="tuner-retrain-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.cases.split(","):
            print(f"[retrain] {name} ...", file=sys.stderr, flush=True)
            doc["cases"].append(run_case(name, args.trials, work))
            print(f"[retrain] {name}: {json.dumps(doc['cases'][-1], default=str)[:400]}", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    earlier = args.out / "retrain.json"
    if args.merge and earlier.is_file():
        ran = {c["case"] for c in doc["cases"]}
        kept = [c for c in json.loads(earlier.read_text())["cases"] if c["case"] not in ran]
        doc["cases"] = kept + doc["cases"]
    (args.out / "retrain.json").write_text(json.dumps(doc, indent=1, default=str))
    (args.out / "retrain.md").write_text(markdown(doc))
    from benchmarks.common import git_state

    commit, dirty = git_state()  # the table's code only (benchmarks.table.CODE), as every benchmark's rows
    (args.out / "retrain-rows.json").write_text(json.dumps(rows(doc, commit, dt.datetime.now(
        dt.timezone.utc).isoformat(timespec="seconds"), dirty), indent=1))
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
