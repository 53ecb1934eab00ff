"""Goodput's sample cost against measured samples to target (issue 40, "How to show it"): does the samples-to-target
prediction the baseline's noise scale makes (tuner.analysis.goodput.sample_cost) rank 3 effective batch sizes as
training them to a target does, on the built-in CNN on digits (CPU)?

`python benchmarks/goodput_rank.py [--quick] [--rule adascale] [--out DIR]` runs, through tuner's CLI entry point
(tuner.cli.main, `tuner train`, in this process; samples, not seconds, so the machine's load moves no figure):

1. the reference: the CNN's own settings (effective batch M0 = 64, Adam lr 1e-3) trained R samples, evaluating every
   K samples (`tuner train --until-target` of an unreachable value: it never stops early). The target T is the mean
   of its last 3 evaluations (tuner.target.derive_target, what `--target baseline` derives); the noise scale
   phi is what that trial recorded (its pass after training: tuner.train.noise, a trial's own time cap).
2. each effective batch M in BATCHES (batch_size M, no accumulation), its lr from the CNN's by one named rule of
   tuner.analysis.goodput.scaled_lr (--rule; default adascale: the lr whose per-sample progress Pollux's efficiency
   (phi + M0) / (phi + M), hence sample_cost, describes; linear and sqrt are the others), trained from each seed of
   SEEDS to T (`tuner train --until-target T --eval-every-samples K --budget-samples CAP`): samples to target as tuner
   records it (the first evaluation at or below T, tuner.target.first_reached). A run not at T by its budget
   counts as CAP samples (it needed at least that many). Measured: the median over the seeds.
3. predicted: samples_to_target(M) = measured(M0) x sample_cost(M, M0, phi): the M0 arm's median (the same
   seeds, the same reading) scaled; at M0 itself the prediction is the measurement, by construction.

Rows (benchmarks/table.py schema): gp-rank, Kendall's tau-b between predicted and measured samples to target over
the 3 batch sizes (target 1: the same order; measured ties count against it), with Spearman's rho beside; gp-ratio,
the worst factor between predicted and measured at the two batch sizes other than M0 (target: within 2x). Written
to <out>/goodput-rank.json, and goodput-rank.md generated from it. Sized for ~10 minutes on 2 quiet cores; --quick
(1 seed, short runs) checks the script and writes under reports/benchmarks/goodput-rank/.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

UNREACHABLE = -1e30  # the CNN's loss is minimized: a target no run meets
BASE_BATCH = 64  # the CNN's own effective batch (tuner.config.Params: batch_size 64 x 1)
BASE_LR = 1e-3  # the CNN's own Adam lr (tuner/builtin/cnn.py)
RATIO_LIMIT = 2.0


@dataclass(frozen=True)
class Sizes:
    ref_samples: int  # R: the reference run's samples
    every: int  # K: samples between evaluations (a multiple of every batch size, so each evaluates on a step)
    batches: tuple[int, ...]
    seeds: tuple[int, ...]
    cap_factor: float  # an arm's budget: this many times R


SIZES = {
    # R = 25 K: the baseline's samples to target resolve to about 1/25 of R.
    "full": Sizes(6400, 256, (16, 64, 256), (1, 2, 3, 4, 5), 4.0),
    "quick": Sizes(1536, 256, (16, 64, 256), (1,), 3.0),
}


# --- the pure part: ranks and rows (tests/benchmarks/test_goodput_rank.py) ----------------------------------------


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho: Pearson's correlation of the ranks (None: a constant side)."""
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    if sx == 0 or sy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry)) / (sx * sy)


def kendall(xs: list[float], ys: list[float]) -> float | None:
    """Kendall's tau-b (ties on either side lower it; None: a constant side)."""
    conc = disc = tx = ty = 0
    n = len(xs)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + tx) * (conc + disc + ty))
    return (conc - disc) / denom if denom else None


@dataclass(frozen=True)
class Run:
    """One `tuner train --until-target` run of an arm."""

    batch: int
    seed: int
    lr: float
    state: str
    samples_to_target: int | None  # None: not reached (or failed)
    samples: int | None  # trained
    noise_scale: float | None
    train_seconds: float | None


def counted(run: Run, cap: int) -> int:
    """A run's samples to target as the arm's figure counts it: not reached (or failed) is the budget."""
    return run.samples_to_target if run.samples_to_target is not None else cap


def rows(runs: list[Run], phi: float, cap: int, rule: str, ref: dict[str, Any]) -> list[dict[str, Any]]:
    """gp-rank and gp-ratio from the runs, the reference's noise scale `phi` and the arms' budget `cap`."""
    from benchmarks.table import target
    from tuner.analysis.goodput import sample_cost

    batches = sorted({r.batch for r in runs})
    measured = {m: float(statistics.median(counted(r, cap) for r in runs if r.batch == m)) for m in batches}
    reached = {m: sum(r.samples_to_target is not None for r in runs if r.batch == m) for m in batches}
    n = {m: sum(r.batch == m for r in runs) for m in batches}
    base = measured[BASE_BATCH]
    predicted = {m: base * sample_cost(m, BASE_BATCH, phi) for m in batches}
    xs, ys = [predicted[m] for m in batches], [measured[m] for m in batches]
    tau, rho = kendall(xs, ys), spearman(xs, ys)
    factors = {m: max(predicted[m] / measured[m], measured[m] / predicted[m]) for m in batches if m != BASE_BATCH}
    worst = max(factors.values()) if factors else None
    cost = {m: measured[m] / base for m in batches if m != BASE_BATCH}
    implied = {m: implied_noise_scale(m, c) for m, c in cost.items()}
    why = "; ".join(f"M={m} measured {c:.2f}x M={BASE_BATCH}'s samples, " + (
        f"the cost at noise scale {implied[m]:.0f}" if implied[m] is not None else
        "which no noise scale gives (the model puts it between "
        f"{min(1.0, m / BASE_BATCH):g}x and {max(1.0, m / BASE_BATCH):g}x)") for m, c in cost.items())
    order_p, order_m = order(batches, predicted), order(batches, measured)
    seeds = sorted({r.seed for r in runs})
    per = "; ".join(f"M={m} (lr {scaled(m, rule, phi):.3g}): measured {measured[m]:,.0f} ({reached[m]}/{n[m]} "
                    f"reached), predicted {predicted[m]:,.0f} (cost {sample_cost(m, BASE_BATCH, phi):.2f}x)"
                    for m in batches)
    how = (f"The CNN on digits, its own settings (effective batch {BASE_BATCH}, Adam lr {BASE_LR:g}) trained "
           f"{ref['ref_samples']:,} samples evaluating every {ref['every']} set the target, validation loss "
           f"{ref['target']:.4f} (mean of its last 3 evaluations, tuner.target.derive_target), and its trial "
           f"recorded noise scale {phi:.0f} ({ref['noise_note']}). Each effective batch trained to the target from "
           f"seeds {seeds}, lr by the {rule} rule (tuner.analysis.goodput.scaled_lr), evaluating every {ref['every']} "
           f"samples, budget {cap:,} samples (a run not at the target by then counts as {cap:,}); measured = median "
           f"samples to target, predicted = the M={BASE_BATCH} median x sample_cost(M, {BASE_BATCH}, phi). {per}.")
    details = {"batches": batches, "measured": {str(m): measured[m] for m in batches},
               "predicted": {str(m): predicted[m] for m in batches},
               "sample_cost": {str(m): sample_cost(m, BASE_BATCH, phi) for m in batches},
               "reached": {str(m): reached[m] for m in batches}, "runs_per_batch": {str(m): n[m] for m in batches},
               "kendall_tau": tau, "spearman_rho": rho, "factors": {str(m): f for m, f in factors.items()},
               "worst_factor": worst, "measured_cost": {str(m): c for m, c in cost.items()},
               "implied_noise_scale": {str(m): v for m, v in implied.items()}, "noise_scale": phi, "rule": rule,
               "cap_samples": cap, "reference": ref, "runs": [asdict(r) for r in runs]}
    rank_row = {
        "id": "gp-rank", "benchmark": "goodput_rank",
        "name": "goodput's predicted samples to target ranks 3 effective batches as measured (CNN, digits)",
        "figure": tau, "unit": "Kendall tau", "baseline": 1.0, "ratio": tau,
        "target": target("Kendall tau-b = 1 (predicted and measured samples to target in the same order, no ties)",
                         ("figure", ">=", 1.0)).to_json(),
        "note": f"Order by prediction {order_p}; by measurement {order_m} (Kendall tau-b {_f(tau)}, Spearman rho "
                f"{_f(rho)}). Against the recorded noise scale {phi:.0f}: {why}. {how}",
        "details": details,
    }
    ratio_row = {
        "id": "gp-ratio", "benchmark": "goodput_rank",
        "name": "goodput's predicted samples to target within 2x of measured (CNN, digits)",
        "figure": worst, "unit": "x", "baseline": RATIO_LIMIT, "ratio": worst,
        "target": target(f"every predicted / measured within {RATIO_LIMIT:g}x (worst factor <= {RATIO_LIMIT:g}; "
                         f"M={BASE_BATCH} is 1 by construction and left out)", ("figure", "<=", RATIO_LIMIT)).to_json(),
        "note": "Worst factor between predicted and measured: " + ", ".join(
            f"M={m} {factors[m]:.2f}x ({'over' if predicted[m] > measured[m] else 'under'}-predicted)"
            for m in factors) + f". {how}",
        "details": details,
    }
    return [rank_row, ratio_row]


def order(batches: list[int], by: dict[int, float]) -> str:
    """The batch sizes from the fewest samples to the most, ties joined by '='."""
    ms = sorted(batches, key=lambda m: by[m])
    return "".join(("" if i == 0 else " = " if by[m] == by[ms[i - 1]] else " < ") + str(m) for i, m in enumerate(ms))


def implied_noise_scale(batch: int, cost: float) -> float | None:
    """The noise scale phi at which sample_cost(batch, BASE_BATCH, phi) equals the measured `cost` (solving
    (phi + M) / (phi + M0) = c for phi); None where no phi >= 0 gives it (a smaller batch measured dearer than the
    base, or a larger one cheaper: outside the model, which puts every cost between 1 and M / M0)."""
    if cost == 1.0 or batch == BASE_BATCH:
        return None
    phi = (batch - BASE_BATCH * cost) / (cost - 1.0)
    return phi if phi >= 0 else None


def scaled(batch: int, rule: str, phi: float) -> float:
    from tuner.analysis.goodput import scaled_lr

    return scaled_lr(BASE_LR, batch, BASE_BATCH, rule, phi)  # type: ignore[arg-type]


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


# --- the runs -------------------------------------------------------------------------------------------------------


def log(t0: float, msg: str) -> None:
    print(f"[goodput_rank {time.perf_counter() - t0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def train(cfg: dict[str, Any], work: Path, name: str, value: float, every: int) -> dict[str, Any]:
    """`tuner train --config X --until-target V --eval-every-samples K --format json` through the CLI's entry point
    in this process (the config's samples budget); its JSON result."""
    from tuner.cli import main

    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["train", "--config", str(path), "--until-target", repr(value), "--eval-every-samples", str(every),
                     "--reports-dir", str(work / "reports"), "--format", "json"])
    text = out.getvalue()
    start = text.find("{")
    if start < 0:
        return {"state": f"failed (exit {code})", "metrics": {}}
    return json.loads(text[start:])


def metric(doc: dict[str, Any], key: str) -> Any:
    return doc.get(key, (doc.get("metrics") or {}).get(key))


def config(batch: int, lr: float, seed: int, samples: int) -> dict[str, Any]:
    """A run's config. measure.ceiling_seconds = NOISE_SECONDS: the noise-scale pass's cap is the smaller of the two
    (tuner.train.noise.noise_seconds), and at the default 1 s the reference trial read 2 of the 4 pairs it needs at
    load 2 on 2 cores (no noise scale recorded); at 3 s it has the pass's own cap."""
    from tuner.train.noise import NOISE_SECONDS

    return {"workload": "cnn", "dataset": "digits", "budget": {"samples": samples},
            "params": {"batch_size": batch, "accumulation_steps": 1, "lr": lr, "seed": seed, "num_workers": 0,
                       "precision": "fp32"}, "measure": {"ceiling_seconds": NOISE_SECONDS}}


def reference(sizes: Sizes, work: Path) -> dict[str, Any]:
    """The baseline trained R samples: the target (tuner's derive_target on its curve) and its noise scale."""
    from tuner.config import Target
    from tuner.target import curve_points, derive_target

    doc = train(config(BASE_BATCH, BASE_LR, 0, sizes.ref_samples), work, "reference", UNREACHABLE, sizes.every)
    curve = curve_points(doc.get("quality_curve") or [])
    pending = Target(metric="loss", direction="minimize", value=None, eval_every_samples=sizes.every)
    derived = derive_target(curve, pending)
    if derived is None or derived.value is None:
        raise RuntimeError(f"the reference run read no loss (state {doc.get('state')}: {doc.get('error')})")
    phi = metric(doc, "noise_scale")
    skipped = metric(doc, "noise_scale_skipped")
    if phi is None:
        raise RuntimeError(f"the reference run recorded no noise scale: {skipped}")
    note = (f"the trial's pass after training, {metric(doc, 'noise_seconds') or 0:.1f} s, capped at "
            f"{config(BASE_BATCH, BASE_LR, 0, 1)['measure']['ceiling_seconds']:g} s")
    return {"target": derived.value, "noise_scale": float(phi), "noise_note": note, "ref_samples": sizes.ref_samples,
            "every": sizes.every, "evaluations": [p.as_list() for p in curve], "state": doc.get("state"),
            "train_seconds": metric(doc, "train_seconds")}


def run_arms(sizes: Sizes, ref: dict[str, Any], rule: str, work: Path, t0: float) -> list[Run]:
    """Every (seed, batch), seeds outermost and the batches' order rotated per seed."""
    cap = int(sizes.cap_factor * sizes.ref_samples)
    runs = []
    for i, seed in enumerate(sizes.seeds):
        order = sizes.batches[i % len(sizes.batches):] + sizes.batches[:i % len(sizes.batches)]
        for m in order:
            lr = scaled(m, rule, ref["noise_scale"])
            doc = train(config(m, lr, seed, cap), work, f"m{m}-seed{seed}", ref["target"], sizes.every)
            stt = metric(doc, "samples_to_target")
            run = Run(m, seed, lr, str(doc.get("state")), int(stt) if stt is not None else None,
                      metric(doc, "samples"), metric(doc, "noise_scale"), metric(doc, "train_seconds"))
            log(t0, f"M={m} seed {seed} lr {lr:.3g}: {run.state}, samples to target {run.samples_to_target}")
            runs.append(run)
    return runs


def markdown(doc: dict[str, Any]) -> str:
    """goodput-rank.md: the rows and the per-batch figures, generated from the results file."""
    from benchmarks.table import Row

    lines = ["# Goodput's sample cost vs measured samples to target (issue 40)", "",
             f"Measured {doc['date'][:16].replace('T', ' ')} UTC on {doc['machine']}, load {doc['load']}; "
             f"{doc['seconds']:.0f} s in all. Generated by benchmarks/goodput_rank.py from goodput-rank.json; do not "
             f"edit.", "", "| # | row | figure | target | result |", "|---|---|---|---|---|"]
    for r in doc["rows"]:
        row = Row.from_json(r, "goodput-rank.json")
        lines.append(f"| {row.id} | {row.name} | {_f(row.figure)} {row.unit} | {row.target.text} | {row.verdict()} |")
    d = doc["rows"][0]["details"]
    lines += ["", f"Noise scale {d['noise_scale']:.0f}, lr rule {d['rule']}, budget {d['cap_samples']:,} samples "
              f"(not reached counts as that):", "",
              "| effective batch | lr | sample cost | predicted | measured (median) | reached |",
              "|---|---|---|---|---|---|"]
    for m in d["batches"]:
        lr = next(r["lr"] for r in d["runs"] if r["batch"] == m)
        lines.append(f"| {m} | {lr:.3g} | {d['sample_cost'][str(m)]:.2f}x | {d['predicted'][str(m)]:,.0f} | "
                     f"{d['measured'][str(m)]:,.0f} | {d['reached'][str(m)]}/{d['runs_per_batch'][str(m)]} |")
    lines += ["", doc["rows"][0]["note"], ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 seed, short runs: checks the script (figures mean little)")
    ap.add_argument("--rule", choices=("linear", "sqrt", "adascale"), default="adascale",
                    help="the lr rule for the other batch sizes (tuner.analysis.goodput.scaled_lr)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the rows go (default: benchmarks/results; --quick: reports/benchmarks/goodput-rank)")
    args = ap.parse_args()
    import tempfile

    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA
    from tuner.files import json_safe

    mode = "quick" if args.quick else "full"
    sizes = SIZES[mode]
    out = args.out or (REPO / "benchmarks" / "results" if mode == "full" else REPO / "reports" / "benchmarks"
                       / "goodput-rank")
    load = _loadavg() or []
    commit, dirty = git_state()
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ref = reference(sizes, work)
        log(t0, f"target {ref['target']:.4f}, noise scale {ref['noise_scale']:.0f}")
        runs = run_arms(sizes, ref, args.rule, work, t0)
    cap = int(sizes.cap_factor * sizes.ref_samples)
    machine = f"{cpu_model()} (tuner's default threads, no GPU)"
    found = rows(runs, ref["noise_scale"], cap, args.rule, ref)
    for r in found:
        r.update({"commit": commit, "dirty": dirty, "date": date, "machine": machine, "load": load})
        if mode == "quick":
            r["note"] = "QUICK (a check of the script, not a result). " + r["note"]
    doc = {"schema": SCHEMA, "rows": found, "date": date, "machine": machine, "load": load,
           "seconds": time.perf_counter() - t0, "mode": mode}
    out.mkdir(parents=True, exist_ok=True)
    (out / "goodput-rank.json").write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    (out / "goodput-rank.md").write_text(markdown(json_safe(doc)))
    for r in found:
        print(f"{r['id']}: {_f(r['figure'])} {r['unit']}; {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
