"""The goodput rank benchmark's arithmetic (benchmarks/goodput_rank.py) on planted runs, no training: ranks and their
correlations with ties, a not-reached run counted as the budget, the prediction scaled from the base batch's median
by tuner's sample cost, and the rows' verdicts."""

from __future__ import annotations

import pytest

from benchmarks.goodput_rank import BASE_BATCH, Run, implied_noise_scale, kendall, markdown, ranks, rows, spearman
from benchmarks.table import Row
from tuner.analysis.goodput import sample_cost

PHI = 100.0
CAP = 20000
REF = {"target": 0.5, "noise_scale": PHI, "noise_note": "planted", "ref_samples": 6400, "every": 256}


def _runs(by_batch: dict[int, list[int | None]]) -> list[Run]:
    return [Run(m, seed, 1e-3, "complete", s, s or CAP, PHI, 1.0)
            for m, values in by_batch.items() for seed, s in enumerate(values, 1)]


def _verdicts(runs: list[Run]) -> dict[str, str]:
    return {r["id"]: Row.from_json(r, "goodput-rank.json").verdict() for r in rows(runs, PHI, CAP, "adascale", REF)}


def test_ranks_share_ties_and_the_correlations_read_them():
    assert ranks([3.0, 1.0, 2.0, 1.0]) == [4.0, 1.5, 3.0, 1.5]
    assert kendall([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert kendall([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert kendall([1, 2, 3], [10, 10, 30]) < 1.0  # a measured tie is no agreement on that pair
    assert spearman([1, 2, 3], [10, 10, 30]) < 1.0
    assert spearman([1, 2, 3], [5, 6, 7]) == pytest.approx(1.0)
    assert kendall([1, 2, 3], [4, 4, 4]) is None and spearman([1, 2, 3], [4, 4, 4]) is None


def test_the_prediction_scales_the_base_batchs_median_by_the_sample_cost():
    found = rows(_runs({16: [900, 1000, 1100], 64: [1200, 1300, 1400], 256: [2500, 2600, 2800]}), PHI, CAP,
                 "adascale", REF)
    d = found[0]["details"]
    assert d["measured"] == {"16": 1000.0, "64": 1300.0, "256": 2600.0}
    assert d["predicted"]["256"] == pytest.approx(1300 * sample_cost(256, BASE_BATCH, PHI))
    assert d["predicted"]["64"] == 1300.0 and "64" not in d["factors"]  # 1 by construction: left out of the ratio


def test_same_order_within_2x_passes_and_an_inverted_order_misses():
    assert _verdicts(_runs({16: [1000], 64: [1300], 256: [2600]})) == {"gp-rank": "pass", "gp-ratio": "pass"}
    tie = rows(_runs({16: [1300], 64: [1300], 256: [2600]}), PHI, CAP, "adascale", REF)[0]
    assert "by measurement 16 = 64 < 256" in tie["note"] and Row.from_json(tie, "f").verdict() == "MISSED"
    # the large batch measured cheaper than the base: the order is wrong, and 2600 / 1100 is over 2x
    assert _verdicts(_runs({16: [1000], 64: [1300], 256: [1100]})) == {"gp-rank": "MISSED", "gp-ratio": "MISSED"}


def test_a_run_that_never_reached_the_target_counts_as_the_budget():
    found = rows(_runs({16: [1000], 64: [1300], 256: [None, None, 2600]}), PHI, CAP, "adascale", REF)
    d = found[0]["details"]
    assert d["measured"]["256"] == CAP and d["reached"]["256"] == 1
    assert Row.from_json(found[1], "goodput-rank.json").verdict() == "MISSED"  # CAP is 7x the prediction


def test_the_markdown_is_generated_from_the_rows():
    found = rows(_runs({16: [1000], 64: [1300], 256: [2600]}), PHI, CAP, "adascale", REF)
    doc = {"rows": found, "date": "2026-11-27T10:00:00+00:00", "machine": "test", "load": [1.0], "seconds": 1.0}
    md = markdown(doc)
    assert "| gp-rank |" in md and "| gp-ratio |" in md and "| 256 |" in md


def test_the_note_names_the_noise_scale_a_measured_cost_implies_or_that_none_does():
    assert implied_noise_scale(256, sample_cost(256, BASE_BATCH, 110.0)) == pytest.approx(110.0)
    assert implied_noise_scale(16, sample_cost(16, BASE_BATCH, 300.0)) == pytest.approx(300.0)
    assert implied_noise_scale(16, 1.1) is None  # a smaller batch dearer than the base: outside the model
    found = rows(_runs({16: [1400], 64: [1300], 256: [2600]}), PHI, CAP, "adascale", REF)[0]
    assert "M=16 measured 1.08x M=64's samples, which no noise scale gives" in found["note"]
    assert "M=256 measured 2.00x M=64's samples, the cost at noise scale 128" in found["note"]
