"""The quality-rank benchmark (benchmarks/quality_rank.py): its simulated studies go through the verdict's own test,
and its rows can fail."""

from __future__ import annotations

import random

from benchmarks.quality_rank import CONFIRMED, RERUNS, judge, measure, rows, simulate
from benchmarks.table import Row


def _cells(false: float, power: float) -> dict:
    one = {"test": false, "reruns": false, "pairs": 0.3, "within": 0.9}
    strong = {"test": power, "reruns": 0.7, "pairs": 1.0, "within": 0.0}
    return {"equal": {"6x0.1": one, "24x0.3": dict(one, test=false / 2)},
            "tenfold_at_10pct": {"6": strong, "24": dict(strong, test=1.0)},
            "fivefold_at_20pct": {"6": strong}}


def _verdicts(cells: dict) -> dict[str, str]:
    return {r["id"]: Row.from_json(r, "quality-rank.json").verdict() for r in rows(cells, 10)}


def test_the_rows_pass_and_fail_on_their_figures():
    assert _verdicts(_cells(0.02, 0.99)) == {"qr-false": "pass", "qr-power": "pass"}
    assert _verdicts(_cells(0.12, 0.99))["qr-false"] == "MISSED"  # equal studies called rankable 12% of the time
    assert _verdicts(_cells(0.02, 0.80))["qr-power"] == "MISSED"  # a 10x spread missed in 20% of studies


def test_a_simulated_study_is_confirmed_as_a_default_study_is():
    records = simulate(random.Random(0), 12, 0.2)
    confirmed = [r.trial for r in records if r.confirmed is not None]
    assert len(records) == 12 and len(confirmed) == CONFIRMED and confirmed[0] == 0
    assert all(len(r.confirmed.figures["fid"].values) == RERUNS for r in records if r.confirmed is not None)
    # the candidate is the best other search reading: chosen for being good, as the confirmation chooses
    best = min((r for r in records if r.trial != 0), key=lambda r: r.metrics["fid"])
    assert best.trial in confirmed


def test_a_tenfold_spread_with_quiet_re_runs_is_ranked_and_equal_studies_mostly_are_not():
    rng = random.Random(1)
    assert judge(simulate(rng, 12, 0.05, spread=10.0))["test"]
    cells = measure(40)
    assert max(c["test"] for c in cells["equal"].values()) <= 0.1
    assert min(c["test"] for c in cells["tenfold_at_10pct"].values()) >= 0.9
