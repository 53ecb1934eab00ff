"""Benchmark 14, noise scale: a trial's cheap noise-scale estimate against a brute-force reference, on the built-in
CNN on digits.

One model, trained first (tuner's own step, batch 64, Adam at the CNN's defaults) so its gradient is past the
first steps', then held fixed while both read it:

- cheap: what a trial records (tuner.train.noise.measure_noise_scale), its MAX_GROUPS pairs without the time cap
  (how many pairs a trial's cap holds depends on the machine's load: the note says, from the pass's cost), repeated
  with different data orders; and the same repeats' first 4 pairs alone (the fewest a trial reads).
- brute force (McCandlish et al. 2018, appendix A.1): the squared norm of the mean gradient of REPEATS random
  batches at each of several batch sizes, fitted by least squares to |G_B|^2 = |G|^2 + tr(Sigma) / B; the
  reference noise scale is tr(Sigma) / |G|^2 of the fit. The full-batch gradient (the whole training split, the
  true G of this finite dataset) is read too, as a check on the fit's |G|^2.

Target: the cheap estimate's median within a factor of 2 of the reference, and every repeat that measured within a
factor of 3. Writes benchmarks/results/noise-scale.json (rows schema: benchmarks/table.py), row 14.
Run: python -m benchmarks.noise_scale [--train-steps N] [--repeats N].
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import _loadavg, cpu_model, git_state  # noqa: E402
from benchmarks.table import SCHEMA, target  # noqa: E402

BATCHES = (16, 32, 64, 128, 256)
REPEATS_PER_SIZE = 12
TARGET_TEXT = "0.5 <= ratio <= 2 (median cheap / brute force) and every repeat within 3x"


def grad_sqr(models: dict[str, Any], phase: Any, owned: list[Any], batch: Any) -> float:
    """|gradient of the mean loss over `batch`|^2 (fp32, double sum)."""
    import torch

    from tuner.workload.api import Shared

    loss = phase.loss(models, batch, Shared(0, 1))
    grads = torch.autograd.grad(loss, owned, allow_unused=True)
    return float(sum(g.double().pow(2).sum() for g in grads if g is not None))


def full_gradient_sqr(models: dict[str, Any], phase: Any, owned: list[Any], data: Any, chunk: int = 256) -> float:
    """|mean gradient over the whole training split|^2: the chunks' gradients weighted by their sizes."""
    import torch

    from tuner.workload.api import Shared

    total, n = None, 0
    for start in range(0, len(data), chunk):
        idx = list(range(start, min(start + chunk, len(data))))
        batch = collate(data, idx)
        loss = phase.loss(models, batch, Shared(0, 1)) * len(idx)
        grads = [g if g is not None else torch.zeros_like(t)
                 for g, t in zip(torch.autograd.grad(loss, owned, allow_unused=True), owned)]
        total = grads if total is None else [a + b for a, b in zip(total, grads)]
        n += len(idx)
    assert total is not None
    return float(sum((g.double() / n).pow(2).sum() for g in total))


def collate(data: Any, idx: list[int]) -> Any:
    from torch.utils.data import default_collate

    return default_collate([data[i] for i in idx])


def brute_force(models: dict[str, Any], phase: Any, owned: list[Any], data: Any, seed: int) -> dict[str, Any]:
    """Mean |G_B|^2 at each batch size, and the least-squares fit of |G_B|^2 = a + c / B (a = |G|^2, c = tr)."""
    import random

    rng = random.Random(seed)
    means = {}
    for b in BATCHES:
        vals = [grad_sqr(models, phase, owned, collate(data, rng.sample(range(len(data)), b)))
                for _ in range(REPEATS_PER_SIZE)]
        means[b] = statistics.fmean(vals)
    xs = [1.0 / b for b in BATCHES]
    ys = [means[b] for b in BATCHES]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    c = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - c * mx
    return {"mean_sqr_by_batch": {str(b): means[b] for b in BATCHES}, "grad_sqr_fit": a, "trace_fit": c,
            "noise_scale": c / a if a > 0 else None}


def run(train_steps: int, repeats: int, seed: int) -> dict[str, Any]:
    """Train, then read the same weights both ways, inside a trial's scope (the workload reads its context)."""
    import tempfile

    from tuner.config import parse_config
    from tuner.device import resolve_device
    from tuner.train.trial import trial_scope

    cfg = parse_config({"workload": "cnn", "dataset": "digits", "budget": {"seconds": 20},
                        "params": {"batch_size": 64, "seed": seed, "device": "cpu", "threads": 2}})
    device = resolve_device("cpu")
    with tempfile.TemporaryDirectory() as cache, trial_scope(cfg, device, Path(cache), None):
        return _run(cfg, device, train_steps, repeats, seed)


def _run(cfg: Any, device: Any, train_steps: int, repeats: int, seed: int) -> dict[str, Any]:
    import torch

    from tuner.train.distributed import unwrap
    from tuner.measure.noise_scale import MIN_PAIRS
    from tuner.train.noise import measure_noise_scale, noise_seconds
    from tuner.train.trial import build_training

    training = build_training(cfg, device)
    batches = training.batches()
    t0 = time.perf_counter()
    for _ in range(train_steps):
        training.step(batches)
    train_s = time.perf_counter() - t0
    step_s = train_s / max(train_steps, 1)
    batches.close()
    models = {k: unwrap(m) for k, m in training.models.items()}
    phase = training.workload.training_phases()[0]
    owned = [t for k in phase.models for t in models[k].parameters() if t.requires_grad]
    for m in models.values():
        m.train()

    cap = noise_seconds(cfg)
    cheap: list[dict[str, Any]] = []
    for r in range(repeats):  # no time cap: every repeat reads its MAX_GROUPS pairs (what the cap allows varies)
        rcfg = cfg.model_copy(update={"params": cfg.params.model_copy(update={"seed": seed + 1 + r})})
        t = time.perf_counter()
        found, why = measure_noise_scale(rcfg, device, training.workload, training.train_set, models, 600.0)
        took = time.perf_counter() - t
        four = found.estimate(first=MIN_PAIRS) if found is not None else None
        cheap.append({"noise_scale": found.value() if found is not None else None,
                      "pairs": found.pairs if found is not None else 0, "seconds": took,
                      "seconds_per_pair": took / found.pairs if found else None,
                      "noise_scale_first_4_pairs": four.noise_scale if four is not None else None, "skipped": why})
    t = time.perf_counter()
    brute = brute_force(models, phase, owned, training.train_set, seed)
    brute["seconds"] = time.perf_counter() - t
    brute["full_batch_grad_sqr"] = full_gradient_sqr(models, phase, owned, training.train_set)
    brute["noise_scale_full_batch_g"] = brute["trace_fit"] / brute["full_batch_grad_sqr"]
    return {"cheap": cheap, "brute": brute, "cap_seconds": cap, "train_steps": train_steps,
            "train_seconds": train_s, "step_seconds": step_s, "train_size": len(training.train_set)}


def row(found: dict[str, Any], commit: str | None, dirty: bool, date: str, load: list[float]) -> dict[str, Any]:
    ref = found["brute"]["noise_scale"]
    values = [c["noise_scale"] for c in found["cheap"] if c["noise_scale"] is not None]
    med = statistics.median(values) if values else None
    factors = [max(v / ref, ref / v) for v in values] if ref else []
    four = [c["noise_scale_first_4_pairs"] for c in found["cheap"] if c["noise_scale_first_4_pairs"] is not None]
    four_factors = [max(v / ref, ref / v) for v in four] if ref else []
    per_pair = statistics.fmean(c["seconds_per_pair"] for c in found["cheap"] if c["seconds_per_pair"])
    pairs = statistics.fmean(c["pairs"] for c in found["cheap"])
    step_s = found["step_seconds"]
    return {
        "id": "14", "benchmark": "noise_scale", "name": "cheap noise-scale estimate vs brute force (CNN, digits)",
        "figure": med, "unit": "samples", "baseline": ref, "ratio": med / ref if med and ref else None,
        "target": target(TARGET_TEXT, ("ratio", ">=", 0.5), ("ratio", "<=", 2.0),
                         ("details.worst_factor", "<=", 3.0)).to_json(),
        "commit": commit, "dirty": dirty, "date": date, "machine": f"{cpu_model()} (2 torch threads, no GPU)",
        "load": load,
        "note": (f"After {found['train_steps']} training steps at batch 64 (Adam, lr 1e-3), weights held: a trial's "
                 f"pass (tuner.train.noise: pairs of 4 micro-batches of 64), {len(found['cheap'])} repeats with "
                 f"other data orders, {pairs:.0f} pairs each (median {_f(med)}, worst {_fx(factors)} off; from "
                 f"their first 4 pairs only, worst {_fx(four_factors)} off), against a least-squares fit of "
                 f"|G_B|^2 = |G|^2 + tr/B over {REPEATS_PER_SIZE} random batches at each of {list(BATCHES)} "
                 f"({found['brute']['seconds']:.0f} s); with the full-batch |G|^2 instead of the fit's the "
                 f"reference reads {_f(found['brute']['noise_scale_full_batch_g'])}. Cost: {per_pair:.2f} s a pair "
                 f"= {per_pair / step_s:.1f} training steps (a step {step_s:.2f} s at this load); a trial's cap "
                 f"({found['cap_seconds']:.1f} s for a 20 s budget) holds about {found['cap_seconds'] / per_pair:.1f} "
                 f"pairs at this load, and needs 4."),
        "details": {"worst_factor": max(factors) if factors and len(values) == len(found["cheap"]) else None,
                    "worst_factor_first_4_pairs": max(four_factors) if four_factors else None,
                    "repeats": found["cheap"], "brute_force": found["brute"],
                    "cap_seconds": found["cap_seconds"], "step_seconds": step_s,
                    "seconds_per_pair": per_pair, "train_steps": found["train_steps"],
                    "train_size": found["train_size"]},
    }


def _fx(factors: list[float]) -> str:
    return f"{max(factors):.2f}x" if factors else "-"


def _f(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "noise-scale.json")
    args = ap.parse_args()
    load = _loadavg() or []
    commit, dirty = git_state()
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    found = run(args.train_steps, args.repeats, args.seed)
    doc = {"schema": SCHEMA, "rows": [row(found, commit, dirty, date, load)]}
    from tuner.files import json_safe

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    r = doc["rows"][0]
    print(f"cheap {_f(r['figure'])} vs brute force {_f(r['baseline'])}: ratio "
          f"{r['ratio'] if r['ratio'] is None else round(r['ratio'], 3)}; {r['note']}")


if __name__ == "__main__":
    main()
