"""The live scheduler benchmark's arithmetic (no study run): both fronts against one common reference, and its
table when the exported trial has one re-run (no interval) or none."""

from __future__ import annotations

import pytest

from benchmarks.live_scheduler import hypervolumes, markdown, reading


def _study(name: str, points: list[tuple[float, float]], exported: dict | None = None) -> dict:
    return {"study": f"live-{name}", "scheduler": name, "wall_s": 430.0, "load": {"mean": 4.0, "min": 3.0, "max": 5.0},
            "started": len(points), "stopped": 0, "complete": len(points), "metrics": ["throughput", "fid"],
            "minimize_quality": True, "points": [{"trial": i, "throughput": x, "fid": y} for i, (x, y) in
                                                 enumerate(points)], "exported": exported}


def test_a_front_that_dominates_the_other_has_the_larger_share_of_the_common_hypervolume():
    fifo = _study("fifo", [(100.0, 50.0), (200.0, 80.0)])
    asha = _study("asha", [(100.0, 40.0), (220.0, 70.0), (150.0, 90.0)])  # dominates fifo's two points
    hypervolumes([fifo, asha])
    assert asha["hv_fraction"] == pytest.approx(1.0) and fifo["hv"] < asha["hv"]
    assert 0 < fifo["hv_fraction"] < 1
    assert "higher" in reading([fifo, asha])


def test_the_table_shows_one_reading_or_a_single_rerun_without_an_interval():
    one = {"trial": 3, "search": {"throughput": 500.0, "fid": 60.0},
           "confirmed_figures": {"throughput": {"centre": 480.0, "low": None, "high": None, "runs": 1},
                                 "fid": {"centre": 61.0, "low": None, "high": None, "runs": 1}}}
    fifo = _study("fifo", [(100.0, 50.0)], exported=one)
    asha = _study("asha", [], exported={"trial": 0, "search": {"throughput": 400.0, "fid": 70.0}})
    hypervolumes([fifo, asha])
    text = markdown({"studies": [fifo, asha], "study_seconds": 420.0, "date": "today", "machine": "m",
                     "reading": reading([fifo, asha])})
    assert "480 (1 re-run)" in text and "400 (one reading)" in text


def _row(fifo: dict, asha: dict) -> str:
    from benchmarks.live_scheduler import rows
    from benchmarks.table import Row

    hypervolumes([fifo, asha])
    (found,) = rows([fifo, asha])
    assert found["id"] == "live-asha" and found["baseline"] == fifo["hv"] and found["figure"] == asha["hv"]
    return Row.from_json(found, "planted").verdict()


def test_live_asha_passes_with_a_front_as_good_from_stopped_trials_and_fails_otherwise():
    fifo = _study("fifo", [(100.0, 50.0), (200.0, 80.0)])
    asha = {**_study("asha", [(100.0, 40.0), (220.0, 70.0)]), "stopped": 2}
    assert _row(fifo, asha) == "pass"
    # as good a front, but no trial stopped: the pair compared two fifo studies
    assert _row(fifo, {**asha, "stopped": 0}) == "MISSED"
    # stops that cost the front: asha found only fifo's slow point
    assert _row(fifo, {**_study("asha", [(100.0, 50.0)]), "stopped": 3}) == "MISSED"
