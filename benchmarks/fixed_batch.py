"""Benchmark 17, fixed effective batch (issue 40): splitting one effective batch into micro-batches x accumulation
steps leaves what is learned alone where the model has no batch statistics, while the throughput moves with the
split; where it has them (BatchNorm), the study must say the split is a learning knob.

`python benchmarks/fixed_batch.py [--quick] [--steps 80] [--rounds 3] [--out DIR]` trains the
default effective batch (tuner.config.Params: 64 x 1) and its splits 32 x 2, 16 x 4, 8 x 8 for `--steps` optimizer
steps each, from seed 0 on the same batches (tuner.train.trial.build_training, loading in-process as the parity
check does), beside 64 x 1 from seed 1 (the seed noise), then scores each on the validation split (equal samples:
every step is 64 samples). The whole training split is used: tuner's loader drops each epoch's remainder in whole
effective batches (tuner.data.loader), so on digits' 1438 samples every split trains on the same 1408 each epoch (it
once dropped only the incomplete micro-batch: 16 x 4 kept 16 samples 64 x 1 dropped, trained on other batches from
the second epoch on, and its trajectory parted from 64 x 1's as a change of seed does).
Two models on digits:
- `cnn, BatchNorm removed`: the built-in CNN with its two BatchNorm2d layers replaced by identities (same weights
  otherwise): no batch statistics, so every split is the same gradient up to rounding;
- `cnn`: the built-in CNN as shipped, which normalizes by batch statistics (BatchNorm2d after each conv).
Each split's loss trajectory is judged against 64 x 1 by the parity statistic (tuner.parity.judge, seed 1
as the yardstick). The shipped CNN's throughput is then read per split by tuner trials (tuner.train.run_trial, a
seconds budget, quality and ceilings off) in interleaved rounds, the splits' order rotated each round.
Rows 17a-17c (rows schema of benchmarks/table.py; benchmarks/README.md says what each shows) go into
fixed-batch.json, and fixed-batch.md is generated from it. Quick (`--quick`): 24 steps, 2 rounds, 1.5 s trials,
written under reports/benchmarks/fixed-batch/ (it checks the code; its figures mean little).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.table import SCHEMA, target  # noqa: E402

SPLIT_FACTORS = (1, 2, 4, 8)  # accumulation steps of the splits measured: 64 x 1 down to micro-batches of 8
# Exactness is read on the first EARLY steps, before rounding's differences compound (measured here, 80 steps on the
# CNN without BatchNorm: ~1e-7 of the loss over the first 10, ~1e-4 by step 80; with BatchNorm 6e-3 to 2e-2 over the
# first 10; another seed 2e-2).
EARLY = 10
EXACT = 1e-4  # the largest gap of a step's loss, relative to 64 x 1's, that still counts as rounding
INEXACT = 1e-3  # a gap above this is no rounding: the split changed what was computed
WORKLOADS = '''
"""The built-in CNN, as shipped or without BatchNorm (benchmarks/fixed_batch.py)."""
from dataclasses import replace

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from tuner.builtin.cnn import make as builtin_cnn


def shipped(dataset="digits"):
    return builtin_cnn(dataset)


def no_batchnorm(dataset="digits"):
    cnn = builtin_cnn(dataset)
    build = cnn.models["net"]

    def net():
        model = build()
        model.body = nn.Sequential(*(nn.Identity() if isinstance(m, _BatchNorm) else m for m in model.body))
        return model

    return replace(cnn, models={"net": net}, name="cnn without BatchNorm")
'''


@dataclass
class Arm:
    """One arm's run: the mean training loss of each optimizer step, then its validation figures."""

    losses: list[float]
    val_loss: float | None
    accuracy: float | None
    seconds: float
    train_size: int
    batch_stat_layers: list[str] = field(default_factory=list)


@dataclass
class CaseParity:
    """Every split of one model judged against its 64 x 1 run: what the rows of a case read."""

    verdicts: dict[str, str]  # split label -> the parity verdict's line
    states: dict[str, str]  # split label -> within seed noise / drifts / diverged
    step_gap: dict[str, float]  # split label -> largest |loss - 64 x 1's| / 64 x 1's over the first EARLY steps
    seed_step_gap: float  # the same for 64 x 1 from another seed: what a gap that is not rounding looks like
    run_gap: dict[str, float]  # split label -> the same over every step (rounding compounds: for the note)
    seed_gap: float | None  # the parity statistic's seed-to-seed gap (the yardstick)
    val_loss: dict[str, float | None]  # every arm's validation loss after the same samples
    layers: list[str]
    train_size: int  # the training split's samples (the loader keeps whole effective batches of it each epoch)

    @property
    def within(self) -> int:
        return sum(s == "within seed noise" for s in self.states.values())

    def val_gaps(self) -> tuple[dict[str, float | None], float | None]:
        """|validation loss - 64 x 1's| per split, and the same for the other seed (the yardstick)."""
        ref_label, *rest = self.val_loss
        ref = self.val_loss[ref_label]
        gaps = {k: None if ref is None or self.val_loss[k] is None else abs(self.val_loss[k] - ref) for k in rest}
        others = [k for k in rest if k not in self.states]
        return {k: gaps[k] for k in self.states}, gaps[others[0]] if others else None


def split_labels(effective: int) -> list[tuple[str, int, int]]:
    """(label, micro-batch, accumulation) of the splits of `effective` measured, 64 x 1 first."""
    return [(f"{effective // a}x{a}", effective // a, a) for a in SPLIT_FACTORS if effective % a == 0]


def judge_case(arms: dict[str, Arm], labels: list[str], other_seed: str) -> CaseParity:
    """The parity verdict of every split (labels[1:]) against labels[0] (same seed), with `other_seed` as the
    yardstick, and the largest per-step gap over the first EARLY finite steps both trained (a run that diverged
    reads `diverged` in its verdict)."""
    from tuner.parity import judge

    ref = arms[labels[0]]

    def gap(a: list[float], steps: int = EARLY) -> float:
        n = min(steps, next((i for i, x in enumerate(a) if not math.isfinite(x)), len(a)))
        return max((abs(x - r) / max(abs(r), 1e-12) for x, r in zip(a[:n], ref.losses)), default=0.0)

    verdicts, states, step_gap = {}, {}, {}
    seed_gap = None
    for label in labels[1:]:
        v = judge(label, ref.losses, arms[label].losses, arms[other_seed].losses)
        verdicts[label], states[label], step_gap[label] = verdict_line(v, labels[0]), v.state, gap(arms[label].losses)
        seed_gap = v.seed_gap if v.seed_gap is not None else seed_gap
    run_gap = {k: gap(arms[k].losses, len(ref.losses)) for k in labels[1:]}
    return CaseParity(verdicts, states, step_gap, gap(arms[other_seed].losses), run_gap, seed_gap,
                      {k: a.val_loss for k, a in arms.items()}, list(ref.batch_stat_layers), ref.train_size)


def verdict_line(v: Any, reference: str) -> str:
    """A split's parity verdict in words (ParityVerdict.text() speaks of fp32, the reference of a numerics knob)."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:.2g}%"

    if v.state == "diverged":
        return f"{v.knob}: diverged at step {v.from_step} of {v.steps}"
    if v.state == "drifts":
        return (f"{v.knob}: drifts by {pct(v.gap)} of the loss from step {v.from_step} against {reference} "
                f"(seed-to-seed {pct(v.seed_gap)})")
    return f"{v.knob}: within seed noise ({pct(v.gap)} of the loss against {reference}, seed-to-seed {pct(v.seed_gap)})"


def speed_figures(rounds: dict[str, list[float | None]]) -> dict[str, Any]:
    """Each split's median throughput over its rounds; the spread across splits (fastest / slowest median) and the
    noise (the largest fastest / slowest round of one split): the split moves throughput when the first exceeds the
    second."""
    medians = {k: statistics.median(v) for k, r in rounds.items() if (v := [x for x in r if x])}
    own = {k: max(v) / min(v) for k, r in rounds.items() if len(v := [x for x in r if x]) >= 2}
    across = max(medians.values()) / min(medians.values()) if len(medians) >= 2 else None
    noise = max(own.values()) if own else None
    return {"median": medians, "own_spread": own, "across": across, "noise": noise,
            "fastest": max(medians, key=medians.get) if medians else None,
            "slowest": min(medians, key=medians.get) if medians else None,
            "ratio": across / noise if across and noise else None}


def rows(exact: CaseParity, bn: CaseParity, speed: dict[str, Any], steps: int, rounds: int, budget_s: float,
         meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The three rows, from the figures alone (no training here: tests plant the figures)."""
    judged = len(exact.states)
    exact_verdicts, bn_verdicts = "; ".join(exact.verdicts.values()), "; ".join(bn.verdicts.values())

    def vals(c: CaseParity) -> str:
        return ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in c.val_loss.items())

    def gaps(c: CaseParity) -> str:
        return (f"over the first {EARLY} steps " + ", ".join(f"{k} {v:.1e}" for k, v in c.step_gap.items())
                + f" (another seed: {c.seed_step_gap:.1e}); over all {steps}: "
                + ", ".join(f"{k} {v:.1e}" for k, v in c.run_gap.items()))

    def details(c: CaseParity) -> dict[str, Any]:
        val_gap, seed_val_gap = c.val_gaps()
        return {**asdict(c), "batch_stat_layer_count": len(c.layers),
                "max_step_gap": max(c.step_gap.values(), default=None), "val_gap": val_gap,
                "seed_val_gap": seed_val_gap}

    def val_note(c: CaseParity) -> str:
        val_gap, seed_val_gap = c.val_gaps()
        shown = ", ".join(f"{k} {'-' if g is None else f'{g:.3f}'}" for k, g in val_gap.items())
        return (f"Validation loss after the same samples: {vals(c)}; a split's gap to {next(iter(c.val_loss))}: "
                f"{shown}, another seed's: {'-' if seed_val_gap is None else f'{seed_val_gap:.3f}'}.")

    exact_details, bn_details = details(exact), details(bn)
    med = speed["median"]
    return [
        {"id": "17a", "benchmark": "fixed_batch",
         "name": "no batch statistics: splits of 64 within seed noise (CNN)",
         "figure": exact.within, "unit": "splits", "baseline": judged,
         "ratio": exact.within / judged if judged else None,
         "target": target(f"ratio >= 1 (every split within seed noise), no batch-statistics layer, gap of the "
                          f"first {EARLY} steps' loss <= {EXACT:g} (rounding)",
                          ("ratio", ">=", 1.0), ("details.batch_stat_layer_count", "<=", 0),
                          ("details.max_step_gap", "<=", EXACT)).to_json(),
         "note": (f"The built-in CNN with its BatchNorm replaced by identities, {steps} optimizer steps of 64 samples "
                  f"from seed 0 at each split of 64, judged against 64x1 by the parity statistic (seed 1 as the "
                  f"yardstick): {exact_verdicts}. Each step's loss is off 64x1's by at most {gaps(exact)} (rounding "
                  f"compounds); the target's {EXACT:g} is rounding's allowance. On the whole training split "
                  f"({exact.train_size} samples) every split sees the same batches: tuner's loader drops each "
                  f"epoch's remainder in whole effective batches. "
                  + val_note(exact)),
         "details": exact_details, **meta},
        {"id": "17b", "benchmark": "fixed_batch",
         "name": "BatchNorm: the split found a learning knob (built-in CNN)",
         "figure": bn.within, "unit": "splits within seed noise", "baseline": len(bn.states),
         "ratio": bn.within / len(bn.states) if bn.states else None,
         "target": target(f"a batch-statistics layer detected and the split not exact (gap of the first {EARLY} "
                          f"steps' loss > {INEXACT:g})",
                          ("details.batch_stat_layer_count", ">=", 1),
                          ("details.max_step_gap", ">", INEXACT)).to_json(),
         "note": (f"The built-in CNN as shipped: tuner.measure.batch_stats finds {', '.join(bn.layers) or 'nothing'}"
                  f", so a study says its micro-batch is a learning knob. The split changes the loss from the first "
                  f"steps (largest gap of a step's loss {gaps(bn)}); over {steps} steps the parity "
                  f"statistic reads: {bn_verdicts} (the figure: how many stay within seed noise, a finding, not the "
                  f"target). " + val_note(bn) + " (evaluation normalizes by BatchNorm's running statistics, "
                  "updated once per micro-batch: a smaller micro-batch updates them more often.)"),
         "details": bn_details, **meta},
        {"id": "17c", "benchmark": "fixed_batch",
         "name": "throughput varies with the split of 64 (built-in CNN)",
         "figure": speed["across"], "unit": "x", "baseline": speed["noise"], "ratio": speed["ratio"],
         "target": target("ratio > 1: fastest / slowest split's median beyond the largest fastest / slowest round "
                          "of one split", ("ratio", ">", 1.0)).to_json(),
         "note": (f"Tuner trials (run_trial, {budget_s:g} s each, quality and ceilings off) of each split, {rounds} "
                  f"interleaved rounds, order rotated: median samples/s "
                  + ", ".join(f"{k} {v:.0f}" for k, v in med.items())
                  + f"; fastest {speed['fastest']}, slowest {speed['slowest']}. The baseline is the noise: the "
                  f"largest max/min of one split's own rounds ("
                  + ", ".join(f"{k} {v:.2f}" for k, v in speed["own_spread"].items()) + ")."),
         "details": speed, **meta},
    ]


def run_arm(cfg: Any, steps: int, cache: Path) -> Arm:
    """`steps` optimizer steps of `cfg`, fresh and seeded, loading in-process (a parity arm's own run, tuner.train.train_steps), then
    scored."""
    from tuner.device import resolve_device
    from tuner.measure.batch_stats import batch_statistics_layers
    from tuner.parity import FP32, arm_config
    from tuner.train import train_steps
    from tuner.train.trial import score

    cfg = arm_config(cfg, dict(FP32))  # fp32, no TF32, no compile; loading in-process
    t0 = time.perf_counter()
    with train_steps(cfg, steps, cache) as (training, losses):
        layers = batch_statistics_layers(*training.models.values())
        got = score(training.workload, training.models, training.val_set, resolve_device(cfg.params.device))
    return Arm(losses, got.get("loss"), got.get("accuracy"), time.perf_counter() - t0, len(training.train_set), layers)


def throughput(batch: int, accumulation: int, budget_s: float, cache: Path) -> float | None:
    """A tuner trial's throughput (what a study records) for one split of the shipped CNN."""
    from tuner.config import parse_config
    from tuner.train import run_trial

    params = {"batch_size": batch, "accumulation_steps": accumulation, "num_workers": 0, "device": "cpu"}
    cfg = parse_config({"workload": "cnn", "dataset": "digits", "budget": {"seconds": budget_s}, "params": params,
                        "quality": {"enabled": False}, "measure": {"ceiling_seconds": 0}}, "fixed-batch config")
    r = run_trial(cfg, cache_dir=cache, measure_ceilings=False)
    return r.throughput if r.state == "complete" else None


def markdown(doc: dict[str, Any]) -> str:
    """fixed-batch.md: the rows and each split's figures, generated from the results file."""
    from benchmarks.table import Row

    lines = [f"# Fixed effective batch: splits of {doc['effective_batch']} (CNN on digits)", "",
             f"Measured {doc['date'][:16].replace('T', ' ')} UTC on {doc['machine']}, load {doc['load']}; "
             f"{doc['steps']} steps an arm, {doc['rounds']} throughput rounds; {doc['seconds']:.0f} s in all.", "",
             "| # | row | figure | baseline | ratio | target | result |", "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        row = Row.from_json(r, "fixed-batch.json")
        fmt = (lambda v: "-" if v is None else f"{v:.3g}")
        lines.append(f"| {row.id} | {row.name} | {fmt(row.figure)} {row.unit} | {fmt(row.baseline)} | "
                     f"{fmt(row.ratio)} | {row.target.text} | {row.verdict()} |")
    lines += ["", f"| model | split | parity verdict against 64x1 | step gap, first {EARLY} | validation loss | samples/s |",
              "|---|---|---|---|---|---|"]
    speed = doc["rows"][2]["details"]["median"]
    for case, c in doc["cases"].items():
        for label, val in c["val_loss"].items():
            verdict = c["verdicts"].get(label, "reference" if label == doc["labels"][0] else "seed noise")
            gap = c["step_gap"].get(label, c["seed_step_gap"] if label not in doc["labels"] else 0.0)
            sp = speed.get(label) if case == "cnn" and label in doc["labels"] else None
            lines.append(f"| {case} | {label} | {verdict} | {gap:.1e} | "
                         f"{'-' if val is None else f'{val:.4f}'} | {'-' if sp is None else f'{sp:.0f}'} |")
    lines += [""] + [f"{r['id']}. {r['note']}" for r in doc["rows"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    from benchmarks.common import cpu_model, git_state
    from benchmarks.levers import schedule
    from tuner.config import Params, TrialConfig
    from tuner.files import json_safe

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="24 steps, 2 rounds, 1.5 s trials: checks the code")
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps per arm (80; quick 24)")
    ap.add_argument("--rounds", type=int, default=None, help="throughput rounds (3; quick 2)")
    ap.add_argument("--budget", type=float, default=None, help="seconds per throughput trial (3; quick 1.5)")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for fixed-batch.{json,md} (benchmarks/results; quick: reports/benchmarks/fixed-batch)")
    args = ap.parse_args()
    out = args.out or REPO / ("reports/benchmarks/fixed-batch" if args.quick else "benchmarks/results")
    steps = args.steps or (24 if args.quick else 80)
    n_rounds = args.rounds or (2 if args.quick else 3)
    budget_s = args.budget or (1.5 if args.quick else 3.0)
    t0 = time.perf_counter()
    load = [round(x, 2) for x in os.getloadavg()]
    commit, dirty = git_state()
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    cache = Path(tempfile.mkdtemp(prefix="tuner-fixed-batch-"))
    effective = Params().batch_size * Params().accumulation_steps
    splits = split_labels(effective)
    labels = [s[0] for s in splits]
    other = f"{labels[0]} seed 1"
    (cache / "fixed_batch_cnn.py").write_text(WORKLOADS)
    models = {name: {"workload": f"{cache / 'fixed_batch_cnn.py'}:{attr}"}
              for name, attr in (("cnn, BatchNorm removed", "no_batchnorm"), ("cnn", "shipped"))}
    cases: dict[str, CaseParity] = {}
    arm_seconds: dict[str, float] = {}
    trajectories: dict[str, dict[str, list[float]]] = {}
    for case, spec in models.items():
        arms: dict[str, Arm] = {}
        for label, batch, acc, seed in [*((lb, b, a, 0) for lb, b, a in splits), (other, effective, 1, 1)]:
            cfg = TrialConfig.model_validate({**spec, "dataset": "digits", "params": {
                "batch_size": batch, "accumulation_steps": acc, "seed": seed, "device": "cpu"}})
            arms[label] = run_arm(cfg, steps, cache)
            arm_seconds[f"{case}/{label}"] = arms[label].seconds
            print(f"[fixed-batch] {case} {label}: {len(arms[label].losses)} steps in {arms[label].seconds:.1f} s, "
                  f"val loss {arms[label].val_loss}", file=sys.stderr, flush=True)
        cases[case] = judge_case(arms, labels, other)
        trajectories[case] = {k: a.losses for k, a in arms.items()}
    split_of = {lb: (b, a) for lb, b, a in splits}
    speed_rounds: dict[str, list[float | None]] = {lb: [] for lb in labels}
    for rnd, _, label in schedule(n_rounds, ("cnn",), labels):
        got = throughput(*split_of[label], budget_s, cache)
        speed_rounds[label].append(got)
        print(f"[fixed-batch] round {rnd + 1}/{n_rounds} {label}: {got or 0:.0f} samples/s", file=sys.stderr,
              flush=True)
    speed = {**speed_figures(speed_rounds), "rounds": speed_rounds}
    meta = {"commit": commit, "dirty": dirty, "date": date, "load": load,
            "machine": f"{cpu_model()} ({os.cpu_count()} cores, no GPU)"}
    exact, bn = cases["cnn, BatchNorm removed"], cases["cnn"]
    doc = {"schema": SCHEMA, "effective_batch": effective, "labels": labels, "steps": steps, "rounds": n_rounds,
           "budget_s": budget_s, "quick": args.quick, "date": date, "machine": meta["machine"], "load": load,
           "rows": rows(exact, bn, speed, steps, n_rounds, budget_s, meta),
           "cases": {k: asdict(c) for k, c in cases.items()}, "arm_seconds": arm_seconds,
           "trajectories": trajectories}
    doc["load_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["seconds"] = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    (out / "fixed-batch.json").write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    (out / "fixed-batch.md").write_text(markdown(doc))
    for r in doc["rows"]:
        print(f"{r['id']} {r['name']}: {r['figure']} / {r['baseline']} (ratio {r['ratio']}); {r['note']}")
    print(f"[fixed-batch] {doc['seconds']:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
