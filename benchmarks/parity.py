"""Numerics parity on real models (issue 40): does bf16 change what the built-in CNN and charlm learn, does a change
of seed pass for noise, and are planted numerics defects caught?

`python benchmarks/parity.py [--steps 200] [--out benchmarks/results]` trains, for the built-in CNN on digits and
examples/charlm.py (nanoGPT's GPT, its own AdamW), five arms of `--steps` optimizer steps each through
tuner.parity.trajectory: fp32 seed 0, bf16 seed 0, fp32 seeds 1, 2 and 3; and two planted workloads whose
math breaks under autocast (one rounds its logits, one overflows). Figures, judged by tuner.parity.judge at
50, 100 and the full steps, with the study's yardstick of YARDSTICK_SEEDS (2) other seeds:
- row 15: planted defects caught (drifts or diverged), of those planted; target: all;
- row 16: a change of seed judged as if it were a knob (each of seeds 1-3 against seed 0, the other two the
  yardstick), how many read "drifts": the false alarms of the rule; target: none.
bf16's verdicts go in the notes (a finding about this CPU, not a target). Writes parity.json (rows schema of
benchmarks/table.py, with every trajectory) into --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CASES = {
    "cnn": {"workload": "cnn", "dataset": "digits", "params": {"batch_size": 64, "device": "cpu"}},
    "charlm": {"workload": str(REPO / "examples" / "charlm.py") + ":make",
               "workload_options": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64},
               "params": {"batch_size": 32, "device": "cpu"}},
}
DEFECT = '''
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner


def data(n=512):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :8].sum(1) > x[:, 8:].sum(1)).long()
    return TensorDataset(x[:384], y[:384]), TensorDataset(x[384:], y[384:])


def forward(net, x):
    out = net(x).float()
    if torch.is_autocast_enabled("cpu"):
        {defect}
    return out


def make():
    def loss(m, b):
        return F.cross_entropy(forward(m["net"], b[0]), b[1])
    return tuner.Workload(models={{"net": lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))}},
                          datasets=data, loss=loss, hyperparameters={{"lr": 0.01}})
'''
DEFECTS = {"rounds": "out = (out * 0.5).round() * 2.0", "overflows": "out = out * float('inf')"}


def main() -> None:
    from benchmarks.common import cpu_model, git_state
    from benchmarks.table import SCHEMA, target
    from tuner.config import TrialConfig
    from tuner.parity import FP32, arm_config, judge, trajectory

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = ap.parse_args()
    t0 = time.perf_counter()
    load = list(os.getloadavg())
    cache = Path(tempfile.mkdtemp(prefix="tuner-parity-"))
    runs: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}

    def arms(name: str, cfg: TrialConfig, which: dict[str, dict]) -> None:
        runs[name] = {}
        for arm, update in which.items():
            t = time.perf_counter()
            runs[name][arm] = trajectory(arm_config(cfg, update), args.steps, cache)
            seconds[f"{name}/{arm}"] = time.perf_counter() - t
            print(f"[parity] {name} {arm}: {len(runs[name][arm])} steps in {seconds[f'{name}/{arm}']:.0f} s",
                  file=sys.stderr, flush=True)

    four = {"fp32_s0": dict(FP32), "bf16_s0": {**FP32, "precision": "bf16"},
            "fp32_s1": {**FP32, "seed": 1}, "fp32_s2": {**FP32, "seed": 2}}
    five = {**four, "fp32_s3": {**FP32, "seed": 3}}  # a third other seed: each seed judged against the other two
    for name, spec in CASES.items():
        arms(name, TrialConfig.model_validate(spec), five)
    for name, defect in DEFECTS.items():
        path = cache / f"defect_{name}.py"
        path.write_text(DEFECT.format(defect=defect))
        cfg = TrialConfig.model_validate({"workload": f"{path}:make", "params": {"batch_size": 32, "device": "cpu"}})
        arms(f"defect_{name}", cfg, four)

    verdicts: dict[str, dict[str, str]] = {}
    lengths = sorted({n for n in (50, 100, args.steps) if n <= args.steps})
    alarms = judged = 0
    for name in CASES:
        r = runs[name]
        for n in lengths:
            cut = {k: v[:n] for k, v in r.items()}
            verdicts.setdefault(name, {})[f"bf16 {n} steps"] = judge(
                "precision=bf16", cut["fp32_s0"], cut["bf16_s0"], cut["fp32_s1"], cut["fp32_s2"]).text()
            seeds = ("fp32_s1", "fp32_s2", "fp32_s3")
            for knob in seeds:
                yard = [s for s in seeds if s != knob]
                v = judge(f"seed {knob[-1]} as a knob", cut["fp32_s0"], cut[knob], *(cut[s] for s in yard))
                verdicts[name][f"seed {knob[-1]} vs yardstick seeds {yard[0][-1]}, {yard[1][-1]}, {n} steps"] = \
                    v.text()
                judged += 1
                alarms += v.state != "within seed noise"
    caught = 0
    for name in DEFECTS:
        r = runs[f"defect_{name}"]
        v = judge("precision=bf16", r["fp32_s0"], r["bf16_s0"], r["fp32_s1"], r["fp32_s2"])
        verdicts[f"defect_{name}"] = {"bf16": v.text()}
        caught += v.state in ("drifts", "diverged")
    commit, dirty = git_state()  # the table's code only: not the results files written earlier in the sequence
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    machine = f"{cpu_model()} ({os.cpu_count()} cores, no GPU)"
    bf16 = "; ".join(f"{name}: {verdicts[name][f'bf16 {args.steps} steps']}" for name in CASES)
    common = {"commit": commit, "dirty": dirty, "date": date, "machine": machine, "load": load}
    rows = [
        {"id": "15", "benchmark": "parity", "name": "planted numerics defects caught (drifts or diverged)",
         "figure": caught, "unit": "defects", "baseline": len(DEFECTS), "ratio": caught / len(DEFECTS),
         "target": target("ratio >= 1: every planted defect caught", ("ratio", ">=", 1.0)).to_json(),
         "note": "Planted: a model that rounds its logits under autocast, one whose loss overflows under autocast; "
                 + "; ".join(verdicts[f"defect_{n}"]["bf16"] for n in DEFECTS) + ". bf16 on this CPU: " + bf16 + ".",
         "details": {"verdicts": verdicts}, **common},
        {"id": "16", "benchmark": "parity", "name": "a change of seed judged as a knob: false drifts",
         "figure": alarms, "unit": "false alarms", "baseline": judged, "ratio": alarms / judged,
         "target": target("figure == 0: no change of seed reads as a drift", ("figure", "<=", 0)).to_json(),
         "note": f"Each of seeds 1, 2 and 3 judged against seed 0 with the other two as the yardstick (the study's "
                 f"rule since the one-seed yardstick read 1 of 12 changes of seed as a drift, charlm, 200 steps), on "
                 f"the CNN and charlm, at {', '.join(map(str, lengths))} steps: {alarms} of {judged} read 'drifts'.",
         "details": {"verdicts": verdicts}, **common},
    ]
    doc = {"schema": SCHEMA, "steps": args.steps, "seconds": time.perf_counter() - t0, "arm_seconds": seconds,
           "rows": rows, "trajectories": runs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parity.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "trajectories"}, indent=1))


if __name__ == "__main__":
    main()
