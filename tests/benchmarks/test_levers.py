"""The levers benchmark's published row from planted interleaved runs (no training): channels_last, which the
default study's probes set for the GAN, judged against eager in full trials."""

from __future__ import annotations

import pytest

from benchmarks.levers import summarize
from benchmarks.table import Row


def _runs(workload: str, cl: list[float]) -> list[dict]:
    out = []
    for rnd, thr in enumerate(cl):
        for arm, value in (("eager", 100.0), ("compiled", 80.0), ("channels_last", thr)):
            out.append({"round": rnd, "workload": workload, "arm": arm, "state": "complete", "error": None,
                        "throughput": value, "compile_seconds": 30.0 if arm == "compiled" else None,
                        "of_peak": 0.1, "of_peak_skipped": None})
    return out


def test_the_gans_channels_last_row_passes_within_the_noise_and_fails_when_slower():
    results = summarize(_runs("cnn", [80.0, 80.0, 80.0]) + _runs("gan", [96.0, 112.0, 97.0]), 3)
    rows = [r for r in results if r.row]
    assert [r.row for r in rows] == ["levers-cl-gan"]  # the CNN's and the compiled arms' figures stay reported
    assert rows[0].ratio == pytest.approx(0.97) and rows[0].pass_ is True
    slower = next(r for r in summarize(_runs("gan", [88.0, 90.0, 120.0]), 3) if r.row)
    assert slower.ratio == pytest.approx(0.90) and slower.pass_ is False
    # the row as the table reads it back from run-full.json
    row = Row.from_json({"id": slower.row, "benchmark": "levers", "name": slower.name, "figure": slower.figure,
                         "baseline": slower.baseline, "ratio": slower.ratio, "target": slower.rule.to_json()}, "x")
    assert row.verdict() == "MISSED"
