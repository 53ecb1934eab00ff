"""The contention benchmark's published row from planted pairs (no process run): tuner train / plain loop under
busy neighbours, judged by its band, and only for a run with neighbours and nothing set."""

from __future__ import annotations

import pytest

from benchmarks.contention import rows
from benchmarks.table import Row


def _doc(ratios: list[float], neighbours: int = 2, **extra) -> dict:
    pairs = [{"tuner": {"throughput": 100.0 * r, "loadavg": 4.0}, "plain": {"throughput": 100.0, "loadavg": 4.5},
              "ratio": r} for r in ratios]
    return {"pairs": pairs, "seconds": 8.0, "batch": 64, "threads": None, "neighbours": neighbours, "env": {},
            "plain_env": {}, "light": False, **extra}


def _verdict(doc: dict) -> str:
    (row,) = rows(doc)
    return Row.from_json(row, "planted").verdict()


def test_ctn_load_passes_inside_the_band_under_load_and_fails_outside_it():
    (row,) = rows(_doc([0.95, 1.08, 0.62, 0.99, 1.02]))
    assert row["id"] == "ctn-load" and row["ratio"] == pytest.approx(0.99) and row["baseline"] == 100.0
    assert "0.62" in row["note"] and Row.from_json(row, "planted").verdict() == "pass"
    assert _verdict(_doc([0.80, 0.82, 0.78, 1.0])) == "MISSED"  # tuner reads 19% below the plain loop
    assert _verdict(_doc([1.2, 1.3, 1.25])) == "MISSED"


def test_ctn_load_is_missed_on_a_quiet_run_or_one_that_set_variables():
    assert _verdict(_doc([1.0, 1.0], neighbours=0)) == "MISSED"  # not the claim: nothing shared the cores
    assert _verdict(_doc([1.0, 1.0], plain_env={"OMP_WAIT_POLICY": "PASSIVE"})) == "MISSED"
    assert _verdict(_doc([1.0, 1.0], env={"GOMP_SPINCOUNT": "300000"})) == "MISSED"
    assert _verdict(_doc([1.0, 1.0], light=True)) == "pass"  # fewer window minimums where a step takes seconds


def test_ctn_load_says_how_far_its_median_could_move():
    """12 pairs under load give the median's interval by order statistics (3rd and 10th of 12); where it spills
    out of the band the note says the pairs cannot place the median, so a reader does not take 1.23 as settled."""
    wide = [0.71, 1.50, 1.20, 1.26, 1.28, 0.94, 0.88, 1.31, 1.05, 0.79, 1.40, 1.10]
    (row,) = rows(_doc(wide))
    assert row["details"]["median_interval"] == [0.88, 1.31]
    assert "96% interval 0.88-1.31" in row["note"] and "cannot place the median" in row["note"]
    tight = [0.97, 1.02, 1.0, 0.99, 1.03, 0.98, 1.01, 1.04, 0.96, 1.0, 1.02, 0.99]
    (row,) = rows(_doc(tight))
    assert row["details"]["median_interval"] == [0.98, 1.02] and "cannot place" not in row["note"]
    (row,) = rows(_doc([1.0, 1.1, 0.9]))  # too few pairs for 95%: min-max, with the coverage it has
    assert row["details"]["median_interval"] == [0.9, 1.1] and "75% interval 0.90-1.10" in row["note"]
