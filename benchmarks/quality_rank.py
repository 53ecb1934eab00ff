"""Whether quality can rank a study's trials (issue 52 item 3): the false-alarm rate and the power of the test the
verdict uses (tuner.analysis.resolution.unresolved), on simulated studies, seeded, no training.

`python benchmarks/quality_rank.py [--studies N] [--out DIR]` simulates studies the way a default study confirms:
T trials (6, 12, 24) each read once by the search; the baseline (trial 0) and the best other search reading (the
candidate, chosen for being good) re-run twice each; every run's FID lognormal around its trial's true FID with a
run-to-run CV of 10-30% (sd 0.1, 0.2, 0.3 on the log scale). Each study goes through `unresolved` as the verdict
calls it (the confirmed centre where re-run, the search's reading otherwise, the re-runs' pooled noise), and counts
as rankable where it returns None.

Rows (benchmarks/table.py schema): qr-false, the largest share of equal-quality studies (every trial's true FID
alike) called rankable over the 9 sizes and noise levels, against pairs tested one by one (each pair's two-sample
test on the re-runs' noise, at 5%: the multiple comparison issue 52 found) in the same run; target <= 5%.
qr-power, the smallest share of studies whose trials' true FID spreads log-uniformly over 10x, the re-runs' noise
10%, called rankable (6, 12, 24 trials), against the same test on the re-runs alone (what the verdict judged by
before: a default study's FID 54-588 was called within the noise); target >= 95%. Details: a 5x spread at 20% noise,
and whether the studies the test does not rank are worded "within the noise of each other" (they should not be
where the readings differ more than the re-runs). Written to <out>/quality-rank.json; ~20 s on one core.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TRIALS = (6, 12, 24)
NOISE = (0.1, 0.2, 0.3)  # run-to-run sd of log FID: a CV of about 10%, 20%, 30%
CONFIRMED, RERUNS = 2, 2  # the default confirmation: the baseline and one candidate, two re-runs each
FALSE_LIMIT, POWER_LIMIT = 0.05, 0.95


def simulate(rng: random.Random, trials: int, sd: float, spread: float = 1.0, confirmed: int = CONFIRMED,
             reruns: int = RERUNS, worse: int | None = None) -> list[Any]:
    """One study's complete records: true FID 60 x spread^U(0, 1) per trial (trial `worse`, if any, at twice
    that), one search reading each, lognormal run-to-run noise `sd`; the baseline (trial 0) and the best other
    `confirmed - 1` search readings (chosen for being good, as the confirmation chooses) re-run `reruns` times
    (their confirmed figures). tests/analysis/test_resolution.py simulates its studies with it too."""
    from tuner.study import Confirmed, ConfirmedFigure, TrialRecord

    trues = [60.0 * (2.0 if n == worse else 1.0) * spread ** rng.random() for n in range(trials)]
    search = [t * rng.lognormvariate(0.0, sd) for t in trues]
    chosen = [0] + sorted(range(1, trials), key=lambda n: search[n])[:confirmed - 1]
    records = []
    for n in range(trials):
        rec = TrialRecord(trial=n, state="complete", metrics={"throughput": 100.0, "fid": search[n]})
        if n in chosen:
            values = [trues[n] * rng.lognormvariate(0.0, sd) for _ in range(reruns)]
            centre = math.exp(sum(math.log(v) for v in values) / len(values))
            rec.confirmed = Confirmed(runs=reruns, states=["complete"] * reruns,
                                      figures={"fid": ConfirmedFigure(values=values, centre=centre)})
        records.append(rec)
    return records


def judge(records: list[Any]) -> dict[str, bool]:
    """How each test reads one study: `test` (the verdict's), `reruns` (the same analysis of variance on the
    re-runs alone), `pairs` (any pair apart by its two-sample test), and `within` (the verdict, not ranking, says
    "within the noise of each other")."""
    from tuner.analysis import differ, pool
    from tuner.analysis.resolution import spread_beyond_noise, unresolved
    from tuner.analysis.study import confirmed_or_measured
    from tuner.study import Objective

    noise = pool([r.confirmed.figures["fid"].values for r in records if r.confirmed is not None])
    note = unresolved(records, Objective(metric="fid", direction="min"), confirmed_or_measured, noise)
    runs = [r.confirmed.figures["fid"].values if r.confirmed is not None else [r.metrics["fid"]] for r in records]
    points = [(confirmed_or_measured(r, "fid"), len(v)) for r, v in zip(records, runs)]
    pairs = any(differ(a, b, noise) for a, b in itertools.combinations(runs, 2))
    return {"test": note is None, "reruns": bool(spread_beyond_noise(points, noise)), "pairs": pairs,
            "within": note is not None and "within the noise of each other" in note}


def shares(studies: int, trials: int, sd: float, spread: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    counts = dict.fromkeys(("test", "reruns", "pairs", "within"), 0)
    for _ in range(studies):
        for k, v in judge(simulate(rng, trials, sd, spread)).items():
            counts[k] += v
    return {k: c / studies for k, c in counts.items()}


def measure(studies: int) -> dict[str, Any]:
    """Every cell's shares: equal quality at each size and noise; a 10x spread at 10% noise; a 5x at 20%."""
    cells: dict[str, Any] = {"equal": {}, "tenfold_at_10pct": {}, "fivefold_at_20pct": {}}
    for i, (t, sd) in enumerate(itertools.product(TRIALS, NOISE)):
        cells["equal"][f"{t}x{sd:g}"] = shares(studies, t, sd, 1.0, 1000 + i)
    for i, t in enumerate(TRIALS):
        cells["tenfold_at_10pct"][str(t)] = shares(studies, t, 0.1, 10.0, 2000 + i)
        cells["fivefold_at_20pct"][str(t)] = shares(studies, t, 0.2, 5.0, 3000 + i)
    return cells


def rows(cells: dict[str, Any], studies: int) -> list[dict[str, Any]]:
    """qr-false and qr-power from the measured cells."""
    from benchmarks.table import target

    equal, ten, five = cells["equal"], cells["tenfold_at_10pct"], cells["fivefold_at_20pct"]
    worst = max(c["test"] for c in equal.values())
    worst_pairs = max(c["pairs"] for c in equal.values())
    power = min(c["test"] for c in ten.values())
    power_reruns = min(c["reruns"] for c in ten.values())
    how = (f"{studies} simulated studies a cell, seeded: T trials read once by the search, the baseline and the best "
           f"other reading re-run {RERUNS}x each, each run's FID lognormal around its trial's (CV ~10/20/30%), "
           f"judged by tuner.analysis.resolution.unresolved as the verdict calls it.")
    details = {"studies_per_cell": studies, "trials": list(TRIALS), "noise_sd": list(NOISE), "confirmed": CONFIRMED,
               "reruns": RERUNS, "cells": cells, "worst_false": worst, "worst_false_pairs": worst_pairs,
               "power_tenfold": power, "power_tenfold_reruns_alone": power_reruns,
               "power_fivefold_at_20pct": min(c["test"] for c in five.values()),
               "unranked_tenfold_said_within": max(c["within"] for c in ten.values())}
    false_row = {
        "id": "qr-false", "benchmark": "quality_rank",
        "name": "equal-quality studies (6-24 trials, FID CV 10-30%) called rankable: the worst cell",
        "figure": worst, "unit": "share", "baseline": worst_pairs, "ratio": None,
        "target": target(f"<= {FALSE_LIMIT:.0%} at every size and noise", ("figure", "<=", FALSE_LIMIT)).to_json(),
        "note": "Share called rankable, by trials x noise sd: " + ", ".join(
            f"{k} {c['test']:.1%}" for k, c in equal.items()) + f"; pairs tested one by one (the baseline column): "
            f"up to {worst_pairs:.0%}. {how}",
        "details": details,
    }
    power_row = {
        "id": "qr-power", "benchmark": "quality_rank",
        "name": "a 10x FID spread, re-runs 10% apart, called rankable: the worst of 6/12/24 trials",
        "figure": power, "unit": "share", "baseline": power_reruns, "ratio": None,
        "target": target(f">= {POWER_LIMIT:.0%} at every size", ("figure", ">=", POWER_LIMIT)).to_json(),
        "note": "Share called rankable: " + ", ".join(f"{k} trials {c['test']:.1%}" for k, c in ten.items())
                + f"; the noise from the re-runs alone (the baseline column): " + ", ".join(
                    f"{c['reruns']:.1%}" for c in ten.values())
                + "; a 5x spread at 20% noise: " + ", ".join(f"{c['test']:.1%}" for c in five.values())
                + " (unranked ones said within the noise of each other: "
                + ", ".join(f"{c['within']:.1%}" for c in five.values()) + f"). {how}",
        "details": details,
    }
    return [false_row, power_row]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--studies", type=int, default=1000, help="simulated studies a cell (default 1000)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = ap.parse_args()
    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA
    from tuner.files import json_safe

    commit, dirty = git_state()
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    found = rows(measure(args.studies), args.studies)
    machine = f"{cpu_model()} (simulation, no training)"
    for r in found:
        r.update({"commit": commit, "dirty": dirty, "date": date, "machine": machine, "load": _loadavg() or []})
    doc = {"schema": SCHEMA, "rows": found, "date": date, "machine": machine,
           "seconds": time.perf_counter() - t0}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality-rank.json").write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    for r in found:
        print(f"{r['id']}: {r['figure']:.3f} (baseline {r['baseline']:.3f}); {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
